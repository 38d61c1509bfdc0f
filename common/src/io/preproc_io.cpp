// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/preproc.hpp"

#include <cmath>

#include "ex2d/logging.hpp"
#include "fits_util.hpp"

namespace ex2d {

namespace {

constexpr std::uint32_t kMaskBad = 1;  // ccdmask BAD

std::string shape_text(long ny, long nx) { return std::to_string(ny) + "x" + std::to_string(nx); }

/// Reads the 2-D image HDU `name` as doubles; its shape must be [ny][nx] when ny > 0.
Status read_plane(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                  const std::string& name, int ny, int nx, std::vector<double>& out)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, name));
    std::vector<long> naxes;
    EX2D_RETURN_NOT_OK(fits::image_shape(f, path, name, naxes));
    if (naxes.size() != 2 || naxes[0] != nx || naxes[1] != ny) {
        std::string got = naxes.size() == 2 ? shape_text(naxes[1], naxes[0])
                                            : std::to_string(naxes.size()) + "-D";
        return Status::format(path + ": HDU " + name + " has shape " + got + ", IMAGE has " +
                              shape_text(ny, nx));
    }
    out.assign(size_t(ny) * size_t(nx), 0.0);
    return fits::read_pixels(f, path, name, TDOUBLE, (long long)out.size(), out.data());
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
    fits::FitsPtr file;
    EX2D_RETURN_NOT_OK(fits::open_read(path, file));
    std::vector<std::string> names;
    EX2D_RETURN_NOT_OK(fits::scan_hdus(file.get(), path, names));
    FitsTableBlob blob;
    EX2D_RETURN_NOT_OK(read_fibermap_hdu(file.get(), path, names, blob));
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    return blob;
}

std::vector<double> PreprocImage::weights() const
{
    std::vector<double> w(ivar.size(), 0.0);
    for (size_t i = 0; i < w.size(); ++i) {
        bool good = (mask[i] & kExtractMaskBits) == 0 && std::isfinite(image[i]) &&
                    std::isfinite(ivar[i]) && ivar[i] > 0;
        w[i] = good ? ivar[i] : 0.0;
    }
    return w;
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

Result<PreprocImage> read_preproc(const std::string& path)
{
    fits::FitsPtr file;
    EX2D_RETURN_NOT_OK(fits::open_read(path, file));
    fitsfile* f = file.get();
    std::vector<std::string> names;
    EX2D_RETURN_NOT_OK(fits::scan_hdus(f, path, names));

    PreprocImage img;
    img.source = path;
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "IMAGE"));
    EX2D_RETURN_NOT_OK(fits::read_header(f, path, img.header));
    std::vector<long> naxes;
    EX2D_RETURN_NOT_OK(fits::image_shape(f, path, "IMAGE", naxes));
    if (naxes.size() != 2 || naxes[0] < 1 || naxes[1] < 1) {
        return Status::format(path + ": HDU IMAGE is not a 2-D image");
    }
    img.nx = int(naxes[0]);
    img.ny = int(naxes[1]);
    EX2D_RETURN_NOT_OK(read_plane(f, path, names, "IMAGE", img.ny, img.nx, img.image));
    EX2D_RETURN_NOT_OK(read_plane(f, path, names, "IVAR", img.ny, img.nx, img.ivar));

    // MASK is a tile-compressed int16 image; cfitsio decompresses it as an image HDU.
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "MASK"));
    EX2D_RETURN_NOT_OK(fits::image_shape(f, path, "MASK", naxes));
    if (naxes.size() != 2 || naxes[0] != img.nx || naxes[1] != img.ny) {
        return Status::format(path + ": HDU MASK has a shape different from IMAGE (" +
                              shape_text(img.ny, img.nx) + ")");
    }
    std::vector<int> mask(size_t(img.ny) * size_t(img.nx), 0);
    EX2D_RETURN_NOT_OK(fits::read_pixels(f, path, "MASK", TINT, (long long)mask.size(),
                                         mask.data()));
    img.mask.resize(mask.size());
    for (size_t i = 0; i < mask.size(); ++i) {
        // desispec reads MASK as uint16: a negative int16 value is its two's complement.
        img.mask[i] = std::uint32_t(mask[i]) & 0xFFFFu;
    }

    if (fits::find_hdu(names, "READNOISE")) {
        EX2D_RETURN_NOT_OK(read_plane(f, path, names, "READNOISE", img.ny, img.nx,
                                      img.readnoise));
    }
    if (fits::find_hdu(names, "FIBERMAP")) {
        EX2D_RETURN_NOT_OK(read_fibermap_hdu(f, path, names, img.fibermap));
    }
    EX2D_RETURN_NOT_OK(fits::close(path, file));

    long masked = img.mask_nonfinite();
    if (masked > 0) {
        logger()->warn("event=nonfinite_pixels_masked file={} count={}", path, masked);
    }
    return img;
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
    if (img.image.size() != npix || img.ivar.size() != npix || img.mask.size() != npix ||
        (!img.readnoise.empty() && img.readnoise.size() != npix)) {
        return Status::invalid(path + ": preproc arrays do not match ny x nx = " +
                               shape_text(img.ny, img.nx));
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
    return fits::write_atomically(
        path, [&](fitsfile* f) { return write_preproc_hdus(f, path, img); });
}

}  // namespace ex2d
