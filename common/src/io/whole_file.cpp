// SPDX-License-Identifier: BSD-3-Clause
#include "whole_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ex2d::io {

namespace {

constexpr std::size_t kPage = 4096;
// Below this `automatic` maps a file whatever its state: small files (PSFs, test frames) cost
// nothing either way.
constexpr std::size_t kDirectFrom = std::size_t(4) << 20;
// The buffer is at least this big, so that its allocation is 2 MiB-aligned (scratch_allocator):
// O_DIRECT needs page-aligned memory.
constexpr std::size_t kHugePage = std::size_t(2) << 20;
constexpr std::size_t kChunk = std::size_t(16) << 20;  // per pread: a few calls per frame

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd()
    {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

/// Whether at least 90% of the file's pages are in the page cache (mincore on a mapping that
/// populates nothing).
bool mostly_cached(int fd, std::size_t size)
{
    void* probe = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (probe == MAP_FAILED) return false;
    std::vector<unsigned char> resident((size + kPage - 1) / kPage);
    const bool known = ::mincore(probe, size, resident.data()) == 0;
    ::munmap(probe, size);
    if (!known) return false;
    const auto cached = std::count_if(resident.begin(), resident.end(),
                                      [](unsigned char r) { return (r & 1) != 0; });
    return std::size_t(cached) * 10 >= resident.size() * 9;
}

}  // namespace

WholeFile::~WholeFile()
{
    if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

Status WholeFile::map(int fd, const std::string& path)
{
    // MAP_POPULATE maps the page-cache pages up front: one call instead of a fault for every
    // 4 KiB that the checksum pass would otherwise take.
    void* data = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (data == MAP_FAILED) return Status::io(path + ": cannot map: " + std::strerror(errno));
    mapping_ = data;
    ::madvise(mapping_, size_, MADV_SEQUENTIAL);
    bytes_ = static_cast<const unsigned char*>(mapping_);
    return Status::ok();
}

Status WholeFile::open(const std::string& path, InputRead how,
                       LargeArray<unsigned char>& direct_buffer)
{
    Fd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (file.get() < 0) return Status::io(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return Status::io(path + ": not a regular file");
    }
    if (st.st_size == 0) return Status::format(path + ": file is empty");
    size_ = std::size_t(st.st_size);
    const bool direct =
        how == InputRead::direct ||
        (how == InputRead::automatic && size_ >= kDirectFrom && !mostly_cached(file.get(), size_));
    if (!direct) return map(file.get(), path);
    // A file system without O_DIRECT (tmpfs) refuses the flag: the mapping serves instead.
    const int flags = ::fcntl(file.get(), F_GETFL);
    if (flags < 0 || ::fcntl(file.get(), F_SETFL, flags | O_DIRECT) != 0) {
        return map(file.get(), path);
    }
    const std::size_t whole_pages = (size_ + kPage - 1) / kPage * kPage;
    // Grown only: a resize within the capacity would zero the added bytes for every file.
    direct_buffer.resize(std::max({direct_buffer.size(), whole_pages, kHugePage}));
    std::size_t done = 0;
    while (done < size_) {
        const std::size_t want = std::min(kChunk, whole_pages - done);
        const ssize_t got = ::pread(file.get(), direct_buffer.data() + done, want, off_t(done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return Status::io(path + ": read failed: " + std::strerror(errno));
        if (got == 0) break;
        done += std::size_t(got);
    }
    if (done < size_) {
        return Status::io(path + ": read " + std::to_string(done) + " of " + std::to_string(size_) +
                          " bytes (the file shrank while read)");
    }
    bytes_ = direct_buffer.data();
    return Status::ok();
}

}  // namespace ex2d::io
