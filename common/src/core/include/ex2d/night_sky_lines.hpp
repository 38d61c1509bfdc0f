// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file night_sky_lines.hpp
/// Reference emission lines for the wavelength (y) part of trace shifts: our own list of
/// strong night-sky lines, or the lines found in a reference spectrum such as desispec's
/// spec-sky.dat. All wavelengths are in vacuum.

#include <string>
#include <vector>

#include "ex2d/status.hpp"

namespace ex2d {

/// One emission line: vacuum wavelength (A) and a relative strength (arbitrary units; only
/// the ratios between lines closer than a spot matter, where they blend).
struct ReferenceLine {
    double wave = 0;
    double strength = 0;
};

/// Strong, isolated night-sky lines from 4350 to 9000 A (Hg I street lamps, [O I], Na I D and
/// the brightest OH Meinel lines), in vacuum. The source and the conversion are in night_sky_lines.cpp.
const std::vector<ReferenceLine>& night_sky_lines();

/// The emission lines of a reference spectrum sampled on `wave` (A, vacuum, increasing, as in
/// desispec's two-column spec-sky.dat): local maxima standing out of a running minimum
/// (the continuum) by at least `min_fraction` of the strongest one, each at the centroid of
/// its peak. Errors name `source`: too few points, wavelengths not increasing, no line.
Result<std::vector<ReferenceLine>> lines_from_spectrum(const std::vector<double>& wave,
                                                       const std::vector<double>& flux,
                                                       const std::string& source,
                                                       double min_fraction = 0.02);

}  // namespace ex2d
