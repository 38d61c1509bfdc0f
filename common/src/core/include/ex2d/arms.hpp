// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file arms.hpp
/// DESI's spectrograph arms and what desi_proc extracts of each: the wavelength grid, the CCD
/// size and --psferr. The fleet plans and checks its jobs with these; the simulator builds
/// its PSFs and frames on them.

#include <string>

#include "ex2d/status.hpp"

namespace ex2d {

enum class Arm { b, r, z };

/// desi_proc's extraction grid and the CCD of an arm.
struct ArmDefaults {
    double wmin, wmax, dw;            ///< -w used by desi_proc
    int npix_x, npix_y;               ///< preproc size NAXIS1 x NAXIS2
    double psf_wavemin, psf_wavemax;  ///< Legendre domain of the synthetic PSF (wider than the CCD)
    double psferr;                    ///< desi_proc's --psferr: 0.04 for b, 0.01 for r and z
};
ArmDefaults arm_defaults(Arm arm);
/// "b", "r", "z" or a camera name such as "r0"; anything else is invalid_argument.
Result<Arm> parse_arm(const std::string& text);
char arm_letter(Arm arm);

}  // namespace ex2d
