// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/accuracy.hpp"

#include <algorithm>
#include <cmath>

#include "ex2d/extraction.hpp"

namespace ex2d {

Result<PullStatistics> pull_statistics(const FrameFile& frame, const SimulationTruth& truth)
{
    if (frame.nwave != int(truth.wave.size())) {
        return Status::invalid("frame has " + std::to_string(frame.nwave) +
                               " wavelengths but the truth has " +
                               std::to_string(truth.wave.size()));
    }
    if (int(frame.fiber.size()) != frame.nspec)
        return Status::invalid("frame FIBERMAP size differs from NSPEC");
    const int nw = frame.nwave, nd = frame.ndiag / 2;
    const std::vector<double> dwave = grid_gradient(frame.wave);
    PullStatistics st;
    double sum = 0, sum2 = 0;
    long beyond = 0;
    std::vector<double> chi2;
    for (int s = 0; s < frame.nspec; ++s) {
        const int t = int(frame.fiber[s] % 500) - truth.specmin;
        if (t < 0 || t >= truth.nspec) continue;
        const double* photons = &truth.photons[size_t(t) * nw];
        for (int i = nd; i < nw - nd; ++i) {
            const size_t k = size_t(s) * nw + i;
            if (!(frame.ivar[k] > 0) || frame.mask[k] != 0) {
                ++st.n_masked;
                continue;
            }
            // (R . truth)_i with R[i][j] stored at resolution[s][i - j + nd][j]
            double convolved = 0;
            for (int j = i - nd; j <= i + nd; ++j) {
                const int d = i - j + nd;
                convolved += frame.resolution[(size_t(s) * frame.ndiag + d) * nw + j] * photons[j];
            }
            const double pull =
                (frame.flux[k] * dwave[i] - convolved) * std::sqrt(frame.ivar[k]) / dwave[i];
            sum += pull;
            sum2 += pull * pull;
            beyond += std::abs(pull) > 5;
            st.max_abs = std::max(st.max_abs, std::abs(pull));
            chi2.push_back(frame.chi2pix[k]);
            ++st.n;
        }
    }
    if (st.n == 0) return Status::invalid("no unmasked bins of simulated fibres in the frame");
    st.mean = sum / st.n;
    st.stddev = std::sqrt(std::max(0.0, sum2 / st.n - st.mean * st.mean));
    st.frac_beyond_5 = double(beyond) / st.n;
    std::nth_element(chi2.begin(), chi2.begin() + chi2.size() / 2, chi2.end());
    st.median_chi2pix = chi2[chi2.size() / 2];
    return st;
}

}  // namespace ex2d
