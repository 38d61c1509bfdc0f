// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file spectra.hpp
/// Synthetic spectra for the frame simulator (internal to ex2d::sim): night sky, galaxies,
/// stars and bright stars, in electrons per wavelength bin.

#include <random>
#include <vector>

#include "ex2d/simulate.hpp"

namespace ex2d::sim {

enum class TargetKind { dark, sky, galaxy, star, bright_star, lamp };

/// Spectra of the lit fibres on a uniform grid of bin centres.
struct FrameSpectra {
    std::vector<TargetKind> kinds;  ///< [nspec] kind of each lit fibre
    std::vector<double> photons;    ///< [nspec][ngrid] electrons per bin
};

/// Draws the targets of fibres [opt.specmin, opt.specmin + opt.nspec) and their spectra on
/// bins centred at `grid` of width `dw` (electrons per bin). All randomness comes from `rng`,
/// in a fixed order, so a seed reproduces the spectra.
FrameSpectra make_spectra(const std::vector<double>& grid, double dw, const SimulationOptions& opt,
                          std::mt19937_64& rng);

}  // namespace ex2d::sim
