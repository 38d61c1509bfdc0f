// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file synthetic_psf.hpp
/// Synthetic Gauss-Hermite PSFs for DESI's b, r and z cameras (DESI's grids and CCD
/// sizes), resembling the real r0 PSF, so that every tool and test runs
/// on a machine without DESI files.

#include <string>

#include "ex2d/arms.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// A 500-fibre PSF (PSFVER 3, LEGDEG 3, GHDEG 6x6, HSIZEX 8, HSIZEY 5) for `arm`; camera
/// digit `petal` goes into the header. Deterministic.
GaussHermitePsf make_synthetic_psf(Arm arm, int petal = 0);

/// The first `nfiber` fibres of `psf` on a CCD cut down to what their traces cover over
/// [wmin, wmax] plus `margin` pixels (traces shifted to the new origin), for small frames
/// that keep a real PSF's shapes: fleet tests, soaks and load tests.
GaussHermitePsf crop_psf(const GaussHermitePsf& psf, int nfiber, double wmin, double wmax,
                         int margin = 20);

}  // namespace ex2d
