// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/frame_parts.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

namespace ex2d {

BundleShare bundle_share(int nbundle, int index, int count)
{
    if (nbundle < 0 || count <= 0 || index < 0 || index >= count) {
        throw std::invalid_argument("bundle_share: share " + std::to_string(index) + " of " +
                                    std::to_string(count) + " of " + std::to_string(nbundle) +
                                    " bundles");
    }
    const auto begin = [&](int i) { return int(static_cast<long>(nbundle) * i / count); };
    return {begin(index), begin(index + 1) - begin(index)};
}

namespace {

template <class Vector>
void append(Vector& to, const Vector& from)
{
    to.insert(to.end(), from.begin(), from.end());
}

std::string describe(const ExtractedFrame& part)
{
    return "the part of spectra " + std::to_string(part.specmin) + "-" +
           std::to_string(part.specmin + part.nspec - 1);
}

Status check_fits(const ExtractedFrame& merged, const ExtractedFrame& part)
{
    if (part.specmin != merged.specmin + merged.nspec) {
        return Status::invalid(describe(part) + " does not follow spectra " +
                               std::to_string(merged.specmin) + "-" +
                               std::to_string(merged.specmin + merged.nspec - 1));
    }
    if (part.nwave != merged.nwave || part.wave != merged.wave || part.ndiag != merged.ndiag) {
        return Status::invalid(describe(part) + " has another wavelength grid or resolution width");
    }
    if (part.psferr != merged.psferr) {
        return Status::invalid(describe(part) + " was extracted with another psferr");
    }
    if (part.model.size() != merged.model.size() || part.model_ny != merged.model_ny ||
        part.model_nx != merged.model_nx) {
        return Status::invalid(describe(part) + " has another model image");
    }
    const auto cells = std::size_t(part.nspec) * std::size_t(part.nwave);
    if (part.flux.size() != cells || part.ivar.size() != cells || part.mask.size() != cells ||
        part.chi2pix.size() != cells || part.pixmask_fraction.size() != cells ||
        part.xflux.size() != cells || part.resolution.size() != cells * std::size_t(part.ndiag)) {
        return Status::invalid(describe(part) + " has arrays of the wrong size");
    }
    return Status::ok();
}

}  // namespace

Result<ExtractedFrame> merge_frame_parts(std::vector<ExtractedFrame> parts)
{
    if (parts.empty()) return Status::invalid("no part of the frame to merge");
    std::sort(parts.begin(), parts.end(), [](const ExtractedFrame& a, const ExtractedFrame& b) {
        return a.specmin < b.specmin;
    });
    // The first part's grid, widths and model size, none of its spectra.
    ExtractedFrame merged;
    const ExtractedFrame& first = parts.front();
    std::tie(merged.specmin, merged.nwave, merged.ndiag, merged.wave, merged.psferr,
             merged.model_ny, merged.model_nx) =
        std::tie(first.specmin, first.nwave, first.ndiag, first.wave, first.psferr, first.model_ny,
                 first.model_nx);
    merged.model.assign(first.model.size(), 0.0);
    for (const ExtractedFrame& part : parts) {
        if (Status fits = check_fits(merged, part); !fits.is_ok()) return fits;
        merged.nspec += part.nspec;
        for (auto per_bin : {&ExtractedFrame::flux, &ExtractedFrame::ivar, &ExtractedFrame::chi2pix,
                             &ExtractedFrame::pixmask_fraction, &ExtractedFrame::xflux}) {
            append(merged.*per_bin, part.*per_bin);
        }
        append(merged.mask, part.mask);
        append(merged.resolution, part.resolution);
        std::transform(merged.model.begin(), merged.model.end(), part.model.begin(),
                       merged.model.begin(), [](double a, double b) { return a + b; });
        merged.npatch += part.npatch;
        merged.npatch_retried += part.npatch_retried;
        merged.npatch_failed += part.npatch_failed;
        merged.stage_times += part.stage_times;
    }
    return merged;
}

}  // namespace ex2d
