// SPDX-License-Identifier: BSD-3-Clause
#include "file_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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
    // 14x faster than CFITSIO's zlib level 1 for 5% more bytes (docs/benchmarks.md,
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

Status write_new_file(const std::string& path, const std::string& tmp, const std::uint8_t* data,
                      std::size_t size)
{
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return Status::io(path + ": cannot create the file: " + std::strerror(errno));
    std::string error;
    while (size > 0 && error.empty()) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = n < 0 ? std::strerror(errno) : "no progress";
            break;
        }
        data += n;
        size -= std::size_t(n);
    }
    if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
    if (error.empty()) return Status::ok();
    ::unlink(tmp.c_str());
    return Status::io(path + ": cannot write the file: " + error);
}

}  // namespace ex2d::fits
