// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file patch_solver.hpp
/// Spectro-perfectionism solve of one patch on the CPU, exploiting the band structure of iCov
/// (algorithm.md section 4). Unknowns are ordered wavelength-major, u = w * nfiber + f, so that
/// iCov is a band matrix whose half-width is set by how many neighbouring wavelengths and
/// fibres a spot overlaps (about 7 x nfiber).

#include <vector>

#include "band_solve.hpp"
#include "ex2d/extraction_backend.hpp"
#include "symmetric_eigen.hpp"

namespace ex2d::cpu {

/// Where a spot lands: its stamp corner and the part of the stamp inside the pixel window.
struct SpotRect {
    int row0, row1, col0, col1;  ///< clipped to the window; empty when row0 >= row1
    int yc, xc;                  ///< CCD pixel of stamp [0, 0]
};

/// Scratch buffers reused across the patches one thread solves, so the hot loop allocates
/// nothing once warm.
struct PatchWorkspace {
    std::vector<double> weighted_stamps;  // [nunknown][stamp]
    std::vector<SpotRect> rects;          // [nunknown]
    std::vector<double> fluxweight, rhs, xflux, pixmask_fraction;
    std::vector<double> band;       // iCov, then its factor; LAPACK lower band, (kd+1) x nunknown
    std::vector<double> couplings;  // (u, v, value) triplets before kd is known
    std::vector<int> coupling_pairs;
    std::vector<double> z, cov_blocks, row_sums;  // cov_blocks: [core fibre][nwave^2]
    std::vector<double> q_factor;                 // U with Q = U U^T, row-major
    std::vector<double> q_scratch, ones, q_times_flux;
    BandRows factor_rows;        // rows of iCov's Cholesky factor, for the solves of Z
    SymmetricEigenSolver eigen;  // decomposes cov_blocks
    std::vector<double> model, chi2, chi2_weight;
    std::vector<int> wave_row_min, wave_row_suffix_min;
};

/// The spots of a bundle on the padded grid: stamp (f, w) of fibre spots.fiber_begin + f at
/// padded wavelength index w.
struct BundleSpots {
    const SpotGrid* spots = nullptr;
    int wave_offset = 0;  ///< padded index of spots' wavelength 0
};

/// Extracts one patch; never throws on numerical trouble (status in the result).
void solve_patch(const PatchGeometry& patch, const BundleSpots& spots, const ImageView& image,
                 double regularize, double psferr, PatchWorkspace& ws, PatchResult& result,
                 StageTimes& times);

}  // namespace ex2d::cpu
