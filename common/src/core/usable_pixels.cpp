// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/usable_pixels.hpp"

#include <cmath>

namespace ex2d {

namespace {

bool used(double value, double weight)
{
    return weight > 0 && std::isfinite(weight) && std::isfinite(value);
}

// Pixels that are not used but whose weight or value would still reach a backend's sums: a
// positive or non-finite weight, or a non-finite value (0 * NaN is NaN on every backend).
bool needs_masking(double value, double weight)
{
    return !used(value, weight) && (weight != 0 || !std::isfinite(value));
}

}  // namespace

UsableImage::UsableImage(const ImageView& image) : view_(image)
{
    const std::size_t n = std::size_t(image.ny) * std::size_t(image.stride());
    std::size_t first = n;
    for (std::size_t i = 0; i < n; ++i) {
        if (needs_masking(image.pixels[i], image.weights[i])) {
            first = i;
            break;
        }
    }
    if (first == n) return;
    pixels_.assign(image.pixels, image.pixels + n);
    weights_.assign(image.weights, image.weights + n);
    for (std::size_t i = first; i < n; ++i) {
        if (!needs_masking(pixels_[i], weights_[i])) continue;
        if (weights_[i] > 0) ++masked_;
        weights_[i] = 0.0;
        if (!std::isfinite(pixels_[i])) pixels_[i] = 0.0;
    }
    view_.pixels = pixels_.data();
    view_.weights = weights_.data();
}

}  // namespace ex2d
