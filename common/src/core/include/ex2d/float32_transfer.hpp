// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file float32_transfer.hpp
/// How pixels and weights are narrowed to float32 for the CUDA backend, so that the narrowing
/// changes neither which pixels are masked nor lets a NaN in (the CPU works in float64).

#include <cfloat>
#include <cmath>

namespace ex2d {

/// A pixel's weight as float32. The pixel is masked (0) where the rule of usable_pixels.hpp
/// masks it: a weight that is not positive and finite, or a value that is not finite. The
/// frame driver applies that rule before any backend sees the image; applying it here too
/// means that a caller of the backend alone still gets a masked pixel, as the rule says,
/// and never a NaN sent as a weighted 0. A positive weight below FLT_MIN, which in float32
/// is a denormal (zero wherever the device flushes denormals) or zero, and so would mask a
/// pixel the CPU keeps, becomes FLT_MIN; one above FLT_MAX, which would become infinite,
/// becomes FLT_MAX. Either change is far below any weight that matters in the sums.
inline float weight_as_float32(double weight, double value)
{
    if (!(weight > 0) || !std::isfinite(weight) || !std::isfinite(value)) return 0.0f;
    if (weight < double(FLT_MIN)) return FLT_MIN;
    if (weight > double(FLT_MAX)) return FLT_MAX;
    return float(weight);
}

/// A pixel value as float32. A masked pixel (zero weight) is sent as 0: its value is never
/// used, but a NaN or an infinity there would still turn 0 * value into NaN on the device.
/// Finite values beyond float's range are clamped.
inline float pixel_as_float32(double value, float weight32)
{
    if (weight32 == 0.0f || !std::isfinite(value)) return 0.0f;
    if (value > double(FLT_MAX)) return FLT_MAX;
    if (value < -double(FLT_MAX)) return -FLT_MAX;
    return float(value);
}

}  // namespace ex2d
