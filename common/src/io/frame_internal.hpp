// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_internal.hpp
/// Pieces of the frame writer shared by frame_write.cpp and frame_scores.cpp.

#include <string>
#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/frame_io.hpp"

namespace ex2d::frame_detail {

/// numpy.gradient of a 1-D array with unit spacing (one-sided at the ends). Arrays shorter
/// than 2 have no gradient in numpy; they get `fallback`.
std::vector<double> numpy_gradient(const std::vector<double>& x, double fallback);

/// numpy.median: the middle value, or the mean of the two middle values for even sizes.
double numpy_median(std::vector<double> values);

FrameScores compute_scores(const ExtractedFrame& frame, double dw);

}  // namespace ex2d::frame_detail
