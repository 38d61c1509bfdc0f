// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// A preproc with one amplifier's quadrant entirely masked, as desispec's preproc leaves a
/// CCD whose amplifier is dead (desispec #2210, #1471, #957): every pixel of the quadrant
/// carries a mask bit, and the values under it are garbage (NaN and huge numbers).

#include <cmath>
#include <cstdint>
#include <limits>

#include "ex2d/psf.hpp"
#include "ex2d/simulate.hpp"

namespace ex2d::test {

/// The quadrant's corner: columns [0, column_end) and rows [row_begin, ny) are masked.
struct AmplifierQuadrant {
    int column_end = 0;
    int row_begin = 0;
};

/// The boundary between the petal's two halves of fibres (`last_left_fiber` and the next)
/// and the CCD's middle row, as DESI's four amplifiers split a CCD.
inline AmplifierQuadrant upper_left_quadrant(const GaussHermitePsf& psf, int last_left_fiber,
                                             double wave_mid, int ny)
{
    double x_left = 0, x_right = 0;
    psf.xtrace.eval_many(last_left_fiber, &wave_mid, 1, &x_left);
    psf.xtrace.eval_many(last_left_fiber + 1, &wave_mid, 1, &x_right);
    return {int(std::lround(0.5 * (x_left + x_right))), ny / 2};
}

/// Masks the quadrant (ccdmask BAD, bit 0) and fills it with NaN and 1e6 alternately, then
/// masks non-finite pixels as every preproc reader does.
inline void mask_quadrant(PreprocImage& preproc, const AmplifierQuadrant& q)
{
    for (int row = q.row_begin; row < preproc.ny; ++row) {
        for (int col = 0; col < q.column_end; ++col) {
            const std::size_t pix = std::size_t(row) * preproc.nx + col;
            preproc.mask[pix] |= 1u;
            preproc.image[pix] = (row + col) % 2 ? std::numeric_limits<double>::quiet_NaN() : 1e6;
        }
    }
    preproc.mask_nonfinite();
}

}  // namespace ex2d::test
