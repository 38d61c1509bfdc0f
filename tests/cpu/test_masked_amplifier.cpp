// SPDX-License-Identifier: BSD-3-Clause
// Masked amplifiers (issue 17, item 6; desispec #2210, #1471, #957): a preproc whose upper-left
// amplifier is dead (every pixel masked, NaN and huge values under the mask) extracts without
// error. Bins with no usable pixel get ivar 0 and ALLBADPIX; no bin gets a tiny ivar with a
// huge flux; and bins whose patches never reach the quadrant equal an extraction of the same
// pixels unmasked, within the CPU/GPU parity rule (|dflux| < 0.01 sigma for 99 %, < 0.05
// sigma for all) with identical masks.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "masked_amplifier.hpp"
#include "sim_extract.hpp"

namespace ex2d {
namespace {

ExtractedFrame extract_cpu(const PreprocImage& preproc, const GaussHermitePsf& psf,
                           const ExtractionOptions& opt)
{
    const LargeArray<double> weights = preproc.weights();
    const ImageView view{preproc.ny, preproc.nx, preproc.image.data(), weights.data()};
    auto backend = make_cpu_backend(2);
    auto frame = extract_frame(view, psf, opt, *backend);
    EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
    return frame.is_ok() ? std::move(frame).value() : ExtractedFrame{};
}

TEST(MaskedAmplifier, ADeadQuadrantExtractsAndTheOtherAmplifiersAreUnchanged)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const ExtractionOptions opt = test::r_grid_options(225, 50);  // bundles 225-249 | 250-274
    auto simulated = simulate_frame(psf, test::simulation_for(opt, 31));
    ASSERT_TRUE(simulated.is_ok()) << simulated.status().to_string();
    PreprocImage& preproc = simulated.value().preproc;
    const ExtractedFrame clean = extract_cpu(preproc, psf, opt);
    const test::AmplifierQuadrant quadrant =
        test::upper_left_quadrant(psf, 249, 0.5 * (opt.wmin + opt.wmax), preproc.ny);
    test::mask_quadrant(preproc, quadrant);
    const ExtractedFrame masked = extract_cpu(preproc, psf, opt);
    ASSERT_EQ(masked.flux.size(), clean.flux.size());
    EXPECT_EQ(masked.npatch_failed, 0);

    // A bin's patch reaches nwavestep + wavepad bins either side of it (the farthest core
    // bin plus the padding), each spot hsizey rows above and below its centre.
    const int reach = opt.nwavestep + opt.wavepad;
    const int nw = masked.nwave;
    double max_clean_flux = 0;
    for (double f : clean.flux) max_clean_flux = std::max(max_clean_flux, std::abs(f));
    long dead = 0, usable = 0, clear = 0, clear_over_001 = 0, mask_differences = 0;
    double min_ivar_ratio = 1e300, max_pull = 0, max_clear_sigma = 0;
    for (int s = 0; s < masked.nspec; ++s) {
        std::vector<double> x(nw), y(nw);
        psf.xtrace.eval_many(opt.specmin + s, masked.wave.data(), nw, x.data());
        psf.ytrace.eval_many(opt.specmin + s, masked.wave.data(), nw, y.data());
        std::vector<int> corner_x, corner_y;
        evaluate_corners(psf, opt.specmin + s, masked.wave, corner_x, corner_y);
        for (int j = 0; j < nw; ++j) {
            const size_t k = size_t(s) * nw + j;
            ASSERT_TRUE(std::isfinite(masked.flux[k]) && std::isfinite(masked.ivar[k]))
                << "spectrum " << s << " bin " << j;
            const bool spot_in_quadrant = corner_x[j] + psf.stamp_nx() <= quadrant.column_end &&
                                          corner_y[j] >= quadrant.row_begin;
            if (spot_in_quadrant) {
                ++dead;
                EXPECT_EQ(masked.ivar[k], 0.0) << "spectrum " << s << " bin " << j;
                EXPECT_TRUE(masked.mask[k] & specmask::allbadpix)
                    << "spectrum " << s << " bin " << j;
            }
            if (masked.ivar[k] > 0) {
                EXPECT_LT(masked.pixmask_fraction[k], 1.0);
                max_pull = std::max(
                    max_pull, std::abs(masked.flux[k] - clean.flux[k]) * std::sqrt(masked.ivar[k]));
            }
            if (masked.ivar[k] > 0 && masked.mask[k] == 0) {
                // What desispec's consumers use unflagged (#957: bins on a dead amplifier once
                // slipped through with a tiny ivar and a huge flux). Bins flagged SOMEBADPIX
                // may keep the small ivar their few usable pixels give, as desispec's do.
                ++usable;
                min_ivar_ratio = std::min(min_ivar_ratio, masked.ivar[k] / clean.ivar[k]);
                EXPECT_LT(std::abs(masked.flux[k]), 10 * max_clean_flux) << "bin " << k;
            } else if (masked.ivar[k] == 0) {
                EXPECT_TRUE(masked.mask[k] != 0) << "ivar 0 without a mask bit, bin " << k;
            }
            double highest_row = 0;
            for (int i = std::max(0, j - reach); i <= std::min(nw - 1, j + reach); ++i)
                highest_row = std::max(highest_row, y[i]);
            const bool patch_clear = x[j] - psf.hsizex > quadrant.column_end ||
                                     highest_row + psf.hsizey < quadrant.row_begin;
            if (patch_clear) {
                ++clear;
                const double sigma = 1.0 / std::sqrt(clean.ivar[k]);
                const double d = std::abs(masked.flux[k] - clean.flux[k]) / sigma;
                max_clear_sigma = std::max(max_clear_sigma, d);
                clear_over_001 += d >= 0.01;
                mask_differences += masked.mask[k] != clean.mask[k];
            }
        }
    }
    std::printf(
        "dead quadrant: columns < %d, rows >= %d; %ld bins dead, %ld unflagged with ivar, their "
        "min ivar "
        "ratio to the unmasked %.3g, max |dflux| sqrt(ivar) %.2f; %ld bins clear of it: %ld >= "
        "0.01 sigma, max %.2e "
        "sigma, %ld mask differences\n",
        quadrant.column_end, quadrant.row_begin, dead, usable, min_ivar_ratio, max_pull, clear,
        clear_over_001, max_clear_sigma, mask_differences);
    EXPECT_GT(dead, 20L * nw / 3) << "most of the left bundle's upper half should be dead";
    EXPECT_GT(min_ivar_ratio, 0.05) << "an unflagged bin kept a tiny ivar";
    EXPECT_LT(max_pull, 10.0) << "a usable bin's flux moved far beyond its own sigma";
    EXPECT_GT(clear, long(masked.nspec) * nw / 3);
    EXPECT_LT(double(clear_over_001), 0.01 * double(clear));
    EXPECT_LT(max_clear_sigma, 0.05);
    EXPECT_EQ(mask_differences, 0);
}

}  // namespace
}  // namespace ex2d
