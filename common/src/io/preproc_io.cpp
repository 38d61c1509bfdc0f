// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/preproc.hpp"

#include <cmath>

#include "direct_image_read.hpp"
#include "ex2d/logging.hpp"
#include "fits_util.hpp"
#include "preproc_internal.hpp"

namespace ex2d {

namespace {

constexpr std::uint32_t kMaskBad = 1;  // ccdmask BAD

std::string shape_text(long ny, long nx)
{
    return std::to_string(ny) + "x" + std::to_string(nx);
}

/// Reads `columns` of every row of pixels of the current image HDU (the whole image when
/// they span it) as `datatype` into out, [ny][columns].
Status read_columns(fitsfile* f, const std::string& path, const std::string& name, int datatype,
                    int ny, int nx, ColumnRange columns, void* out)
{
    const long long npix = (long long)ny * (columns.end - columns.begin);
    if (columns.begin == 0 && columns.end == nx) {
        return fits::read_pixels(f, path, name, datatype, npix, out);
    }
    if (datatype == TDOUBLE) {
        EX2D_ASSIGN_OR_RETURN(const bool read, fits::read_float_columns_direct(
                                                   f, path, name, ny, nx, columns.begin,
                                                   columns.end, static_cast<double*>(out)));
        if (read) return Status::ok();
    }
    long first[2] = {columns.begin + 1, 1};
    long last[2] = {columns.end, ny};
    long step[2] = {1, 1};
    int status = 0, anynul = 0;
    if (fits_read_subset(f, datatype, first, last, step, nullptr, out, &anynul, &status)) {
        return fits::io_error(path,
                              "cannot read columns " + std::to_string(columns.begin) + ".." +
                                  std::to_string(columns.end) + " of HDU " + name,
                              status);
    }
    return Status::ok();
}

/// Checks that the 2-D image HDU `name` is [ny][nx], the shape of IMAGE.
Status check_plane_shape(fitsfile* f, const std::string& path,
                         const std::vector<std::string>& names, const std::string& name, int ny,
                         int nx)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, name));
    EX2D_ASSIGN_OR_RETURN(const std::vector<long> naxes, fits::image_shape(f, path, name));
    if (naxes.size() != 2 || naxes[0] != nx || naxes[1] != ny) {
        std::string got = naxes.size() == 2 ? shape_text(naxes[1], naxes[0])
                                            : std::to_string(naxes.size()) + "-D";
        return Status::format(path + ": HDU " + name + " has shape " + got + ", IMAGE has " +
                              shape_text(ny, nx));
    }
    return Status::ok();
}

/// Reads `columns` of the 2-D image HDU `name` (shape already checked) as doubles.
Status read_plane(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                  const std::string& name, int ny, int nx, ColumnRange columns,
                  LargeArray<double>& out)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, name));
    out.resize(size_t(ny) * size_t(columns.end - columns.begin));
    return read_columns(f, path, name, TDOUBLE, ny, nx, columns, out.data());
}

Status read_fibermap_hdu(fitsfile* f, const std::string& path,
                         const std::vector<std::string>& names, FitsTableBlob& out)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "FIBERMAP"));
    return fits::copy_hdu_to_blob(f, path, out);
}

}  // namespace

Result<FitsTableBlob> read_fibermap(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(fits::FitsPtr file, fits::open_read(path));
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(file.get(), path));
    FitsTableBlob blob;
    EX2D_RETURN_NOT_OK(read_fibermap_hdu(file.get(), path, names, blob));
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    return blob;
}

namespace {
double weight_of(const PreprocImage& img, size_t i)
{
    const bool good = (img.mask[i] & kExtractMaskBits) == 0 && std::isfinite(img.image[i]) &&
                      std::isfinite(img.ivar[i]) && img.ivar[i] > 0;
    return good ? img.ivar[i] : 0.0;
}
}  // namespace

LargeArray<double> PreprocImage::weights() const
{
    LargeArray<double> w(ivar.size(), 0.0);
    for (size_t i = 0; i < w.size(); ++i) w[i] = weight_of(*this, i);
    return w;
}

LargeArray<double> PreprocImage::take_weights()
{
    for (size_t i = 0; i < ivar.size(); ++i) ivar[i] = weight_of(*this, i);
    return std::move(ivar);
}

long PreprocImage::mask_nonfinite()
{
    long count = 0;
    for (size_t i = 0; i < image.size(); ++i) {
        if (std::isfinite(image[i]) && std::isfinite(ivar[i])) continue;
        mask[i] |= kMaskBad;
        ivar[i] = 0.0;
        image[i] = 0.0;
        ++count;
    }
    n_nonfinite_masked += count;
    return count;
}

namespace {

/// Everything but the pixels is read and checked first, so that a file with a missing HDU or
/// a wrong shape fails before the expensive part.
Result<PreprocImage> read_preproc_parts(const std::string& path, ColumnRange columns,
                                        bool with_pixels, bool with_readnoise)
{
    EX2D_ASSIGN_OR_RETURN(fits::FitsPtr file, fits::open_read(path));
    EX2D_ASSIGN_OR_RETURN(PreprocImage img, detail::read_preproc_hdus(file.get(), path, columns,
                                                                      with_pixels, with_readnoise));
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    if (with_pixels) {
        const long masked = img.mask_nonfinite();
        if (masked > 0) {
            logger()->warn("event=nonfinite_pixels_masked file={} count={}", path, masked);
        }
    }
    return img;
}

}  // namespace

namespace detail {

Result<PreprocImage> read_preproc_hdus(fitsfile* f, const std::string& path, ColumnRange columns,
                                       bool with_pixels, bool with_readnoise)
{
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(f, path));

    PreprocImage img;
    img.source = path;
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "IMAGE"));
    EX2D_ASSIGN_OR_RETURN(img.header, fits::read_header(f, path));
    EX2D_ASSIGN_OR_RETURN(const std::vector<long> naxes, fits::image_shape(f, path, "IMAGE"));
    if (naxes.size() != 2 || naxes[0] < 1 || naxes[1] < 1) {
        return Status::format(path + ": HDU IMAGE is not a 2-D image");
    }
    const int ccd_nx = int(naxes[0]);
    img.ny = int(naxes[1]);
    img.ccd_nx = ccd_nx;
    if (columns.end == 0) columns = {0, ccd_nx};
    if (columns.begin < 0 || columns.end > ccd_nx || columns.begin >= columns.end) {
        throw Error(path + ": column range " + std::to_string(columns.begin) + ".." +
                    std::to_string(columns.end) + " is not inside the " + std::to_string(ccd_nx) +
                    " columns of IMAGE");
    }
    const bool has_readnoise = fits::find_hdu(names, "READNOISE");
    // MASK is a tile-compressed int16 image; cfitsio decompresses it as an image HDU.
    for (const char* plane : {"IVAR", "MASK"}) {
        EX2D_RETURN_NOT_OK(check_plane_shape(f, path, names, plane, img.ny, ccd_nx));
    }
    if (has_readnoise) {
        EX2D_RETURN_NOT_OK(check_plane_shape(f, path, names, "READNOISE", img.ny, ccd_nx));
    }
    if (fits::find_hdu(names, "FIBERMAP")) {
        EX2D_RETURN_NOT_OK(read_fibermap_hdu(f, path, names, img.fibermap));
    }
    if (!with_pixels) {
        img.nx = ccd_nx;
        return img;
    }

    img.col_begin = columns.begin;
    img.nx = columns.end - columns.begin;
    EX2D_RETURN_NOT_OK(read_plane(f, path, names, "IMAGE", img.ny, ccd_nx, columns, img.image));
    EX2D_RETURN_NOT_OK(read_plane(f, path, names, "IVAR", img.ny, ccd_nx, columns, img.ivar));
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "MASK"));
    // Read as int into the mask's own memory (int and uint32 may alias), then reinterpreted
    // in place: desispec reads MASK as uint16, so a negative int16 is its two's complement.
    img.mask.resize(size_t(img.ny) * size_t(img.nx));
    static_assert(sizeof(int) == sizeof(std::uint32_t), "MASK is read as int in place");
    auto* as_int = reinterpret_cast<int*>(img.mask.data());
    EX2D_RETURN_NOT_OK(read_columns(f, path, "MASK", TINT, img.ny, ccd_nx, columns, as_int));
    for (std::uint32_t& m : img.mask) m &= 0xFFFFu;
    if (has_readnoise && with_readnoise) {
        EX2D_RETURN_NOT_OK(
            read_plane(f, path, names, "READNOISE", img.ny, ccd_nx, columns, img.readnoise));
    }
    return img;
}

}  // namespace detail

Result<PreprocImage> read_preproc(const std::string& path)
{
    return read_preproc(path, {});
}

Result<PreprocImage> read_preproc(const std::string& path, ColumnRange columns,
                                  PreprocPlanes planes)
{
    return read_preproc_parts(path, columns, true, planes == PreprocPlanes::all);
}

Result<PreprocImage> read_preproc_metadata(const std::string& path)
{
    return read_preproc_parts(path, {}, false, false);
}

namespace {

Status write_plane(fitsfile* f, const std::string& path, const std::string& name, int bitpix,
                   int ny, int nx, int datatype, const void* data)
{
    int status = 0;
    long naxes[2] = {nx, ny};
    fits_create_img(f, bitpix, 2, naxes, &status);
    fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>(name.c_str()), nullptr, &status);
    if (status) return fits::io_error(path, "cannot create HDU " + name, status);
    if (fits_write_img(f, datatype, 1, (long long)ny * nx, const_cast<void*>(data), &status)) {
        return fits::io_error(path, "cannot write HDU " + name, status);
    }
    return Status::ok();
}

Status check_sizes(const std::string& path, const PreprocImage& img)
{
    const size_t npix = size_t(img.ny) * size_t(img.nx);
    if (img.ny < 1 || img.nx < 1) return Status::invalid(path + ": preproc image has no pixels");
    if (img.col_begin != 0 || img.ccd_width() != img.nx) {
        return Status::invalid(path +
                               ": a preproc image holding only some columns cannot be written");
    }
    if (img.image.size() != npix || img.ivar.size() != npix || img.mask.size() != npix ||
        (!img.readnoise.empty() && img.readnoise.size() != npix)) {
        return Status::invalid(
            path + ": preproc arrays do not match ny x nx = " + shape_text(img.ny, img.nx));
    }
    for (std::uint32_t m : img.mask) {
        if (m > 32767) {
            return Status::invalid(path + ": MASK value " + std::to_string(m) +
                                   " does not fit the int16 MASK HDU");
        }
    }
    return Status::ok();
}

Status write_preproc_hdus(fitsfile* f, const std::string& path, const PreprocImage& img)
{
    EX2D_RETURN_NOT_OK(
        write_plane(f, path, "IMAGE", FLOAT_IMG, img.ny, img.nx, TDOUBLE, img.image.data()));
    EX2D_RETURN_NOT_OK(fits::write_header(f, path, img.header));
    EX2D_RETURN_NOT_OK(
        write_plane(f, path, "IVAR", FLOAT_IMG, img.ny, img.nx, TDOUBLE, img.ivar.data()));

    // One tile per image row, as astropy writes DESI's MASK.
    int status = 0;
    long tile[2] = {img.nx, 1};
    fits_set_compression_type(f, RICE_1, &status);
    fits_set_tile_dim(f, 2, tile, &status);
    if (status) return fits::io_error(path, "cannot set up MASK compression", status);
    // cfitsio's tile compressor takes int16 input but not uint32; check_sizes() has made
    // sure every value fits.
    std::vector<short> mask(img.mask.begin(), img.mask.end());
    Status mask_status =
        write_plane(f, path, "MASK", SHORT_IMG, img.ny, img.nx, TSHORT, mask.data());
    // 0, not NOCOMPRESS (-1): cfitsio treats any non-zero request as "compress".
    fits_set_compression_type(f, 0, &status);
    EX2D_RETURN_NOT_OK(mask_status);
    if (status) return fits::io_error(path, "cannot reset compression", status);

    if (!img.readnoise.empty()) {
        EX2D_RETURN_NOT_OK(write_plane(f, path, "READNOISE", FLOAT_IMG, img.ny, img.nx, TDOUBLE,
                                       img.readnoise.data()));
    }
    if (!img.fibermap.empty()) {
        fits::BlobReader reader;
        EX2D_RETURN_NOT_OK(reader.open(img.fibermap, path + " (FIBERMAP)"));
        if (fits_copy_hdu(reader.get(), f, 0, &status)) {
            return fits::io_error(path, "cannot write HDU FIBERMAP", status);
        }
        fits_update_key(f, TSTRING, "EXTNAME", const_cast<char*>("FIBERMAP"), nullptr, &status);
        if (status) return fits::io_error(path, "cannot write HDU FIBERMAP", status);
    }
    return Status::ok();
}

}  // namespace

Status write_preproc(const std::string& path, const PreprocImage& img)
{
    EX2D_RETURN_NOT_OK(check_sizes(path, img));
    return fits::write_atomically(path,
                                  [&](fitsfile* f) { return write_preproc_hdus(f, path, img); });
}

}  // namespace ex2d
