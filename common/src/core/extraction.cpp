// SPDX-License-Identifier: BSD-3-Clause
// The frame driver: plan patches, run the backend, stitch the kept blocks, convert to per
// Angstrom and apply desispec's mask rules.
#include "ex2d/extraction.hpp"

#include <algorithm>
#include <cmath>

#include "ex2d/cpu_count.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/usable_pixels.hpp"

namespace ex2d {

namespace {

// numpy.median: mean of the two middle values for an even count.
double median(std::vector<double>& v)
{
    if (v.empty()) return 0.0;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + mid, v.end());
    const double upper = v[mid];
    if (v.size() % 2 == 1) return upper;
    const double lower = *std::max_element(v.begin(), v.begin() + mid);
    return 0.5 * (lower + upper);
}

void stitch_patch(const PatchGeometry& p, const PatchResult& r, const ExtractionOptions& opt,
                  ExtractedFrame& frame)
{
    const int ncore_w = p.ncore_wave, ndiag = frame.ndiag;
    for (int cf = 0; cf < p.ncore_fiber(); ++cf) {
        const int spec = p.core_fiber_begin + cf - frame.specmin;
        for (int jj = 0; jj < ncore_w; ++jj) {
            const int j = p.wave_step * opt.nwavestep + jj;
            const size_t out = size_t(spec) * frame.nwave + j;
            const size_t in = size_t(cf) * ncore_w + jj;
            frame.flux[out] = r.flux[in];
            frame.ivar[out] = r.ivar[in];
            frame.xflux[out] = r.xflux[in];
            frame.chi2pix[out] = r.chi2pix[in];
            frame.pixmask_fraction[out] = r.pixmask_fraction[in];
            if (r.status == PatchStatus::failed) frame.mask[out] |= specmask::bad2dfit;
            for (int d = 0; d < ndiag; ++d) {
                frame.resolution[(size_t(spec) * ndiag + d) * frame.nwave + j] =
                    r.resolution[(size_t(cf) * ndiag + d) * ncore_w + jj];
            }
        }
    }
}

// Model image A . xflux, one term per extracted (fibre, bin), accumulated in a fixed order
// so it does not depend on threads.
void build_model_image(const GaussHermitePsf& psf, const ExtractionOptions& opt,
                       const std::vector<double>& wave, int ny, int nx, ExtractedFrame& frame)
{
    frame.model.assign(size_t(ny) * nx, 0.0);
    frame.model_ny = ny;
    frame.model_nx = nx;
    const int nthreads = default_thread_count();
    for (int b = 0; b < opt.nspec; b += opt.bundlesize) {
        const SpotGrid spots = evaluate_spots(psf, opt.specmin + b, opt.bundlesize, wave, nthreads);
        for (int f = 0; f < spots.nfiber; ++f) {
            for (int w = 0; w < spots.nwave; ++w) {
                const double x = frame.xflux[size_t(b + f) * frame.nwave + w];
                if (x == 0) continue;
                const double* stamp = spots.stamp(f, w);
                const int xc = spots.corner_x(f, w), yc = spots.corner_y(f, w);
                for (int iy = 0; iy < spots.ny; ++iy) {
                    const int row = yc + iy;
                    if (row < 0 || row >= ny) continue;
                    for (int ix = 0; ix < spots.nx; ++ix) {
                        const int col = xc + ix;
                        if (col < 0 || col >= nx) continue;
                        frame.model[size_t(row) * nx + col] += stamp[iy * spots.nx + ix] * x;
                    }
                }
            }
        }
    }
}

}  // namespace

void apply_mask_rules(ExtractedFrame& frame)
{
    const int ns = frame.nspec, nw = frame.nwave;
    std::vector<double> per_wave(nw), per_fiber(ns), buf;
    for (int j = 0; j < nw; ++j) {
        buf.resize(ns);
        for (int s = 0; s < ns; ++s) buf[s] = frame.chi2pix[size_t(s) * nw + j];
        per_wave[j] = median(buf);
    }
    for (int s = 0; s < ns; ++s) {
        buf.assign(frame.chi2pix.begin() + size_t(s) * nw,
                   frame.chi2pix.begin() + size_t(s + 1) * nw);
        per_fiber[s] = median(buf);
    }
    for (int s = 0; s < ns; ++s) {
        for (int j = 0; j < nw; ++j) {
            const size_t k = size_t(s) * nw + j;
            const double pmf = frame.pixmask_fraction[k];
            if (pmf > 0.5) frame.mask[k] |= specmask::somebadpix;
            if (pmf == 1.0) frame.mask[k] |= specmask::allbadpix;
            const double chi2 = frame.chi2pix[k];
            if (chi2 > 5 * per_wave[j] && chi2 > 5 * per_fiber[s])
                frame.mask[k] |= specmask::bad2dfit;
        }
    }
}

std::vector<double> dense_resolution(const ExtractedFrame& frame, int spec)
{
    const int nw = frame.nwave, nd = frame.ndiag / 2;
    std::vector<double> r(size_t(nw) * nw, 0.0);
    for (int d = 0; d < frame.ndiag; ++d) {
        for (int j = 0; j < nw; ++j) {
            const int row = j - nd + d;
            if (row < 0 || row >= nw) continue;
            r[size_t(row) * nw + j] = frame.resolution[(size_t(spec) * frame.ndiag + d) * nw + j];
        }
    }
    return r;
}

PatchBatch plan_batch(const ImageView& image, const GaussHermitePsf& psf,
                      const ExtractionOptions& opt, const WaveGrids& grids)
{
    PatchBatch batch;
    batch.psf = &psf;
    batch.image = image;
    batch.padded_wave = &grids.padded;
    batch.patches = plan_patches(psf, opt, grids, image.ny, image.nx);
    for (const PatchGeometry& p : batch.patches) {
        if (p.col_begin < image.col_begin || p.col_end > image.col_begin + image.stride()) {
            throw Error("extract_frame: patch columns " + std::to_string(p.col_begin) + ".." +
                        std::to_string(p.col_end) + " are outside the image window");
        }
    }
    batch.regularize = opt.regularize;
    batch.psferr = opt.psferr >= 0 ? opt.psferr : psf.psferr;
    batch.want_model = opt.want_model;
    return batch;
}

Result<ExtractedFrame> extract_frame(const ImageView& image, const GaussHermitePsf& psf,
                                     const ExtractionOptions& opt, ExtractionBackend& backend,
                                     const ProgressCallback& progress,
                                     const std::atomic<bool>* cancel)
{
    EX2D_RETURN_NOT_OK(psf.validate());
    EX2D_RETURN_NOT_OK(validate_options(psf, opt));
    if (image.ny != psf.npix_y || image.nx != psf.npix_x) {
        return Status::format("image is " + std::to_string(image.nx) + " x " +
                              std::to_string(image.ny) + " pixels but PSF " + psf.source +
                              " is for a " + std::to_string(psf.npix_x) + " x " +
                              std::to_string(psf.npix_y) + " CCD");
    }
    const WaveGrids grids = make_wave_grids(psf, opt);
    if (grids.wave.empty()) return Status::invalid("empty wavelength grid");

    // The same pixels for every backend (usable_pixels.hpp).
    const UsableImage usable(image);
    if (usable.masked() > 0) {
        logger()->warn(
            "event=unusable_pixels_masked count={} reason=\"non-finite value or weight with a "
            "positive weight\"",
            usable.masked());
    }
    PatchBatch batch = plan_batch(usable.view(), psf, opt, grids);
    batch.cancel = cancel;
    EX2D_RETURN_NOT_OK(backend.check_batch(batch));

    ExtractedFrame frame;
    frame.specmin = opt.specmin;
    frame.nspec = opt.nspec;
    frame.nwave = int(grids.wave.size());
    frame.ndiag = psf.stamp_ny();
    frame.wave = grids.wave;
    frame.psferr = batch.psferr;
    const size_t n = size_t(frame.nspec) * frame.nwave;
    frame.flux.assign(n, 0.0);
    frame.ivar.assign(n, 0.0);
    frame.xflux.assign(n, 0.0);
    frame.chi2pix.assign(n, 0.0);
    frame.pixmask_fraction.assign(n, 0.0);
    frame.mask.assign(n, 0u);
    frame.resolution.assign(n * frame.ndiag, 0.0);

    std::vector<PatchResult> results;
    backend.extract(batch, results, frame.stage_times, progress);
    if (batch.cancelled()) {
        return Status(StatusCode::cancelled, "the extraction was stopped before its " +
                                                 std::to_string(batch.patches.size()) +
                                                 " patches were solved");
    }
    frame.npatch = long(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
        const PatchGeometry& p = batch.patches[i];
        const PatchResult& r = results[i];
        if (r.status != PatchStatus::ok) {
            (r.status == PatchStatus::failed ? frame.npatch_failed : frame.npatch_retried)++;
            logger()->warn(
                "patch {} bundle={} subbundle={} wave_step={} fibers={}-{} rows={}-{}: {}",
                r.status == PatchStatus::failed ? "failed, zeroed and masked" : "retried", p.bundle,
                p.subbundle, p.wave_step, p.core_fiber_begin, p.core_fiber_end - 1, p.row_begin,
                p.row_end, r.failure);
        }
        stitch_patch(p, r, opt, frame);
    }
    if (opt.want_model) {
        const ModelRequest request{&psf,      &grids.wave,    &frame.xflux, opt.specmin,
                                   opt.nspec, opt.bundlesize, image.ny,     image.nx};
        if (backend.model_image(request, frame.model, frame.stage_times)) {
            frame.model_ny = image.ny;
            frame.model_nx = image.nx;
        } else {
            build_model_image(psf, opt, grids.wave, image.ny, image.nx, frame);
        }
    }

    // per Angstrom: flux / dwave, ivar * dwave^2 with dwave = numpy.gradient of the grid
    const std::vector<double> dwave = grid_gradient(frame.wave);
    for (int s = 0; s < frame.nspec; ++s) {
        for (int j = 0; j < frame.nwave; ++j) {
            const size_t k = size_t(s) * frame.nwave + j;
            frame.flux[k] /= dwave[j];
            frame.ivar[k] *= dwave[j] * dwave[j];
        }
    }
    apply_mask_rules(frame);
    return frame;
}

}  // namespace ex2d
