// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file measure.hpp
/// The two measurements of trace shifts on a frame (see ex2d/trace_shifts.hpp).

#include <vector>

#include "ex2d/extraction_backend.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::traceshift {

/// A fibre's trace sampled densely in wavelength, to go from a CCD row to the wavelength and
/// column of the trace there by linear interpolation (Y grows with wavelength).
class TraceSamples {
public:
    TraceSamples(const GaussHermitePsf& psf, int fiber);
    double first_row() const { return y_.front(); }
    double last_row() const { return y_.back(); }
    /// Column and wavelength of the trace at `row` (first_row() <= row <= last_row()).
    void at_row(double row, double& x, double& wave) const;

private:
    std::vector<double> y_, x_, w_;
};

/// Rows of the CCD per x offset: desi_compute_trace_shifts' 100.
constexpr int kRowsPerXOffset = 100;

/// What the PSF predicts for the x centroid: per fibre and block of kRowsPerXOffset rows, the
/// centroid (px, relative to the trace) of the PSF's cross-dispersion profile in the
/// measurement window, as a function of the trace's sub-pixel phase. Depends on the PSF's
/// shape only, so it is made once per frame.
class XCentroidModel {
public:
    XCentroidModel(const GaussHermitePsf& psf, int nfibers, int ny, int width);
    /// `phase` = x - round(x) in [-0.5, 0.5].
    double centroid(int fiber, int block, double phase) const;

private:
    static constexpr int kPhases = 17;
    int nblocks_ = 0;
    std::vector<double> table_;  ///< [fiber][block][kPhases]
};

/// x offsets of the first `nfibers` fibres: one per fibre and block of rows where the
/// profile's S/N exceeds 3 and no pixel of the window is masked, for the fibres where half
/// of the blocks do (lit fibres).
/// (View: ImageView or Float32ImageView.)
template <typename View>
std::vector<TraceOffset> measure_x_offsets(const View& image, const GaussHermitePsf& psf,
                                           const XCentroidModel& model, int nfibers, int width,
                                           int rows_rebin);

/// y offsets of the first `nfibers` fibres: one per fibre and reference line (lines closer
/// than a spot measured together) whose summed profile has S/N above 10, nothing masked.
/// The PSF's prediction for each window comes from `spectrum` (the reference's samples,
/// sorted by wavelength) where it is not empty, else from the lines.
template <typename View>
std::vector<TraceOffset> measure_y_offsets(const View& image, const GaussHermitePsf& psf,
                                           const std::vector<ReferenceLine>& lines,
                                           const std::vector<ReferenceLine>& spectrum, int nfibers,
                                           int width);

}  // namespace ex2d::traceshift
