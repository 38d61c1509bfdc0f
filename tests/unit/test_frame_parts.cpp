// SPDX-License-Identifier: BSD-3-Clause
// A frame extracted in parts by several processes and merged (ex2d/frame_parts.hpp): the
// bundles shared out, the parts put back in order, and parts that do not fit refused.
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "ex2d/frame_parts.hpp"

namespace {

using ex2d::BundleShare;
using ex2d::ExtractedFrame;

/// A part of `nspec` spectra from `specmin` on 3 wavelengths, 2 diagonals and a 2 x 2 model,
/// every value unique to its spectrum and place.
ExtractedFrame part(int specmin, int nspec)
{
    ExtractedFrame p;
    p.specmin = specmin;
    p.nspec = nspec;
    p.nwave = 3;
    p.ndiag = 2;
    p.wave = {5000.0, 5000.8, 5001.6};
    const std::size_t cells = std::size_t(nspec) * 3;
    for (std::size_t k = 0; k < cells; ++k) {
        const double v = 100.0 * specmin + double(k);
        p.flux.push_back(v);
        p.ivar.push_back(v + 0.25);
        p.mask.push_back(std::uint32_t(specmin + int(k)));
        p.chi2pix.push_back(v + 0.5);
        p.pixmask_fraction.push_back(v + 0.75);
        p.xflux.push_back(-v);
    }
    for (std::size_t k = 0; k < cells * 2; ++k)
        p.resolution.push_back(1000.0 * specmin + double(k));
    p.model = {1.0 * specmin, 2.0, 0.0, 0.5};
    p.model_ny = p.model_nx = 2;
    p.npatch = nspec;
    p.npatch_retried = 1;
    p.npatch_failed = specmin == 25 ? 1 : 0;
    p.stage_times.solve = 0.5;
    return p;
}

TEST(FrameParts, BundlesAreSharedInContiguousRunsDifferingByAtMostOne)
{
    const auto shares = [](int nbundle, int count) {
        std::vector<std::pair<int, int>> out;
        for (int i = 0; i < count; ++i) {
            const BundleShare s = ex2d::bundle_share(nbundle, i, count);
            out.emplace_back(s.first, s.count);
        }
        return out;
    };
    EXPECT_EQ(shares(20, 4), (std::vector<std::pair<int, int>>{{0, 5}, {5, 5}, {10, 5}, {15, 5}}));
    EXPECT_EQ(shares(20, 3), (std::vector<std::pair<int, int>>{{0, 6}, {6, 7}, {13, 7}}));
    EXPECT_EQ(shares(2, 2), (std::vector<std::pair<int, int>>{{0, 1}, {1, 1}}));
    EXPECT_EQ(shares(1, 1), (std::vector<std::pair<int, int>>{{0, 1}}));
    EXPECT_THROW(ex2d::bundle_share(20, 4, 4), std::invalid_argument);
    EXPECT_THROW(ex2d::bundle_share(20, 0, 0), std::invalid_argument);
}

TEST(FrameParts, PartsInAnyOrderMakeTheFrameInOrder)
{
    const ExtractedFrame a = part(0, 2), b = part(2, 1), c = part(3, 2);
    auto merged = ex2d::merge_frame_parts({c, a, b});
    ASSERT_TRUE(merged.is_ok()) << merged.status().to_string();
    const ExtractedFrame& m = merged.value();
    EXPECT_EQ(m.specmin, 0);
    EXPECT_EQ(m.nspec, 5);
    EXPECT_EQ(m.nwave, 3);
    EXPECT_EQ(m.wave, a.wave);
    std::vector<double> flux = a.flux;
    flux.insert(flux.end(), b.flux.begin(), b.flux.end());
    flux.insert(flux.end(), c.flux.begin(), c.flux.end());
    EXPECT_EQ(m.flux, flux);
    EXPECT_EQ(m.mask.size(), 15u);
    EXPECT_EQ(m.mask[6], b.mask[0]);
    EXPECT_EQ(m.mask[9], c.mask[0]);
    ASSERT_EQ(m.resolution.size(), 30u);
    EXPECT_EQ(m.resolution[12], b.resolution[0]);  // [spectrum 2][diagonal 0][wave 0]
    EXPECT_EQ(m.resolution[29], c.resolution[11]);
    EXPECT_EQ(m.ivar[14], c.ivar[5]);
    EXPECT_EQ(m.chi2pix[3], a.chi2pix[3]);
    EXPECT_EQ(m.pixmask_fraction[7], b.pixmask_fraction[1]);
    EXPECT_EQ(m.xflux[0], a.xflux[0]);
    EXPECT_EQ(m.model, (std::vector<double>{5.0, 6.0, 0.0, 1.5}));  // 0 + 2 + 3 in the first
    EXPECT_EQ(m.npatch, 5);
    EXPECT_EQ(m.npatch_retried, 3);
    EXPECT_EQ(m.stage_times.solve, 1.5);
}

TEST(FrameParts, PartsThatDoNotFitAreRefusedByName)
{
    const auto refused = [](std::vector<ExtractedFrame> parts) {
        auto merged = ex2d::merge_frame_parts(std::move(parts));
        EXPECT_FALSE(merged.is_ok());
        return merged.is_ok() ? std::string() : merged.status().message();
    };
    EXPECT_EQ(refused({part(0, 2), part(3, 2)}),
              "the part of spectra 3-4 does not follow spectra 0-1");
    EXPECT_EQ(refused({part(0, 2), part(1, 2)}),
              "the part of spectra 1-2 does not follow spectra 0-1");
    ExtractedFrame other_grid = part(2, 1);
    other_grid.wave[1] = 5000.7;
    EXPECT_EQ(refused({part(0, 2), other_grid}),
              "the part of spectra 2-2 has another wavelength grid or resolution width");
    ExtractedFrame other_psferr = part(2, 1);
    other_psferr.psferr = 0.02;
    EXPECT_EQ(refused({part(0, 2), other_psferr}),
              "the part of spectra 2-2 was extracted with another psferr");
    ExtractedFrame no_model = part(2, 1);
    no_model.model.clear();
    EXPECT_EQ(refused({part(0, 2), no_model}), "the part of spectra 2-2 has another model image");
    ExtractedFrame short_flux = part(2, 1);
    short_flux.flux.pop_back();
    EXPECT_EQ(refused({part(0, 2), short_flux}),
              "the part of spectra 2-2 has arrays of the wrong size");
    EXPECT_EQ(refused({}), "no part of the frame to merge");
}

}  // namespace
