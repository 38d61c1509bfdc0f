// SPDX-License-Identifier: BSD-3-Clause
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/service/fault_injection.hpp"
#include "writer.hpp"

namespace ex2d::writer {

namespace fs = std::filesystem;

namespace {

Status fsync_path(const std::string& path, bool directory)
{
    const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) return Status::io(path + ": cannot open for fsync: " + std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
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

// Temporaries of writers on this host that no longer run are removed before a new write,
// so a writer killed mid-write leaves nothing behind once the next frame lands there.
void remove_dead_temporaries(const fs::path& dir, const std::string& host)
{
    std::error_code ec;
    const std::string marker = ".tmp-" + host + "-";
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        const auto pos = name.find(marker);
        if (pos == std::string::npos) continue;
        const int pid = std::atoi(name.c_str() + pos + marker.size());
        if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) {
            fs::remove(entry.path(), ec);
            logger()->info("removed temporary file of a writer that died: {}", entry.path().string());
        }
    }
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

bool same_provenance(const FitsHeader& a, const FitsHeader& b)
{
    for (const char* key : {"EX2DJOB", "EX2DPREP", "EX2DPSFC", "EX2DVERS"}) {
        if (a.get_string(key) != b.get_string(key)) return false;
    }
    return true;
}

Result<WriteOutcome> describe(const std::string& path, bool skipped)
{
    WriteOutcome outcome;
    outcome.skipped = skipped;
    auto sum = wire::file_checksum128(path);
    if (!sum) return Status::io(path + ": cannot read back for its checksum");
    outcome.checksum = *sum;
    std::error_code ec;
    outcome.bytes = (long long)fs::file_size(path, ec);
    return outcome;
}

}  // namespace

Result<WriteOutcome> write_output(const service::FrameOutputs& out, const service::Actor& writer,
                                  bool fsync_files, const std::function<bool()>& still_ours)
{
    const fs::path final_path(out.job.output);
    const FrameProvenance prov = provenance_of(out);
    std::error_code ec;
    if (fs::exists(final_path, ec)) {
        auto existing = read_frame_header(final_path.string());
        if (existing.is_ok() && same_provenance(existing.value(), prov.image_header)) {
            return describe(final_path.string(), true);
        }
    }
    const fs::path dir = final_path.parent_path();
    fs::create_directories(dir, ec);
    if (ec) return Status::io(dir.string() + ": cannot create the output folder: " + ec.message());
    remove_dead_temporaries(dir, writer.host);

    const auto [stem, suffix] = split_suffix(final_path.filename().string());
    const fs::path tmp = dir / (stem + ".tmp-" + writer.host + "-" + std::to_string(writer.pid) + suffix);
    Status written = write_frame(tmp.string(), out.frame, prov);
    if (written.is_ok() && fsync_files) written = fsync_path(tmp.string(), false);
    if (!written.is_ok()) {
        fs::remove(tmp, ec);
        return written;
    }
    service::test_delay("WRITE");
    if (!still_ours()) {
        fs::remove(tmp, ec);
        return Status::invalid(final_path.string() + ": lease lost before the rename (stale_epoch)");
    }
    fs::rename(tmp, final_path, ec);
    if (ec) {
        const std::string why = ec.message();
        fs::remove(tmp, ec);
        return Status::io(final_path.string() + ": cannot rename the temporary file: " + why);
    }
    if (fsync_files) EX2D_RETURN_NOT_OK(fsync_path(dir.string(), true));
    return describe(final_path.string(), false);
}

}  // namespace ex2d::writer
