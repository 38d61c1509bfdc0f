// SPDX-License-Identifier: BSD-3-Clause
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include "ex2d/fits_table.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/service/fault_injection.hpp"
#include "final_file.hpp"
#include "writer.hpp"

namespace ex2d::writer {

namespace fs = std::filesystem;

namespace {

constexpr int kFibersPerPetal = 500;

Status fsync_path(const std::string& path, bool directory)
{
    const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) return Status::io(path + ": cannot open for fsync: " + std::strerror(errno));
    int rc = ::fsync(fd);
    int err = errno;
    if (const int injected = service::test_fsync_errno(directory ? "DIR" : "FILE");
        rc == 0 && injected != 0) {
        rc = -1;
        err = injected;
    }
    ::close(fd);
    if (rc != 0) return Status::io(path + ": fsync failed: " + std::strerror(err));
    return Status::ok();
}

// "frame-r0-00000001.fits.gz" -> {"frame-r0-00000001", ".fits.gz"}
std::pair<std::string, std::string> split_suffix(const std::string& name)
{
    const auto dot = name.find(".fits");
    if (dot == std::string::npos) return {name, ""};
    return {name.substr(0, dot), name.substr(dot)};
}

FrameProvenance provenance_of(const service::FrameOutputs& out)
{
    FrameProvenance prov;
    prov.image_header = out.image_header;
    prov.image_header.set_string("EX2DJOB", out.job.job, "ex2d fleet job id");
    prov.image_header.set_string("EX2DPREP", out.preproc_checksum, "XXH3-64 of the preproc file");
    prov.image_header.set_string("EX2DPSFC", out.psf_checksum, "XXH3-64 of the PSF file");
    prov.image_header.set_string("EX2DVERS", EX2D_VERSION, "ex2d version");
    prov.fibermap = out.fibermap;
    prov.psf_header = out.psf_header;
    prov.input_image = out.job.preproc;
    prov.input_psf = out.job.psf;
    prov.options = out.options;
    return prov;
}

std::string trimmed_lower(std::string text)
{
    while (!text.empty() && text.back() == ' ') text.pop_back();
    for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

/// `checksum`: that of the bytes this writer has just written; else the file is read back.
Result<WriteOutcome> describe(const std::string& path, bool skipped,
                              std::optional<std::string> checksum = std::nullopt)
{
    WriteOutcome outcome;
    outcome.skipped = skipped;
    auto sum = checksum ? std::move(checksum) : wire::file_checksum128(path);
    if (!sum) return Status::io(path + ": cannot read back for its checksum");
    outcome.checksum = *sum;
    std::error_code ec;
    outcome.bytes = (long long)fs::file_size(path, ec);
    return outcome;
}

/// desi_proc skips the bad-column step when the final frame exists (datamodel 4.7), so a frame
/// written under that name without the mask its job names would never get it.
Status check_badcolumn_step(const service::FrameOutputs& out)
{
    if (out.job.badcolumns.empty()) return Status::ok();
    if (out.badcolumn_mask == "applied" || out.badcolumn_mask == "missing") return Status::ok();
    return Status::format(out.job.output + ": not written: the job names bad-column table " +
                          out.job.badcolumns + " but the frame does not say it carries its mask " +
                          "(badcolumn_mask '" + out.badcolumn_mask + "')");
}

}  // namespace

Status check_frame_identity(const service::FrameOutputs& out)
{
    const service::Job& job = out.job;
    const std::string refused =
        job.output + ": not written, the frame is not job " + job.job + "'s: ";
    if (auto camera = out.image_header.get_string("CAMERA");
        camera && trimmed_lower(*camera) != job.camera) {
        return Status::format(refused + "header CAMERA is " + *camera);
    }
    for (const auto& [key, expected] : {std::pair<const char*, std::string>{"EXPID", job.expid},
                                        std::pair<const char*, std::string>{"NIGHT", job.night}}) {
        auto value = out.image_header.get_int(key);
        if (value && !expected.empty() && *value != std::stoll(expected)) {
            return Status::format(refused + "header " + key + " is " + std::to_string(*value));
        }
    }
    if (out.fibermap.empty()) return Status::ok();
    // DESI fibermaps hold a petal's 500 fibres in order: row r is fibre 500 * petal + r.
    auto fibers = read_int_column(out.fibermap, "FIBER");
    if (!fibers.is_ok()) return Status::format(refused + "FIBERMAP: " + fibers.status().message());
    const int petal = job.camera.size() == 2 ? job.camera[1] - '0' : -1;
    const int end = out.frame.specmin + out.frame.nspec;
    if (petal < 0 || petal > 9 || long(fibers.value().size()) < end) {
        return Status::format(refused + "FIBERMAP has " + std::to_string(fibers.value().size()) +
                              " rows for spectra " + std::to_string(out.frame.specmin) + ".." +
                              std::to_string(end - 1));
    }
    for (int row = out.frame.specmin; row < end; ++row) {
        const long long expected = (long long)kFibersPerPetal * petal + row;
        if (fibers.value()[size_t(row)] != expected) {
            return Status::format(refused + "FIBERMAP row " + std::to_string(row) + " is FIBER " +
                                  std::to_string(fibers.value()[size_t(row)]) + ", expected " +
                                  std::to_string(expected));
        }
    }
    return Status::ok();
}

Result<WriteOutcome> write_output(const service::FrameOutputs& out, const service::Actor& writer,
                                  bool fsync_files, const std::function<bool()>& still_ours,
                                  TemporaryLedger& temporaries,
                                  std::shared_ptr<const FibermapColumns> fibermap_columns)
{
    EX2D_RETURN_NOT_OK(check_frame_identity(out));
    EX2D_RETURN_NOT_OK(check_badcolumn_step(out));
    const fs::path final_path(out.job.output);
    FrameProvenance prov = provenance_of(out);
    prov.fibermap_columns = std::move(fibermap_columns);
    std::error_code ec;
    if (fs::exists(final_path, ec)) {
        auto existing = read_frame_header(final_path.string());
        if (existing.is_ok() && same_provenance(existing.value(), prov.image_header)) {
            // An earlier try may have renamed the file and then failed in the folder's fsync.
            if (fsync_files) {
                EX2D_RETURN_NOT_OK(fsync_path(final_path.parent_path().string(), true));
            }
            return describe(final_path.string(), true);
        }
    }
    const fs::path dir = final_path.parent_path();
    fs::create_directories(dir, ec);
    if (ec) return Status::io(dir.string() + ": cannot create the output folder: " + ec.message());

    const auto [stem, suffix] = split_suffix(final_path.filename().string());
    const std::string owner = writer.host + "-" + std::to_string(writer.pid);
    const std::string tmp = (dir / (stem + ".tmp-" + owner + suffix)).string();
    const std::string aside = (dir / (stem + ".replaced-" + owner + suffix)).string();
    EX2D_RETURN_NOT_OK(temporaries.record(tmp));
    EX2D_RETURN_NOT_OK(temporaries.record(aside));
    auto cleanup = [&] {
        fs::remove(tmp, ec);
        temporaries.forget(tmp);
        temporaries.forget(aside);
    };
    // Checksummed from memory: reading the file back would fetch 70 MB that O_DIRECT kept out
    // of the page cache, into fresh cache pages.
    std::optional<std::string> written_checksum;
    Status written =
        write_frame(tmp, out.frame, prov, [&](const std::uint8_t* bytes, std::size_t size) {
            written_checksum = wire::checksum128(bytes, size);
        });
    if (written.is_ok() && fsync_files) written = fsync_path(tmp, false);
    if (written.is_ok() && !still_ours()) {
        written =
            Status::invalid(final_path.string() + ": lease lost before the rename (stale_epoch)");
    }
    if (!written.is_ok()) {
        cleanup();
        return written;
    }
    // A writer stalled here past its lease must not replace what another writer has since
    // written: place_final refuses on its own, whatever was checked before.
    service::test_delay("WRITE");
    auto placed = place_final(tmp, final_path.string(), aside, prov.image_header, still_ours);
    cleanup();
    if (!placed.is_ok()) return placed.status();
    if (placed.value() == Placement::already_there) {
        logger()->warn("not renamed: {} already holds this job's frame, written by another writer",
                       final_path.string());
        return describe(final_path.string(), true);
    }
    if (fsync_files) EX2D_RETURN_NOT_OK(fsync_path(dir.string(), true));
    return describe(final_path.string(), false, std::move(written_checksum));
}

}  // namespace ex2d::writer
