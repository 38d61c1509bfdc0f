// SPDX-License-Identifier: BSD-3-Clause
#include <cmath>
#include <vector>

#include "ex2d/preproc.hpp"
#include "fits_util.hpp"

namespace ex2d {

Result<PreprocWeightedFloat32> read_preproc_weighted_float32(const std::string& path)
{
    EX2D_ASSIGN_OR_RETURN(PreprocImage meta, read_preproc_metadata(path));
    PreprocWeightedFloat32 out;
    out.ny = meta.ny;
    out.nx = meta.ccd_width();
    out.header = std::move(meta.header);
    out.source = path;
    const long long npix = (long long)out.ny * out.nx;

    EX2D_ASSIGN_OR_RETURN(fits::FitsPtr file, fits::open_read(path));
    EX2D_ASSIGN_OR_RETURN(const std::vector<std::string> names, fits::scan_hdus(file.get(), path));
    out.image.resize(size_t(npix));
    out.weights.resize(size_t(npix));
    EX2D_RETURN_NOT_OK(fits::move_to_named(file.get(), path, names, "IMAGE"));
    EX2D_RETURN_NOT_OK(
        fits::read_pixels(file.get(), path, "IMAGE", TFLOAT, npix, out.image.data()));
    EX2D_RETURN_NOT_OK(fits::move_to_named(file.get(), path, names, "IVAR"));
    EX2D_RETURN_NOT_OK(
        fits::read_pixels(file.get(), path, "IVAR", TFLOAT, npix, out.weights.data()));
    {
        LargeArray<int> mask(static_cast<size_t>(npix));
        EX2D_RETURN_NOT_OK(fits::move_to_named(file.get(), path, names, "MASK"));
        EX2D_RETURN_NOT_OK(fits::read_pixels(file.get(), path, "MASK", TINT, npix, mask.data()));
        for (size_t i = 0; i < size_t(npix); ++i) {
            const bool good = (mask[i] & kExtractMaskBits) == 0 && std::isfinite(out.image[i]) &&
                              std::isfinite(out.weights[i]) && out.weights[i] > 0;
            if (!good) {
                out.weights[i] = 0.0f;
                if (!std::isfinite(out.image[i])) out.image[i] = 0.0f;
            }
        }
    }
    EX2D_RETURN_NOT_OK(fits::close(path, file));
    return out;
}

}  // namespace ex2d
