// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/frame_io.hpp"
#include "fits_util.hpp"

namespace ex2d {

namespace {

/// Reads image HDU `name` as `datatype`; its FITS axes (NAXIS1 first) must equal `expected`.
template <typename T>
Status read_array(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                  const std::string& name, const std::vector<long>& expected, int datatype,
                  std::vector<T>& out)
{
    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, name));
    EX2D_ASSIGN_OR_RETURN(const std::vector<long> naxes, fits::image_shape(f, path, name));
    if (naxes != expected) {
        return Status::format(path + ": HDU " + name + " does not have the shape of FLUX");
    }
    long long npix = 1;
    for (long n : naxes) npix *= n;
    out.assign(size_t(npix), T{});
    return fits::read_pixels(f, path, name, datatype, npix, out.data());
}

}  // namespace

Result<FrameFile> read_frame(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(fits::FitsPtr file, fits::open_read(path));
    fitsfile* f = file.get();
    FrameFile frame;
    EX2D_ASSIGN_OR_RETURN(frame.hdu_names, fits::scan_hdus(f, path));
    const std::vector<std::string>& names = frame.hdu_names;

    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "FLUX"));
    EX2D_ASSIGN_OR_RETURN(frame.header, fits::read_header(f, path));
    EX2D_ASSIGN_OR_RETURN(std::vector<long> naxes, fits::image_shape(f, path, "FLUX"));
    if (naxes.size() != 2) return Status::format(path + ": HDU FLUX is not a 2-D image");
    frame.nwave = int(naxes[0]);
    frame.nspec = int(naxes[1]);
    const long nwave = frame.nwave;
    const long nspec = frame.nspec;
    EX2D_RETURN_NOT_OK(read_array(f, path, names, "FLUX", naxes, TDOUBLE, frame.flux));
    EX2D_RETURN_NOT_OK(read_array(f, path, names, "IVAR", naxes, TDOUBLE, frame.ivar));
    EX2D_RETURN_NOT_OK(read_array(f, path, names, "MASK", naxes, TUINT, frame.mask));
    EX2D_RETURN_NOT_OK(read_array(f, path, names, "WAVELENGTH", {nwave}, TDOUBLE, frame.wave));

    EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "RESOLUTION"));
    EX2D_ASSIGN_OR_RETURN(naxes, fits::image_shape(f, path, "RESOLUTION"));
    if (naxes.size() != 3 || naxes[0] != nwave || naxes[2] != nspec) {
        return Status::format(path + ": HDU RESOLUTION is not [nspec][ndiag][nwave]");
    }
    frame.ndiag = int(naxes[1]);
    EX2D_RETURN_NOT_OK(read_array(f, path, names, "RESOLUTION", naxes, TDOUBLE, frame.resolution));

    if (fits::find_hdu(names, "CHI2PIX")) {
        EX2D_RETURN_NOT_OK(
            read_array(f, path, names, "CHI2PIX", {nwave, nspec}, TDOUBLE, frame.chi2pix));
    }
    if (fits::find_hdu(names, "FIBERMAP")) {
        EX2D_RETURN_NOT_OK(fits::move_to_named(f, path, names, "FIBERMAP"));
        FitsTableBlob fibermap;
        EX2D_RETURN_NOT_OK(fits::copy_hdu_to_blob(f, path, fibermap));
        auto fibers = read_int_column(fibermap, "FIBER");
        if (!fibers.is_ok()) {
            return Status::format(path + ": FIBERMAP: " + fibers.status().message());
        }
        frame.fiber = std::move(fibers).value();
    }
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    return frame;
}

}  // namespace ex2d

namespace ex2d {

Result<FitsHeader> read_frame_header(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(const fits::FitsPtr file, fits::open_read(path));
    return fits::read_header(file.get(), path);
}

}  // namespace ex2d
