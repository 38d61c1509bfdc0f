// SPDX-License-Identifier: BSD-3-Clause
#include "final_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"

namespace ex2d::writer {

int rename_no_replace(const std::string& from, const std::string& to)
{
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    // A file system without RENAME_NOREPLACE (older NFS): link() refuses an existing name too.
    if (::link(from.c_str(), to.c_str()) != 0) return -1;
    ::unlink(from.c_str());
    return 0;
}

bool same_provenance(const FitsHeader& a, const FitsHeader& b)
{
    for (const char* key : {"EX2DJOB", "EX2DPREP", "EX2DPSFC", "EX2DVERS"}) {
        if (a.get_string(key) != b.get_string(key)) return false;
    }
    return true;
}

namespace {

bool holds_our_frame(const std::string& path, const FitsHeader& ours)
{
    auto header = read_frame_header(path);
    return header.is_ok() && same_provenance(header.value(), ours);
}

Status io_failure(const std::string& path, const std::string& what)
{
    return Status::io(path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<Placement> place_final(const std::string& tmp, const std::string& final_path,
                              const std::string& aside, const FitsHeader& ours,
                              const std::function<bool()>& still_ours)
{
    // Each pass either places the file or finds the final name taken; another writer can take
    // it between two passes at most once per job, so three passes always decide.
    for (int pass = 0; pass < 3; ++pass) {
        if (rename_no_replace(tmp, final_path) == 0) return Placement::placed;
        const int rename_errno = errno;
        if (rename_errno == ENOENT && !still_ours()) {
            // Stalled past its lease and its heartbeat, this writer was taken for gone and
            // another writer's sweep removed its temporary file: fenced out, as designed.
            return Status::invalid(tmp +
                                   ": lease lost and the temporary file removed by "
                                   "another writer's sweep before the rename (stale_epoch)");
        }
        if (rename_errno != EEXIST) {
            errno = rename_errno;
            return io_failure(final_path, "cannot rename the temporary file");
        }
        if (holds_our_frame(final_path, ours)) return Placement::already_there;
        if (!still_ours()) {
            return Status::invalid(final_path +
                                   ": lease lost before replacing an older output (stale_epoch)");
        }
        if (std::rename(final_path.c_str(), aside.c_str()) != 0) {
            if (errno == ENOENT) continue;
            return io_failure(final_path, "cannot move the older output aside");
        }
        if (holds_our_frame(aside, ours)) {
            // Another writer placed this job's frame after the check above: put it back.
            if (rename_no_replace(aside, final_path) != 0) ::unlink(aside.c_str());
            return Placement::already_there;
        }
        logger()->info("replacing an older output of another provenance: {}", final_path);
        const bool placed = rename_no_replace(tmp, final_path) == 0;
        const int err = errno;
        ::unlink(aside.c_str());
        if (placed) return Placement::placed;
        if (err != EEXIST) {
            errno = err;
            return io_failure(final_path, "cannot rename the temporary file");
        }
    }
    return Status::io(final_path + ": the final name keeps being taken by other writers");
}

}  // namespace ex2d::writer
