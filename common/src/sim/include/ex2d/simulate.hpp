// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file simulate.hpp
/// Forward model of a preproc frame from a PSF and synthetic spectra, with known truth
/// (algorithm.md section 5): image = A . photons + Poisson and read noise.

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/badcolumns.hpp"
#include "ex2d/night_sky_lines.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

struct SimulationOptions {
    std::uint64_t seed = 1;
    int specmin = 0;  ///< first lit fibre
    int nspec = 500;  ///< lit fibres; the others are dark (sky-free)
    double wmin = 0, wmax = 0,
           dw = 0.8;          ///< extraction grid the truth is written on (0: PSF domain)
    double read_noise = 3.0;  ///< electrons per pixel
    double sky_level = 1.0;   ///< scale of sky continuum and lines
    /// Night-sky lines from a tabulated spectrum (vacuum A; any flux unit, e.g. desispec's
    /// spec-sky.dat) in place of ex2d's own list, so that a frame holds the very lines another
    /// tool's reference has. Each sample is laid as a line of the list's width; the whole is
    /// scaled to carry the electrons of ex2d's list over the grid. Empty: ex2d's list.
    std::vector<double> sky_spectrum_wave, sky_spectrum_flux;
    int n_bright_stars = 3;
    int n_bad_columns = 2;
    int n_cosmics = 40;
    std::string camera = "r0";
    int expid = 1;
    int night = 20261121;
    bool noise = true;  ///< false: noiseless image (ivar from read noise and signal)
    /// A continuum-lamp flat (FLAVOR flat): every lit fibre the same smooth, bright lamp
    /// spectrum of `flat_level` electrons per bin, no sky, no targets.
    bool flat = false;
    double flat_level = 3000.0;
    /// An arc-lamp frame (FLAVOR arc): every lit fibre the same lamp lines,
    /// simulated_arc_lines() times `arc_level`, no continuum, no sky, no targets.
    bool arc = false;
    double arc_level = 1.0;
};

/// The arc lamps' lines the simulator draws (strong lines of Hg, Cd, Ne, Ar, Kr and Xe from
/// 3610 to 9800 A): vacuum wavelength (A) and electrons per fibre at arc_level 1. For
/// reference spectra of simulated arcs; ex2d trace-shifts ships no arc-lamp line list.
const std::vector<ReferenceLine>& simulated_arc_lines();

/// Photons per wavelength bin of every fibre on the extraction grid.
struct SimulationTruth {
    std::vector<double> wave;  ///< extraction grid (A)
    int specmin = 0;
    int nspec = 0;
    std::vector<double> photons;  ///< [nspec][nwave], electrons per bin
};

struct SimulatedFrame {
    PreprocImage preproc;
    SimulationTruth truth;
};

/// Simulates a frame. The photons are laid on a grid with the extraction grid's step and
/// phase that covers the whole CCD, so the image also holds light from outside the grid.
Result<SimulatedFrame> simulate_frame(const GaussHermitePsf& psf, const SimulationOptions& opt);

/// A few bad columns for desi_proc's bad-column step (datamodel 4.7), placed from the lit
/// fibres' traces at the middle of the grid: a strong one (1 e/s) on the trace of the fibre a
/// tenth into the lit range, one (0.3 e/s) halfway between the middle fibre and the next, and
/// one (0.002 e/s) on the fibre eight tenths in, too weak to mask anything. Deterministic.
BadColumns simulated_badcolumns(const GaussHermitePsf& psf, const SimulationOptions& opt);

/// Truth file: primary HDU empty, WAVELENGTH (float64 [nwave]), PHOTONS (float64
/// [nspec][nwave]) with SPECMIN in its header. Written atomically.
Status write_truth(const std::string& path, const SimulationTruth& truth);
Result<SimulationTruth> read_truth(const std::string& path);

}  // namespace ex2d
