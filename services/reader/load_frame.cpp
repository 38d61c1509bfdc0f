// SPDX-License-Identifier: BSD-3-Clause
#include "load_frame.hpp"

#include <chrono>
#include <fstream>
#include <iterator>

#include "ex2d/extraction.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/service/fault_injection.hpp"

namespace ex2d::reader {

namespace {

Result<std::vector<std::uint8_t>> read_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::io(path + ": cannot open");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) return Status::io(path + ": read error");
    return bytes;
}

}  // namespace

Result<service::FrameInputs> load_frame(const service::Job& job, const std::string& reader_name)
{
    const auto start = std::chrono::steady_clock::now();
    EX2D_ASSIGN_OR_RETURN(ExtractionOptions opt, service::options_from_json(job.options));
    EX2D_ASSIGN_OR_RETURN(std::vector<std::uint8_t> psf_bytes, read_bytes(job.psf));
    // Parse the very bytes that travel, so that the worker gets exactly what was checked.
    EX2D_ASSIGN_OR_RETURN(GaussHermitePsf psf, read_psf_bytes(psf_bytes, job.psf));
    EX2D_RETURN_NOT_OK(validate_options(psf, opt));
    EX2D_ASSIGN_OR_RETURN(PreprocImage img,
                          read_preproc(job.preproc, {}, PreprocPlanes::extraction));
    // `ex2d extract`'s own checks, with its messages: the fleet refuses what it refuses.
    EX2D_RETURN_NOT_OK(check_extraction_inputs(img, img.fibermap, psf, opt,
                                               {job.preproc, job.psf, job.preproc, job.output}));
    // The fleet's own: the camera named by the file (the job) must match too.
    EX2D_RETURN_NOT_OK(check_psf_camera(job.camera, job.preproc, psf, job.psf));
    if (auto camera = img.header.get_string("CAMERA")) {
        if (!camera->empty() && *camera != job.camera) {
            return Status::format(job.preproc + ": CAMERA is '" + *camera + "' but the job is for " +
                                  job.camera);
        }
    }
    if (img.fibermap.empty()) {
        return Status::format(job.preproc + ": no FIBERMAP HDU (the frame needs one)");
    }
    service::FrameInputs in;
    in.job = job;
    in.reader = reader_name;
    in.ny = img.ny;
    in.nx = img.nx;
    in.weights = img.take_weights();
    in.image = std::move(img.image);
    in.image_header = std::move(img.header);
    in.fibermap = std::move(img.fibermap);
    in.psf_checksum = wire::hex64(wire::checksum64(psf_bytes.data(), psf_bytes.size()));
    const auto preproc_sum = wire::file_checksum64(job.preproc);
    if (!preproc_sum) return Status::io(job.preproc + ": cannot read for its checksum");
    in.preproc_checksum = wire::hex64(*preproc_sum);
    in.psf_file = std::move(psf_bytes);
    service::test_delay("READ");
    in.read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return in;
}

}  // namespace ex2d::reader
