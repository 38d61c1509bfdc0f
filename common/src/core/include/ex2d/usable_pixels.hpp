// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file usable_pixels.hpp
/// The one rule for which pixels an extraction may use, applied by the frame driver before
/// any backend sees the image, so that the CPU and the CUDA backends see the same pixels.

#include "ex2d/extraction_backend.hpp"
#include "ex2d/scratch_allocator.hpp"

namespace ex2d {

/// A pixel is used only where its weight is positive and finite and its value is finite.
/// Every other pixel is masked: weight 0 and, where the value is not finite, value 0. The
/// preproc readers already mask non-finite pixels, so this matters for callers that hand
/// arrays in memory (the Python module, tests): a NaN that arrives with a positive weight
/// then costs that one pixel, as a masked pixel does, instead of failing every patch whose
/// window holds it.
class UsableImage {
public:
    /// Scans `image`; copies it only where some pixel must be masked.
    explicit UsableImage(const ImageView& image);
    UsableImage(const UsableImage&) = delete;
    UsableImage& operator=(const UsableImage&) = delete;

    /// The image with the rule applied: the input itself when nothing was masked.
    const ImageView& view() const { return view_; }
    /// Pixels with a positive weight that the rule masked.
    long masked() const { return masked_; }

private:
    ImageView view_;
    long masked_ = 0;
    LargeArray<double> pixels_, weights_;
};

}  // namespace ex2d
