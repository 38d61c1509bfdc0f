// SPDX-License-Identifier: BSD-3-Clause
#include "load_frame.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "ex2d/extraction.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/service/fault_injection.hpp"
#include "trace_shift_step.hpp"

namespace ex2d::reader {

namespace {

Result<std::vector<std::uint8_t>> read_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::io(path + ": cannot open");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                    std::istreambuf_iterator<char>());
    if (in.bad()) return Status::io(path + ": read error");
    return bytes;
}

/// The checks that need the header and FIBERMAP only: `ex2d extract`'s own, with its messages
/// (the fleet refuses what it refuses), and the fleet's: the camera named by the job.
Status check_frame(const service::Job& job, const PreprocImage& header_only,
                   const GaussHermitePsf& psf, const ExtractionOptions& opt)
{
    EX2D_RETURN_NOT_OK(check_extraction_inputs(header_only, header_only.fibermap, psf, opt,
                                               {job.preproc, job.psf, job.preproc, job.output}));
    EX2D_RETURN_NOT_OK(check_psf_camera(job.camera, job.preproc, psf, job.psf));
    if (auto camera = header_only.header.get_string("CAMERA")) {
        if (!camera->empty() && *camera != job.camera) {
            return Status::format(job.preproc + ": CAMERA is '" + *camera +
                                  "' but the job is for " + job.camera);
        }
    }
    if (header_only.fibermap.empty()) {
        return Status::format(job.preproc + ": no FIBERMAP HDU (the frame needs one)");
    }
    return Status::ok();
}

/// The job's bad-column table, read before the pixels (datamodel 4.7): a malformed file fails
/// the job with its name; a missing one gets desi_proc's warning and an unmasked frame.
Status read_badcolumn_table(const service::Job& job, std::string& state, BadColumns& table)
{
    state = "none";
    if (job.badcolumns.empty()) return Status::ok();
    std::error_code ec;
    if (!std::filesystem::exists(job.badcolumns, ec)) {
        state = "missing";
        logger()->warn(
            "badcolumns missing file={}: the frame is written without the "
            "bad-column mask, as desi_proc does",
            job.badcolumns);
        return Status::ok();
    }
    EX2D_ASSIGN_OR_RETURN(table, read_badcolumns_csv(job.badcolumns));
    state = "read";
    return Status::ok();
}

}  // namespace

Result<service::FrameInputs> FrameLoader::load_as_float64(const service::Job& job)
{
    service::FrameInputs in;
    EX2D_ASSIGN_OR_RETURN(PreprocImage img,
                          read_preproc(job.preproc, {}, PreprocPlanes::extraction));
    const auto preproc_sum = wire::file_checksum64(job.preproc);
    if (!preproc_sum) return Status::io(job.preproc + ": cannot read for its checksum");
    in.preproc_checksum = wire::hex64(*preproc_sum);
    in.ny = img.ny;
    in.nx = img.nx;
    in.weights = img.take_weights();
    in.image = std::move(img.image);
    in.image_header = std::move(img.header);
    in.fibermap = std::move(img.fibermap);
    return in;
}

Result<LoadedFrame> FrameLoader::load(const service::Job& job)
{
    const auto start = std::chrono::steady_clock::now();
    EX2D_ASSIGN_OR_RETURN(ExtractionOptions opt, service::options_from_json(job.options));
    std::string badcolumn_state;
    BadColumns badcolumns;
    EX2D_RETURN_NOT_OK(read_badcolumn_table(job, badcolumn_state, badcolumns));
    EX2D_ASSIGN_OR_RETURN(std::vector<std::uint8_t> psf_bytes, read_bytes(job.psf));
    // Parse the very bytes that travel, so that the worker gets exactly what was checked.
    EX2D_ASSIGN_OR_RETURN(GaussHermitePsf psf, read_psf_bytes(psf_bytes, job.psf));
    EX2D_RETURN_NOT_OK(validate_options(psf, opt));
    // Headers, shapes and FIBERMAP first: a wrong file fails before its pixels are read.
    EX2D_ASSIGN_OR_RETURN(PreprocImage header_only, read_preproc_metadata(job.preproc));
    EX2D_RETURN_NOT_OK(check_frame(job, header_only, psf, opt));

    std::shared_ptr<LargeArray<float>> image = planes_.take();
    std::shared_ptr<LargeArray<float>> weights = planes_.take();
    std::uint64_t file_sum = 0;
    auto read = read_preproc_float32(
        job.preproc,
        [&](const void* bytes, std::size_t size) { file_sum = wire::checksum64(bytes, size); },
        *image, *weights, mask_scratch_, input_read_, file_buffer_);
    if (!read.is_ok()) return read.status();

    service::FrameInputs in;
    wire::ArrayPart image_part, weights_part;
    service::TraceShiftOutcome shifts;
    // With trace_shifts_in worker, the input PSF travels and the worker runs the same step.
    const bool shift_here = trace_shifts_in_ == "reader";
    if (read.value()) {
        PreprocFloat32& planes = *read.value();
        in.ny = planes.ny;
        in.nx = planes.nx;
        in.image_header = std::move(planes.header);
        in.fibermap = std::move(planes.fibermap);
        in.preproc_checksum = wire::hex64(file_sum);
        const Float32ImageView view{in.ny, in.nx, image->data(), weights->data()};
        if (shift_here)
            shifts = service::run_trace_shift_step(job, in.image_header, view, psf, psf_bytes);
        const std::vector<std::int32_t> shape{in.ny, in.nx};
        image_part = wire::ArrayPart::from_shared(wire::DType::f32, std::move(image), shape);
        weights_part = wire::ArrayPart::from_shared(wire::DType::f32, std::move(weights), shape);
    } else {
        EX2D_ASSIGN_OR_RETURN(in, load_as_float64(job));
        const ImageView view{in.ny, in.nx, in.image.data(), in.weights.data()};
        if (shift_here)
            shifts = service::run_trace_shift_step(job, in.image_header, view, psf, psf_bytes);
    }
    if (shift_here) service::record_trace_shifts(shifts, in.image_header);
    in.trace_shifts_in = trace_shifts_in_;
    in.job = job;
    in.reader = reader_name_;
    in.badcolumn_table = badcolumn_state;
    in.badcolumns = std::move(badcolumns);
    in.psf_checksum = wire::hex64(wire::checksum64(psf_bytes.data(), psf_bytes.size()));
    in.psf_file = std::move(psf_bytes);
    service::test_delay("READ");
    LoadedFrame loaded;
    if (shift_here) loaded.trace_shift_fields = service::trace_shift_fields(shifts);
    loaded.read_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    in.read_seconds = loaded.read_seconds;
    loaded.message =
        image_part.data != nullptr
            ? service::encode_frame(std::move(in), std::move(image_part), std::move(weights_part))
            : service::encode_frame(std::move(in));
    return loaded;
}

}  // namespace ex2d::reader
