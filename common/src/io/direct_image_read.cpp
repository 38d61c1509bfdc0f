// SPDX-License-Identifier: BSD-3-Clause
#include "direct_image_read.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ex2d::fits {

namespace {

// FITS stores big-endian IEEE values (FITS standard 4.0, section 5.3).
constexpr bool kHostIsLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

double big_endian_value(const unsigned char* p, int bytes)
{
    if (bytes == 4) {
        std::uint32_t bits;
        std::memcpy(&bits, p, 4);
        if (kHostIsLittleEndian) bits = __builtin_bswap32(bits);
        float value;
        std::memcpy(&value, &bits, 4);
        return value;
    }
    std::uint64_t bits;
    std::memcpy(&bits, p, 8);
    if (kHostIsLittleEndian) bits = __builtin_bswap64(bits);
    double value;
    std::memcpy(&value, &bits, 8);
    return value;
}

double key_or(fitsfile* f, const char* key, double fallback)
{
    int status = 0;
    double value = fallback;
    if (fits_read_key(f, TDOUBLE, key, &value, nullptr, &status) != 0) return fallback;
    return value;
}

// Whether the current HDU's pixels are exactly the big-endian floats on disk.
bool stored_as_plain_floats(fitsfile* f, const std::string& path, int& bytes)
{
    int status = 0;
    char url_type[FLEN_FILENAME] = {};
    if (fits_url_type(f, url_type, &status) != 0 || std::strcmp(url_type, "file://") != 0)
        return false;
    if (path.find_first_of("[]()") != std::string::npos) return false;  // extended file syntax
    if (fits_is_compressed_image(f, &status) != 0 || status != 0) return false;
    int bitpix = 0;
    if (fits_get_img_type(f, &bitpix, &status) != 0) return false;
    if (bitpix != FLOAT_IMG && bitpix != DOUBLE_IMG) return false;
    if (key_or(f, "BSCALE", 1.0) != 1.0 || key_or(f, "BZERO", 0.0) != 0.0) return false;
    bytes = bitpix == FLOAT_IMG ? 4 : 8;
    return true;
}

Status read_exactly(int fd, unsigned char* buffer, size_t size, long long offset,
                    const std::string& path, const std::string& hdu_name)
{
    size_t done = 0;
    while (done < size) {
        const ssize_t got =
            ::pread(fd, buffer + done, size - done, off_t(offset + (long long)done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            return Status::io(
                path + ": cannot read HDU " + hdu_name + " at byte " +
                std::to_string(offset + (long long)done) +
                (got < 0 ? std::string(": ") + std::strerror(errno) : ": file is truncated"));
        }
        done += size_t(got);
    }
    return Status::ok();
}

}  // namespace

Result<bool> read_float_columns_direct(fitsfile* f, const std::string& path,
                                       const std::string& hdu_name, int ny, int nx, int col_begin,
                                       int col_end, double* out)
{
    int bytes = 0;
    if (!stored_as_plain_floats(f, path, bytes)) return false;
    int status = 0;
    LONGLONG header_start = 0, data_start = 0, data_end = 0;
    if (fits_get_hduaddrll(f, &header_start, &data_start, &data_end, &status) != 0) return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const int ncols = col_end - col_begin;
    std::vector<unsigned char> row(size_t(ncols) * bytes);
    for (int r = 0; r < ny; ++r) {
        const long long offset = data_start + ((long long)r * nx + col_begin) * bytes;
        const Status read = read_exactly(fd, row.data(), row.size(), offset, path, hdu_name);
        if (!read.is_ok()) {
            ::close(fd);
            return read;
        }
        double* dest = out + size_t(r) * ncols;
        for (int c = 0; c < ncols; ++c) dest[c] = big_endian_value(&row[size_t(c) * bytes], bytes);
    }
    ::close(fd);
    return true;
}

}  // namespace ex2d::fits
