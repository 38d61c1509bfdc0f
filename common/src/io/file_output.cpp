// SPDX-License-Identifier: BSD-3-Clause
#include "file_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#ifdef EX2D_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

namespace ex2d::fits {

#ifdef EX2D_HAVE_ISAL

bool have_gzip_encoder()
{
    return true;
}

Result<ByteBuffer> gzip_encode(const std::string& path, const std::uint8_t* in, std::size_t size)
{
    // Level 1: on extracted frames (float32 noise, which no deflate level shrinks much) it is
    // 14x faster than CFITSIO's zlib level 1 for 5% more bytes (docs/benchmarks-log.md,
    // "Data plane, writer"); higher ISA-L levels cost more and saved nothing there.
    constexpr std::uint32_t kLevel = 1;
    if (size > 0xffffffffu) return Status::invalid(path + ": too large to gzip in one call");
    std::vector<std::uint8_t> level_buf(ISAL_DEF_LVL1_DEFAULT);
    isal_zstream z;
    isal_deflate_init(&z);
    z.level = kLevel;
    z.level_buf = level_buf.data();
    z.level_buf_size = std::uint32_t(level_buf.size());
    z.gzip_flag = IGZIP_GZIP;
    z.end_of_stream = 1;
    z.flush = NO_FLUSH;
    z.next_in = const_cast<std::uint8_t*>(in);
    z.avail_in = std::uint32_t(size);
    // Room for incompressible input (stored blocks add a few bytes per 64 KiB) and the gzip
    // header and trailer, so that one call finishes; a larger output only grows the buffer.
    std::size_t capacity = size + size / 64 + (64u << 10);
    ByteBuffer out{std::unique_ptr<std::uint8_t[]>(new std::uint8_t[capacity]), 0};
    z.next_out = out.data.get();
    z.avail_out = std::uint32_t(capacity);
    while (z.internal_state.state != ZSTATE_END) {
        const std::uint32_t in_before = z.total_in, out_before = z.total_out;
        if (isal_deflate(&z) != COMP_OK)
            return Status::io(path + ": gzip compression failed (ISA-L)");
        if (z.internal_state.state == ZSTATE_END) break;
        if (z.avail_out > 0) {
            if (z.total_in == in_before && z.total_out == out_before) {
                return Status::io(path + ": gzip compression stalled (ISA-L)");
            }
            continue;
        }
        const std::size_t used = capacity;
        capacity += capacity / 2;
        std::unique_ptr<std::uint8_t[]> bigger(new std::uint8_t[capacity]);
        std::memcpy(bigger.get(), out.data.get(), used);
        out.data = std::move(bigger);
        z.next_out = out.data.get() + used;
        z.avail_out = std::uint32_t(capacity - used);
    }
    out.size = z.total_out;
    return out;
}

#else

bool have_gzip_encoder()
{
    return false;
}

Result<ByteBuffer> gzip_encode(const std::string& path, const std::uint8_t*, std::size_t)
{
    return Status::invalid(path + ": this build has no gzip encoder (ISA-L)");
}

#endif

namespace {

// O_DIRECT transfers need the buffer's address, the file offset and the length aligned to the
// device's logical block; 4096 covers 512-byte and 4 KiB devices alike.
constexpr std::size_t kDirectAlign = 4096;
constexpr std::size_t kBounceBytes = std::size_t(8) << 20;
// Smaller files (timing JSON, CSV tables) gain nothing from bypassing the page cache.
constexpr std::size_t kDirectFrom = std::size_t(1) << 20;

/// Writes all of `data`; 0, or the errno of the failure (EIO for a write that made no
/// progress).
int write_all(int fd, const std::uint8_t* data, std::size_t size)
{
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        data += n;
        size -= std::size_t(n);
    }
    return 0;
}

/// A page-aligned buffer each thread keeps for the parts of a file that are not aligned.
std::uint8_t* bounce_buffer()
{
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    thread_local std::unique_ptr<void, Free> buffer(std::aligned_alloc(kDirectAlign, kBounceBytes));
    return static_cast<std::uint8_t*>(buffer.get());
}

/// Writes through an O_DIRECT descriptor: the aligned part of `data` as it is, the rest
/// through the bounce buffer with its last block zero-padded, then the file is cut back to
/// `size`. Bypassing the page cache saves the writer the kernel's copy into newly allocated
/// cache pages, which cost 0.13-0.17 CPU-s per 70 MB frame once the cache keeps growing
/// (docs/benchmarks-log.md, "Writer: O_DIRECT"). Returns 0 or an errno.
int write_direct(int fd, const std::uint8_t* data, std::size_t size)
{
    std::size_t done = 0;
    if (reinterpret_cast<std::uintptr_t>(data) % kDirectAlign == 0) {
        done = size / kDirectAlign * kDirectAlign;
        if (const int error = write_all(fd, data, done)) return error;
    }
    while (done < size) {
        std::uint8_t* bounce = bounce_buffer();
        if (bounce == nullptr) return ENOMEM;
        const std::size_t n = std::min(kBounceBytes, size - done);
        const std::size_t padded = (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
        std::memcpy(bounce, data + done, n);
        std::memset(bounce + n, 0, padded - n);
        if (const int error = write_all(fd, bounce, padded)) return error;
        done += n;
    }
    return ::ftruncate(fd, off_t(size)) == 0 ? 0 : errno;
}

/// Drops O_DIRECT from `fd` and empties the file, for a write through the cache; 0 or errno.
int restart_buffered(int fd)
{
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0 || ::ftruncate(fd, 0) != 0 ||
        ::lseek(fd, 0, SEEK_SET) != 0) {
        return errno;
    }
    return 0;
}

}  // namespace

Status write_new_file(const std::string& path, const std::string& tmp, const std::uint8_t* data,
                      std::size_t size)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
    int fd = size >= kDirectFrom ? ::open(tmp.c_str(), flags | O_DIRECT, 0666) : -1;
    const bool direct = fd >= 0;
    // Filesystems without direct I/O (tmpfs, some FUSE mounts) refuse the flag at open.
    if (fd < 0) fd = ::open(tmp.c_str(), flags, 0666);
    if (fd < 0) return Status::io(path + ": cannot create the file: " + std::strerror(errno));
    int error = direct ? write_direct(fd, data, size) : write_all(fd, data, size);
    if (direct && error == EINVAL) {
        // Accepted at open but not for these transfers: write it again through the cache.
        error = restart_buffered(fd);
        if (error == 0) error = write_all(fd, data, size);
    }
    if (::close(fd) != 0 && error == 0) error = errno;
    if (error == 0) return Status::ok();
    ::unlink(tmp.c_str());
    return Status::io(path + ": cannot write the file: " + std::strerror(error));
}

}  // namespace ex2d::fits
