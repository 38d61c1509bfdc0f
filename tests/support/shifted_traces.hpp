// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Frames simulated through shifted traces, and how far measured traces are from the truth.

#include <cmath>
#include <functional>

#include "ex2d/psf.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::test {

/// A shift as a function of u = 2 x / npix_x - 1, x the fibre's column mid-range.
using ShiftOfColumn = std::function<double(double u)>;

/// `psf` with each fibre's XTRACE and YTRACE moved by dx(u), dy(u) (a constant per fibre:
/// within a polynomial of degree 2 in x, the traces' tilt of a few px changes it < 0.002 px).
inline GaussHermitePsf shifted_psf(const GaussHermitePsf& psf, const ShiftOfColumn& dx,
                                   const ShiftOfColumn& dy)
{
    GaussHermitePsf out = psf;
    const double wmid = 0.5 * (psf.xtrace.wavemin + psf.xtrace.wavemax);
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        const double u = 2.0 * psf.xtrace.eval(fiber, wmid) / psf.npix_x - 1.0;
        out.xtrace.coef[size_t(fiber) * out.xtrace.ncoef] += dx(u);
        out.ytrace.coef[size_t(fiber) * out.ytrace.ncoef] += dy(u);
    }
    return out;
}

/// Measured minus true trace positions over every fibre at 60 wavelengths on the CCD.
struct TraceErrors {
    double mean_x = 0, rms_x = 0, mean_y = 0, rms_y = 0;
    long n = 0;
};

inline TraceErrors trace_errors(const LegendreTable& xtrace, const LegendreTable& ytrace,
                                const GaussHermitePsf& truth)
{
    TraceErrors e;
    double sx = 0, sxx = 0, sy = 0, syy = 0;
    for (int fiber = 0; fiber < truth.nspec(); ++fiber) {
        for (int k = 0; k < 60; ++k) {
            const double wave = truth.ytrace.wavemin +
                                (truth.ytrace.wavemax - truth.ytrace.wavemin) * (k + 0.5) / 60;
            const double y = truth.ytrace.eval(fiber, wave);
            if (y < 0 || y > truth.npix_y - 1) continue;
            const double dx = xtrace.eval(fiber, wave) - truth.xtrace.eval(fiber, wave);
            const double dy = ytrace.eval(fiber, wave) - y;
            sx += dx;
            sxx += dx * dx;
            sy += dy;
            syy += dy * dy;
            ++e.n;
        }
    }
    e.mean_x = sx / e.n;
    e.rms_x = std::sqrt(sxx / e.n);
    e.mean_y = sy / e.n;
    e.rms_y = std::sqrt(syy / e.n);
    return e;
}

}  // namespace ex2d::test
