// SPDX-License-Identifier: BSD-3-Clause
#include <algorithm>

#include "measure.hpp"

namespace ex2d::traceshift {

namespace {
// Y(w) of a DESI trace curves by < 1e-4 px/A^2: at 4.5 A spacing, linear interpolation is
// within 3e-4 px.
constexpr int kTraceSamples = 512;
}  // namespace

TraceSamples::TraceSamples(const GaussHermitePsf& psf, int fiber)
    : y_(kTraceSamples), x_(kTraceSamples), w_(kTraceSamples)
{
    const double w0 = psf.ytrace.wavemin, w1 = psf.ytrace.wavemax;
    for (int s = 0; s < kTraceSamples; ++s) w_[s] = w0 + (w1 - w0) * s / (kTraceSamples - 1);
    psf.ytrace.eval_many(fiber, w_.data(), kTraceSamples, y_.data());
    psf.xtrace.eval_many(fiber, w_.data(), kTraceSamples, x_.data());
    // A trace that turns back in y at its ends is cut where it stops growing.
    size_t end = 1;
    while (end < y_.size() && y_[end] > y_[end - 1]) ++end;
    end = std::max<size_t>(end, 2);
    y_.resize(end);
    x_.resize(end);
    w_.resize(end);
}

void TraceSamples::at_row(double row, double& x, double& wave) const
{
    size_t k = size_t(std::upper_bound(y_.begin(), y_.end(), row) - y_.begin());
    k = std::clamp<size_t>(k, 1, y_.size() - 1);
    const double t = (row - y_[k - 1]) / (y_[k] - y_[k - 1]);
    x = x_[k - 1] + t * (x_[k] - x_[k - 1]);
    wave = w_[k - 1] + t * (w_[k] - w_[k - 1]);
}

}  // namespace ex2d::traceshift
