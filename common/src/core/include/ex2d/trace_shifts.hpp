// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file trace_shifts.hpp
/// Trace shifts: where a frame's spectral traces lie relative to a PSF's, measured on the
/// frame itself, and the PSF's XTRACE/YTRACE moved there (the step desi_proc runs as
/// desi_compute_trace_shifts before extracting science and flat frames). The method and its
/// accuracy are in docs/algorithm-notes.md ("Trace shifts").
///
/// x: per fibre and block of CCD rows, the flux-weighted centroid of the cross-dispersion
/// profile in a window around the trace, less the centroid the PSF predicts in the same
/// window; y: per fibre and reference emission line, the centroid along the rows of the line
/// summed across the trace, less the PSF's. Both are fitted by polynomials in (x, y) of the
/// requested degrees, the traces moved, and the measurement repeated until it converges.
///
/// Both reach only about +-width/2 px; the large-shift scan (desi_compute_trace_shifts' own,
/// made unless --no-large-shift-scan) first finds a constant offset of all traces over tens of
/// pixels on continuum and arc frames.

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "ex2d/extraction_backend.hpp"
#include "ex2d/night_sky_lines.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// desi_compute_trace_shifts' large-shift scan: one constant offset of every trace, searched
/// over tens of pixels before the fine measurement.
enum class LargeShiftScan {
    none,       ///< no scan (--no-large-shift-scan; desi_proc's science and flat frames)
    continuum,  ///< x from wide cross-dispersion profiles (continuum and LED frames)
    arc_lamps,  ///< x and y from the spots of TraceShiftOptions::lines (arc frames)
};

/// The scan's name in log lines and messages: "none", "continuum", "arc_lamps".
const char* large_shift_scan_name(LargeShiftScan scan);

struct TraceShiftOptions {
    int degxx = 0;  ///< degree of dx in CCD x (across fibres)
    int degxy = 0;  ///< degree of dx in CCD y (along wavelength)
    int degyx = 0;  ///< degree of dy in CCD x
    int degyy = 0;  ///< degree of dy in CCD y
    /// Measure dy from these lines (vacuum A); empty: x only (continuum frames).
    std::vector<ReferenceLine> lines;
    /// The reference spectrum the lines come from, sample by sample (vacuum A, flux), when
    /// there is one: the prediction for each line's window is then built from every sample
    /// near it, so that neighbours the reference has (blends, lines under the continuum
    /// sidebands) count as they do in the frame. Empty: from the lines alone.
    std::vector<ReferenceLine> spectrum;
    int width = 7;            ///< columns of the cross-dispersion window (odd)
    int ccd_rows_rebin = 4;   ///< rows summed before the x centroids (speed)
    double max_error = 0.05;  ///< px: largest fit error at the CCD corners before the
                              ///< degrees are lowered (first along y, then along x)
    int nfibers = 0;          ///< fibres measured, from the first; 0 = all
    int max_iterations = 10;  ///< per axis; stops earlier when the traces move < 0.001 px
    /// Scan for a large constant offset before the fine measurement; arc_lamps predicts the
    /// spots of `lines` (the arc lamps' lines).
    LargeShiftScan large_shift_scan = LargeShiftScan::none;
};

/// What the large-shift scan found.
struct LargeShiftScanResult {
    LargeShiftScan method = LargeShiftScan::none;
    double dx = 0;  ///< px added to every fibre's XTRACE before the fine measurement
    double dy = 0;  ///< px added to every fibre's YTRACE (arc lamps only)
    /// continuum: the best offset (px) of each band of rows, bottom up, NaN where the band
    /// shows no trace light; dx is their median
    std::vector<double> band_dx;
    int spots_predicted = 0;  ///< arc lamps: spots of the reference lines on the CCD
    int spots_detected = 0;   ///< arc lamps: spots detected in the image
    int matches = 0;          ///< arc lamps: pairs of the last pass (1 fibre separation)
};

/// One measured offset (as desi_compute_trace_shifts' --outoffsets table).
struct TraceOffset {
    int axis = 0;  ///< 0: y (wavelength), 1: x (cross-dispersion), desispec's AXIS
    int fiber = 0;
    double wave = 0;   ///< A
    double x = 0;      ///< CCD column of the measurement
    double y = 0;      ///< CCD row
    double delta = 0;  ///< px, measured offset of the data from the input traces
    double error = 0;  ///< px
    bool used = true;  ///< false: rejected as an outlier by the fit
};

/// Trace shifts of one frame.
struct TraceShiftResult {
    LegendreTable xtrace;              ///< corrected XTRACE (same degree and domain as the input)
    LegendreTable ytrace;              ///< corrected YTRACE
    std::vector<TraceOffset> offsets;  ///< the last iteration's measurements, axis y first
    int degxx = 0, degxy = 0, degyx = 0, degyy = 0;  ///< degrees used (after lowering)
    bool y_measured = false;
    int x_iterations = 0;
    int y_iterations = 0;
    LargeShiftScanResult scan;  ///< method none where no scan was asked for
    /// Output minus input traces of every fibre at 5 wavelengths spanning the trace domain
    /// (desispec's MEANDX, MINDX, ... header keys).
    double mean_dx = 0, min_dx = 0, max_dx = 0;
    double mean_dy = 0, min_dy = 0, max_dy = 0;
};

/// One of the summary header keys desispec writes with shifted traces (MEANDX ... MAXDY).
struct TraceShiftKey {
    const char* name;
    double value;
    const char* comment;
};
/// The six summary keys of `result`, in desispec's order; the output PSF and the frame header
/// carry the same ones.
std::array<TraceShiftKey, 6> trace_shift_summary_keys(const TraceShiftResult& result);

/// desi_proc's trace-shift method for an exposure's OBSTYPE (upper or lower case, blanks
/// ignored): "sky" for SCIENCE and SKY, "continuum" for FLAT, TESTFLAT and TWILIGHT, "none"
/// for the others (ARC, ZERO, DARK, ...).
std::string trace_shift_method_for_obstype(const std::string& obstype);

/// desi_proc's options for `method`: "sky" is --degxx 2 --degxy 0 --degyx 2 --degyy 0 --sky,
/// "continuum" --degxx 2 --degxy 0 --continuum (x only).
TraceShiftOptions desi_proc_trace_shift_options(const std::string& method);

/// A frame's pixels and weights in float32, whole CCD rows (read_preproc_weighted_float32):
/// half the memory of ImageView's doubles, and all the precision trace shifts need.
struct Float32ImageView {
    int ny = 0;
    int nx = 0;
    const float* pixels = nullptr;   ///< electrons, [ny][nx]
    const float* weights = nullptr;  ///< ivar with masked pixels at 0
    int col_begin = 0;               ///< always 0: whole rows

    int stride() const { return nx; }
    std::size_t index(int row, int col) const { return std::size_t(row) * nx + col; }
};

// The measurement: defined in ex2d::traceshift, which a caller of the functions below links.
// Everything above is defined in ex2d::core, so that the files (ex2d::io) need no backend.

/// The large-shift scan alone (options.large_shift_scan, not none), on `image` against
/// `psf`'s traces; measure_trace_shifts makes it first.
///
/// continuum: in 7 bands of 100 rows centred on the middle row, the mean of each column
/// (ivar-weighted, masked pixels left out) cross-correlated with a model profile (a Gaussian
/// of sigma 1.5 px at each fibre's trace) over -50..+50 px in 0.25 px steps; dx is the
/// median of the bands' best offsets. A band whose peak has S/N < 10 over the profile's
/// median is left out (logged).
///
/// arc_lamps: the spots of the 50 strongest `lines` inside the traces' wavelength range,
/// predicted for every fibre, matched to the spots detected in the image (local maxima of
/// the image smoothed by a Gaussian of 1 px with S/N >= 75): the prediction moved in x over
/// +-25 fibre separations (7 px) in half-separation steps, three passes with a maximum match
/// distance of 4, 2 and 1 separations, each scanning around the offset of the one before
/// and keeping the offset with the most matches (every detected spot matched to one
/// prediction at most; among offsets with as many, the closest pairs), then setting dx and
/// dy to the medians of the matched differences.
///
/// Both see the traces through their pattern of fibres and bundles: a shift beyond the range
/// can match the pattern a fibre or a bundle over instead.
///
/// Errors (Status::invalid, naming `frame_name`): continuum: fewer than 4 bands with light,
/// a peak on the edge of the range; arc lamps: no reference line on the CCD, no spot
/// detected or more than 100000, no match.
Result<LargeShiftScanResult> scan_large_shift(const ImageView& image, const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name);
Result<LargeShiftScanResult> scan_large_shift(const Float32ImageView& image,
                                              const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name);

/// Measures the trace shifts of `image` (weights: ivar with masked pixels at 0) against
/// `psf`, after the large-shift scan where options ask for one (its offset is then part of
/// the result's traces and summary). Errors (Status::invalid) name `frame_name` and the
/// reason: no usable pixels, a failed scan, too few measurements for the fit, a fit that
/// fails at degree 0, a bad option.
Result<TraceShiftResult> measure_trace_shifts(const ImageView& image, const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name);
/// The same on float32 pixels.
Result<TraceShiftResult> measure_trace_shifts(const Float32ImageView& image,
                                              const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name);

}  // namespace ex2d
