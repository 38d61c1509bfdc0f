// SPDX-License-Identifier: BSD-3-Clause
#include "compressors.hpp"

#include <cstring>
#include <memory>

#include <zlib.h>
#ifdef EX2D_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif
#ifdef EX2D_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

namespace ex2d::bench {

namespace {

Result<std::vector<std::uint8_t>> zlib_gzip(int level, const std::vector<std::uint8_t>& in)
{
    z_stream z{};
    // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
    if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return Status::io("zlib: deflateInit2 failed at level " + std::to_string(level));
    }
    std::vector<std::uint8_t> out(deflateBound(&z, uLong(in.size())));
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = uInt(in.size());
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (rc != Z_STREAM_END)
        return Status::io("zlib: deflate did not finish (" + std::to_string(rc) + ")");
    return out;
}

#ifdef EX2D_HAVE_LIBDEFLATE
Result<std::vector<std::uint8_t>> libdeflate_gzip(int level, const std::vector<std::uint8_t>& in)
{
    std::unique_ptr<libdeflate_compressor, void (*)(libdeflate_compressor*)> c(
        libdeflate_alloc_compressor(level), libdeflate_free_compressor);
    if (!c) return Status::io("libdeflate: no compressor at level " + std::to_string(level));
    std::vector<std::uint8_t> out(libdeflate_gzip_compress_bound(c.get(), in.size()));
    const size_t n =
        libdeflate_gzip_compress(c.get(), in.data(), in.size(), out.data(), out.size());
    if (n == 0) return Status::io("libdeflate: output did not fit its bound");
    out.resize(n);
    return out;
}
#endif

#ifdef EX2D_HAVE_ISAL
Result<std::vector<std::uint8_t>> isal_gzip(int level, const std::vector<std::uint8_t>& in)
{
    static const std::uint32_t level_buf_sizes[] = {ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT,
                                                    ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT};
    if (level < 0 || level > ISAL_DEF_MAX_LEVEL) {
        return Status::invalid("isa-l: no level " + std::to_string(level));
    }
    std::vector<std::uint8_t> level_buf(level_buf_sizes[level]);
    isal_zstream z;
    isal_deflate_init(&z);
    z.level = std::uint32_t(level);
    z.level_buf = level_buf.data();
    z.level_buf_size = std::uint32_t(level_buf.size());
    z.gzip_flag = IGZIP_GZIP;
    z.end_of_stream = 1;
    z.flush = NO_FLUSH;
    // Stored blocks are the worst case: 5 bytes per 64 KiB, plus header and trailer.
    std::vector<std::uint8_t> out(in.size() + in.size() / 1024 + 1024);
    z.next_in = const_cast<std::uint8_t*>(in.data());
    z.avail_in = std::uint32_t(in.size());
    z.next_out = out.data();
    z.avail_out = std::uint32_t(out.size());
    while (z.internal_state.state != ZSTATE_END) {
        if (isal_deflate(&z) != COMP_OK ||
            (z.avail_out == 0 && z.internal_state.state != ZSTATE_END)) {
            return Status::io("isa-l: isal_deflate failed at level " + std::to_string(level));
        }
    }
    out.resize(z.total_out);
    return out;
}
#endif

}  // namespace

std::vector<GzipCandidate> gzip_candidates()
{
    std::vector<GzipCandidate> c = {{"zlib", 1, "CFITSIO's level (Z_BEST_SPEED)"},
                                    {"zlib", 6, "gzip's default"}};
#ifdef EX2D_HAVE_LIBDEFLATE
    for (int level : {1, 4, 6}) c.push_back({"libdeflate", level, ""});
#endif
#ifdef EX2D_HAVE_ISAL
    for (int level : {1, 2, 3}) c.push_back({"isa-l", level, ""});
#endif
    return c;
}

Result<std::vector<std::uint8_t>> gzip(const GzipCandidate& c, const std::vector<std::uint8_t>& in)
{
    if (c.library == "zlib") return zlib_gzip(c.level, in);
#ifdef EX2D_HAVE_LIBDEFLATE
    if (c.library == "libdeflate") return libdeflate_gzip(c.level, in);
#endif
#ifdef EX2D_HAVE_ISAL
    if (c.library == "isa-l") return isal_gzip(c.level, in);
#endif
    return Status::invalid(c.library + ": not built into this benchmark");
}

Status check_gzip(const std::vector<std::uint8_t>& gz, const std::vector<std::uint8_t>& expected)
{
    z_stream z{};
    if (inflateInit2(&z, 15 + 16) != Z_OK) return Status::io("zlib: inflateInit2 failed");
    std::vector<std::uint8_t> out(expected.size() + 1);
    z.next_in = const_cast<Bytef*>(gz.data());
    z.avail_in = uInt(gz.size());
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const uLong used = z.total_in;
    const uLong produced = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END)
        return Status::format("gzip stream does not inflate (zlib " + std::to_string(rc) + ")");
    if (used != gz.size()) {
        return Status::format("gzip stream has " + std::to_string(gz.size() - used) +
                              " bytes after its first member");
    }
    if (produced != expected.size() || std::memcmp(out.data(), expected.data(), produced) != 0) {
        return Status::format("gzip stream inflates to other bytes than the input");
    }
    return Status::ok();
}

}  // namespace ex2d::bench
