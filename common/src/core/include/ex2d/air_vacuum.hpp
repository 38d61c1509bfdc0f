// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file air_vacuum.hpp
/// Air and vacuum wavelengths. DESI's wavelength solutions, frames and sky references are in
/// vacuum, while line atlases usually publish air wavelengths; every line list we use is
/// converted once with these functions.

namespace ex2d {

/// Refractive index of standard air at vacuum wavelength `vacuum_angstrom` (A), from the
/// formula of Morton (2000, ApJS 130, 403, eq. 8) based on Ciddor (1996), the IAU standard.
double air_refractive_index(double vacuum_angstrom);

/// Air wavelength (A) of vacuum wavelength `vacuum_angstrom` (A): vacuum / n(vacuum).
double vacuum_to_air(double vacuum_angstrom);

/// Vacuum wavelength (A) of air wavelength `air_angstrom` (A): the exact inverse of
/// vacuum_to_air (solved by fixed-point iteration to 1e-9 A), e.g. [O I] 5577.339 -> 5578.887.
double air_to_vacuum(double air_angstrom);

}  // namespace ex2d
