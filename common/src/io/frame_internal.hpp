// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_internal.hpp
/// Pieces of the frame writer shared by frame_write.cpp and frame_scores.cpp.

#include <string>
#include <vector>

#include "ex2d/extraction_types.hpp"

namespace ex2d::frame_detail {

/// numpy.gradient of a 1-D array with unit spacing (one-sided at the ends). Arrays shorter
/// than 2 have no gradient in numpy; they get `fallback`.
std::vector<double> numpy_gradient(const std::vector<double>& x, double fallback);

/// numpy.median: the middle value, or the mean of the two middle values for even sizes.
double numpy_median(std::vector<double> values);

/// desispec's RAW scores of a frame (datamodel 3.7): columns of nspec values each.
struct FrameScores {
    char band = 'r';     ///< 'b', 'r' or 'z', from mean(wave)
    double lo = 0;       ///< top-hat [lo, hi) in Angstrom
    double hi = 0;
    int nbins = 0;       ///< wavelengths inside [lo, hi); 0 means no scores can be computed
    std::vector<std::string> names;     ///< SUM_RAW_COUNT_X, MEDIAN_RAW_COUNT_X, MEDIAN_RAW_SNR_X
    std::vector<std::string> comments;  ///< TTYPE comments, as desispec writes them
    std::vector<std::vector<double>> columns;
};

FrameScores compute_scores(const ExtractedFrame& frame, double dw);

}  // namespace ex2d::frame_detail
