// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file accuracy.hpp
/// Accuracy of an extracted frame against simulated truth (algorithm.md section 5):
/// pulls (flux - R . truth) * sqrt(ivar) over unmasked bins.

#include "ex2d/frame_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

struct PullStatistics {
    long n = 0;  ///< bins used: ivar > 0, mask == 0, not within ndiag/2 of the ends
    double mean = 0;
    double stddev = 0;
    double frac_beyond_5 = 0;  ///< fraction with |pull| > 5
    double max_abs = 0;
    double median_chi2pix = 0;  ///< over the same bins
    long n_masked = 0;          ///< bins of truth fibres left out for mask or ivar == 0
};

/// Compares a frame (per Angstrom, as written) with the truth photons per bin. Frame
/// spectrum s is fibre FIBER[s] % 500; fibres outside the truth are skipped.
Result<PullStatistics> pull_statistics(const FrameFile& frame, const SimulationTruth& truth);

}  // namespace ex2d
