// SPDX-License-Identifier: BSD-3-Clause
// CCD edges (issue 2, item 8): the first and last bundles, and a grid that runs off the
// bottom and top of the CCD. Patches partly off the CCD are extracted from the pixels that
// exist; only bins with no usable pixel get ivar = 0, and those are flagged ALLBADPIX.
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/synthetic_psf.hpp"
#include "sim_extract.hpp"

namespace ex2d {
namespace {

// The PSF's whole wavelength domain: Y runs from below row 0 to above the last row.
ExtractionOptions whole_domain(const GaussHermitePsf& psf, int specmin)
{
    ExtractionOptions opt;
    opt.wmin = std::ceil(psf.ytrace.wavemin) + 1;
    opt.wmax = std::floor(psf.ytrace.wavemax) - 1;
    opt.specmin = specmin;
    opt.nspec = 25;
    return opt;
}

void check_edge_bundle(const GaussHermitePsf& psf, int specmin)
{
    const ExtractionOptions opt = whole_domain(psf, specmin);
    const test::SimExtract r = test::simulate_and_extract(psf, opt, 99 + specmin);
    const ExtractedFrame& f = r.frame;
    EXPECT_EQ(f.npatch_failed, 0);
    long off_ccd = 0, partly_off = 0, usable = 0;
    for (int s = 0; s < f.nspec; ++s) {
        std::vector<double> yspot(f.nwave);
        psf.ytrace.eval_many(specmin + s, f.wave.data(), f.nwave, yspot.data());
        for (int j = 0; j < f.nwave; ++j) {
            const size_t k = size_t(s) * f.nwave + j;
            ASSERT_TRUE(std::isfinite(f.flux[k]) && std::isfinite(f.ivar[k]));
            const double pmf = f.pixmask_fraction[k];
            if (pmf == 1.0) {
                EXPECT_EQ(f.ivar[k], 0.0) << "spec " << s << " bin " << j;
                EXPECT_TRUE(f.mask[k] & specmask::allbadpix);
                ++off_ccd;
            } else {
                EXPECT_GT(f.ivar[k], 0.0) << "spec " << s << " bin " << j << " pmf " << pmf;
                ++usable;
            }
            const bool crosses_edge =
                yspot[j] < psf.hsizey || yspot[j] > psf.npix_y - 1 - psf.hsizey;
            if (crosses_edge && pmf > 0 && pmf < 1) ++partly_off;
        }
        // the first and last bins whose spots lie on the CCD are science, not loss
        int first_on = 0;
        while (first_on < f.nwave && yspot[first_on] < psf.hsizey) ++first_on;
        ASSERT_LT(first_on, f.nwave);
        EXPECT_GT(f.ivar[size_t(s) * f.nwave + first_on], 0.0);
        int last_on = f.nwave - 1;
        while (last_on > 0 && yspot[last_on] > psf.npix_y - 1 - psf.hsizey) --last_on;
        EXPECT_GT(f.ivar[size_t(s) * f.nwave + last_on], 0.0);
    }
    EXPECT_GT(off_ccd, 0) << "the grid should run off the CCD";
    EXPECT_GT(partly_off, 0) << "some spots should be cut by a CCD edge";
    EXPECT_GT(usable, 20 * f.nwave);
    const PullStatistics& p = r.pulls;
    std::printf(
        "edge bundle %d: off-CCD bins %ld, cut spots %ld, pulls mean %+.4f std %.4f "
        "beyond5 %.1e over %ld bins\n",
        specmin, off_ccd, partly_off, p.mean, p.stddev, p.frac_beyond_5, p.n);
    EXPECT_LT(std::abs(p.mean), 0.04);
    EXPECT_GT(p.stddev, 0.95);
    EXPECT_LT(p.stddev, 1.05);
    EXPECT_LT(p.frac_beyond_5, 5e-4);
}

TEST(Edges, FirstBundleOverTheWholeCcd)
{
    check_edge_bundle(make_synthetic_psf(Arm::r, 0), 0);
}

TEST(Edges, LastBundleOverTheWholeCcd)
{
    check_edge_bundle(make_synthetic_psf(Arm::r, 0), 475);
}

}  // namespace
}  // namespace ex2d
