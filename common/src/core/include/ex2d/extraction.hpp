// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file extraction.hpp
/// The frame-level driver: plans the patches (desispec's patch geometry; docs/algorithm-notes.md),
/// runs a backend, stitches the core blocks into a frame and applies the mask rules.

#include <atomic>
#include <vector>

#include "ex2d/extraction_backend.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// numpy.arange(wmin, wmax + dw/2, dw): x[i] = wmin + i * ((wmin + dw) - wmin).
std::vector<double> wavelength_grid(double wmin, double wmax, double dw);
/// numpy.gradient of a grid (one-sided at the ends, central inside).
std::vector<double> grid_gradient(const std::vector<double>& wave);

/// wavepad + int(wavepad * wavepad_frac): 12 for the defaults.
int effective_wavepad(const ExtractionOptions& opt);

/// The extraction grid of `opt` (PSF HDU WAVEMIN/WAVEMAX where opt leaves them 0) and the
/// padded grid: wavepad_eff bins before, wavepad_eff + nwavestep after.
struct WaveGrids {
    std::vector<double> wave;
    std::vector<double> padded;
    int pad = 12;
};
WaveGrids make_wave_grids(const GaussHermitePsf& psf, const ExtractionOptions& opt);

/// Checks the option combination (bundle alignment, ranges) against the PSF.
Status validate_options(const GaussHermitePsf& psf, const ExtractionOptions& opt);
/// validate_options without the PSF: every check but specmin + nspec against the PSF's
/// fibres, with the same messages (what ex2dctl submit checks before queueing).
Status validate_option_values(const ExtractionOptions& opt);

/// Patches of a frame in bundle, sub-bundle, wavelength order, with pixel windows
/// clipped to the CCD [0, ny) x [0, nx).
std::vector<PatchGeometry> plan_patches(const GaussHermitePsf& psf, const ExtractionOptions& opt,
                                        const WaveGrids& grids, int ccd_ny, int ccd_nx);

/// The batch extract_frame hands its backend: every patch of `opt` on `image`, with the
/// solver settings. It points into `psf` and `grids`, which must outlive it. Throws
/// ex2d::Error where a patch's columns fall outside an image window (a programming error).
PatchBatch plan_batch(const ImageView& image, const GaussHermitePsf& psf,
                      const ExtractionOptions& opt, const WaveGrids& grids);

/// Extracts a frame from pixels and weights in memory. `image.weights` must already be
/// zero at masked pixels (see PreprocImage::weights()). When `cancel` turns true before the
/// backend has finished, the frame is dropped and the status is StatusCode::cancelled.
Result<ExtractedFrame> extract_frame(const ImageView& image, const GaussHermitePsf& psf,
                                     const ExtractionOptions& opt, ExtractionBackend& backend,
                                     const ProgressCallback& progress = {},
                                     const std::atomic<bool>* cancel = nullptr);

/// BAD2DFIT rule of desispec PR #2612: chi2pix > 5 x median over fibres at that wavelength
/// and > 5 x median over wavelengths of that fibre, medians over the whole frame.
void apply_mask_rules(ExtractedFrame& frame);

/// Dense R (nwave x nwave) of one spectrum from its stored diagonals, for tests and analysis:
/// R[j - nd + d][j] = resolution[spec][d][j].
std::vector<double> dense_resolution(const ExtractedFrame& frame, int spec);

}  // namespace ex2d
