// SPDX-License-Identifier: BSD-3-Clause
// Physics: two full bundles simulated over the whole r grid and extracted; the pulls
// (flux - R.truth) * sqrt(ivar) must be unit Gaussian (issue 2, item 8).
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/psf_io.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "sim_extract.hpp"

namespace ex2d {
namespace {

ExtractionOptions two_bundles_on_r_grid(int specmin)
{
    return test::r_grid_options(specmin, 50);
}

void expect_unit_pulls(const test::SimExtract& r)
{
    const PullStatistics& p = r.pulls;
    std::printf("pulls: n=%ld mean=%+.4f std=%.4f beyond5=%.2e max=%.2f median_chi2pix=%.3f\n", p.n,
                p.mean, p.stddev, p.frac_beyond_5, p.max_abs, p.median_chi2pix);
    EXPECT_EQ(r.frame.nwave, 2326);
    EXPECT_EQ(r.frame.npatch, 2 * 5 * 47);
    EXPECT_EQ(r.frame.npatch_failed, 0);
    EXPECT_GT(p.n, long(0.97 * 50 * 2316));
    EXPECT_LT(std::abs(p.mean), 0.02);
    EXPECT_GE(p.stddev, 0.97);
    EXPECT_LE(p.stddev, 1.03);
    EXPECT_LT(p.frac_beyond_5, 1e-4);
    // The simulation's ivar is the model variance, so chi2 per pixel averages ~1, a little
    // less (measured 0.75-0.80) because the fit absorbs part of the noise in the pixels that
    // weigh most in each bin's spot, and psferr adds variance on bright pixels.
    EXPECT_GT(p.median_chi2pix, 0.70);
    EXPECT_LT(p.median_chi2pix, 0.90);
}

TEST(Physics, TwoBundlesRealPsfPullsAreUnitGaussian)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto psf = read_psf(path);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    expect_unit_pulls(
        test::simulate_and_extract(psf.value(), two_bundles_on_r_grid(225), 20261121));
}

TEST(Physics, TwoBundlesSyntheticPsfPullsAreUnitGaussian)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    expect_unit_pulls(test::simulate_and_extract(psf, two_bundles_on_r_grid(100), 7));
}

}  // namespace
}  // namespace ex2d
