// SPDX-License-Identifier: BSD-3-Clause
// The fleet reader's path: one pass over the preproc file's bytes (mapped, or read with
// O_DIRECT: whole_file.hpp) for its checksum, then IMAGE and IVAR converted from them straight
// into float32 buffers that are reused from frame to frame. Reading through cfitsio into fresh
// double planes cost a reader most of its time in zeroing new pages and in three copies of
// every pixel.
#include <cmath>
#include <cstring>

#include "ex2d/logging.hpp"
#include "ex2d/preproc.hpp"
#include "fits_util.hpp"
#include "preproc_internal.hpp"
#include "whole_file.hpp"

namespace ex2d {

namespace {

double key_or(fitsfile* f, const char* key, double fallback)
{
    int status = 0;
    double value = fallback;
    if (fits_read_key(f, TDOUBLE, key, &value, nullptr, &status) != 0) return fallback;
    return value;
}

/// Where the big-endian float32 pixels of the current HDU start in the file, or -1 where
/// they are not stored that way (compressed, another BITPIX, scaled).
Result<long long> plain_float32_start(fitsfile* f, const std::string& path, const char* name,
                                      long long npix, std::size_t file_size)
{
    int status = 0;
    int bitpix = 0;
    if (fits_is_compressed_image(f, &status) != 0 || status != 0) return -1LL;
    if (fits_get_img_type(f, &bitpix, &status) != 0 || bitpix != FLOAT_IMG) return -1LL;
    if (key_or(f, "BSCALE", 1.0) != 1.0 || key_or(f, "BZERO", 0.0) != 0.0) return -1LL;
    LONGLONG header_start = 0, data_start = 0, data_end = 0;
    if (fits_get_hduaddrll(f, &header_start, &data_start, &data_end, &status) != 0) {
        return fits::io_error(path, std::string("cannot locate the data of HDU ") + name, status);
    }
    if (data_start + npix * 4 > (long long)file_size) {
        return Status::io(path + ": HDU " + name + " runs past the end of the file (truncated)");
    }
    return (long long)data_start;
}

/// cfitsio's memory driver does not see a file cut short (it reports the size it was told
/// when reading, not the mapping's), so every HDU is checked against the bytes really there,
/// as scan_hdus does for files on disk.
Status check_not_truncated(fitsfile* f, const std::string& path, std::size_t file_size)
{
    long long previous_end = 0;
    for (int hdu = 1;; ++hdu) {
        int status = 0;
        int type = 0;
        if (fits_movabs_hdu(f, hdu, &type, &status) != 0) {
            fits_clear_errmsg();
            if (hdu > 1 && previous_end == (long long)file_size) return Status::ok();
            return Status::io(path + ": truncated file: " + std::to_string(file_size) +
                              " bytes, HDU " + std::to_string(hdu - 1) + " ends at byte " +
                              std::to_string(previous_end));
        }
        LONGLONG header_start = 0, data_start = 0, data_end = 0;
        fits_get_hduaddrll(f, &header_start, &data_start, &data_end, &status);
        if (status != 0 || data_end > (long long)file_size) {
            fits_clear_errmsg();
            return Status::io(path + ": truncated file: HDU " + std::to_string(hdu) + " needs " +
                              std::to_string(data_end) + " bytes, file has " +
                              std::to_string(file_size));
        }
        previous_end = data_end;
    }
}

float big_endian_float(const unsigned char* p)
{
    std::uint32_t bits;
    std::memcpy(&bits, p, 4);
    if constexpr (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) bits = __builtin_bswap32(bits);
    float value;
    std::memcpy(&value, &bits, 4);
    return value;
}

}  // namespace

Result<InputRead> parse_input_read(const std::string& name)
{
    if (name == "auto") return InputRead::automatic;
    if (name == "mmap") return InputRead::mapped;
    if (name == "direct") return InputRead::direct;
    return Status::invalid("input read '" + name + "': expected auto, mmap or direct");
}

Result<std::optional<PreprocFloat32>> read_preproc_float32(
    const std::string& path, const std::function<void(const void*, std::size_t)>& see_file_bytes,
    LargeArray<float>& image, LargeArray<float>& weights, LargeArray<std::uint32_t>& mask_scratch,
    InputRead how, LargeArray<unsigned char>& file_buffer)
{
    io::WholeFile mapped;
    EX2D_RETURN_NOT_OK(mapped.open(path, how, file_buffer));
    see_file_bytes(mapped.bytes(), mapped.size());

    // Read-only with the exact size: cfitsio neither writes into the bytes nor looks past them.
    void* buffer = const_cast<unsigned char*>(mapped.bytes());
    std::size_t size = mapped.size();
    fitsfile* raw = nullptr;
    int status = 0;
    if (fits_open_memfile(&raw, path.c_str(), READONLY, &buffer, &size, 0, nullptr, &status)) {
        if (raw) fits::FitsCloser{}(raw);
        return fits::io_error(path, "cannot open as FITS", status);
    }
    fits::FitsPtr file(raw);
    fitsfile* f = file.get();
    EX2D_RETURN_NOT_OK(check_not_truncated(f, path, mapped.size()));
    EX2D_ASSIGN_OR_RETURN(PreprocImage meta, detail::read_preproc_hdus(f, path, {}, false, false));
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(f, path));
    const long long npix = (long long)meta.ny * meta.nx;

    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "IMAGE"));
    EX2D_ASSIGN_OR_RETURN(const long long image_start,
                          plain_float32_start(f, path, "IMAGE", npix, mapped.size()));
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "IVAR"));
    EX2D_ASSIGN_OR_RETURN(const long long ivar_start,
                          plain_float32_start(f, path, "IVAR", npix, mapped.size()));
    if (image_start < 0 || ivar_start < 0) return std::optional<PreprocFloat32>();

    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "MASK"));
    mask_scratch.resize(std::size_t(npix));
    static_assert(sizeof(int) == sizeof(std::uint32_t), "MASK is read as int in place");
    EX2D_RETURN_NOT_OK(fits::read_pixels(f, path, "MASK", TINT, npix,
                                         reinterpret_cast<int*>(mask_scratch.data())));

    image.resize(std::size_t(npix));
    weights.resize(std::size_t(npix));
    const unsigned char* image_bytes = mapped.bytes() + image_start;
    const unsigned char* ivar_bytes = mapped.bytes() + ivar_start;
    long nonfinite = 0;
    for (std::size_t i = 0; i < std::size_t(npix); ++i) {
        const float value = big_endian_float(image_bytes + 4 * i);
        const float ivar = big_endian_float(ivar_bytes + 4 * i);
        if (!std::isfinite(value) || !std::isfinite(ivar)) {
            image[i] = 0.0f;
            weights[i] = 0.0f;
            ++nonfinite;
            continue;
        }
        // desispec reads MASK as uint16: a negative int16 is its two's complement.
        const std::uint32_t mask = mask_scratch[i] & 0xFFFFu;
        image[i] = value;
        weights[i] = ((mask & kExtractMaskBits) == 0 && ivar > 0) ? ivar : 0.0f;
    }
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    if (nonfinite > 0) {
        logger()->warn("event=nonfinite_pixels_masked file={} count={}", path, nonfinite);
    }
    PreprocFloat32 out;
    out.ny = meta.ny;
    out.nx = meta.nx;
    out.header = std::move(meta.header);
    out.fibermap = std::move(meta.fibermap);
    out.n_nonfinite_masked = nonfinite;
    return std::optional<PreprocFloat32>(std::move(out));
}

}  // namespace ex2d
