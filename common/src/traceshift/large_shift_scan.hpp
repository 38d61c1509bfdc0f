// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file large_shift_scan.hpp
/// desi_compute_trace_shifts' large-shift scan (scan_large_shift in ex2d/trace_shifts.hpp):
/// its two methods, and the spot detection and matching of the arc-lamp one.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ex2d/night_sky_lines.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::traceshift {

/// The continuum method (View: ImageView or Float32ImageView).
template <typename View>
Result<LargeShiftScanResult> scan_continuum(const View& image, const GaussHermitePsf& psf,
                                            const std::string& frame);

/// The arc-lamp method, predicting the spots of `lines`.
template <typename View>
Result<LargeShiftScanResult> scan_arc_lamps(const View& image, const GaussHermitePsf& psf,
                                            const std::vector<ReferenceLine>& lines,
                                            const std::string& frame);

/// numpy.median: the middle value, or the mean of the two middle ones (`values` not empty).
inline double median_of(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// A spot on the CCD: column and row (pixel centres at integers).
struct SpotPosition {
    double x = 0;
    double y = 0;
};

/// S/N a detected spot needs: desispec's cut is 6 on the smoothed image times the square
/// root of the ivar smoothed by the kernel squared, which for uniform noise is the true S/N
/// times the kernel's sum of squares (0.0797); 6 / 0.0797 = 75.
constexpr double kMinSpotSnr = 75.0;

/// The spots of an arc frame: pixels of the image smoothed by a 7x7 Gaussian of sigma 1 px
/// (masked pixels as 0) that exceed their four neighbours and have S/N >= min_snr, each at
/// the centroid of the 7x7 pixels around it. Rows from the bottom, columns from the left.
/// Stops after max_spots + 1 spots (the caller refuses more than max_spots).
template <typename View>
std::vector<SpotPosition> detect_spots(const View& image, double min_snr, long max_spots);

/// Matches predicted spots to detected ones, nearest neighbour within a distance, through a
/// grid of cells as wide as that distance (a query reads 3x3 cells).
class SpotMatcher {
public:
    SpotMatcher(const std::vector<SpotPosition>& detected, double max_distance);

    struct Matches {
        int count = 0;
        double distance = 0;  ///< px, sum over the pairs
    };

    /// Every predicted spot moved by (dx, dy) is matched to its nearest detected spot closer
    /// than max_distance; a detected spot that is the nearest of several keeps the closest
    /// (desispec's match_same_system with remove_duplicates). `pairs`, where given, gets the
    /// pairs as (predicted index, detected index), in detected order.
    Matches match(const std::vector<SpotPosition>& predicted, double dx, double dy,
                  std::vector<std::pair<int, int>>* pairs = nullptr);

private:
    double cell_ = 1, x0_ = 0, y0_ = 0;
    int ncx_ = 0, ncy_ = 0;
    std::vector<int> cell_start_;       ///< [ncx * ncy + 1] into the spots sorted by cell
    std::vector<SpotPosition> sorted_;  ///< detected spots sorted by cell
    std::vector<int> index_;            ///< their indices in the detected list
    std::vector<double> claim_d2_;      ///< per sorted spot: squared distance of its claim
    std::vector<int> claim_by_;         ///< per sorted spot: predicted index, -1 none
    std::vector<int> claimed_;          ///< sorted spots claimed in the current match
};

}  // namespace ex2d::traceshift
