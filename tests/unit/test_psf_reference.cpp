// SPDX-License-Identifier: BSD-3-Clause
// read_psf on the two real DESI PSFs against reference values computed with gpu_specter and
// specter. The printed values are rounded to 1e-6.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "ex2d/psf.hpp"
#include "ex2d/psf_io.hpp"
#include "test_paths.hpp"

namespace {

// Half a unit of the 6th decimal plus a little for the binary representation.
constexpr double kPrinted = 5.1e-7;

struct TraceRef {
    int fiber;
    double wave;
    double x, y, ghsigx, ghsigy, gh00;
};

void expect_trace_values(const ex2d::GaussHermitePsf& psf, const TraceRef& r)
{
    SCOPED_TRACE("fiber " + std::to_string(r.fiber) + " at " + std::to_string(r.wave));
    EXPECT_NEAR(psf.xtrace.eval(r.fiber, r.wave), r.x, kPrinted);
    EXPECT_NEAR(psf.ytrace.eval(r.fiber, r.wave), r.y, kPrinted);
    EXPECT_NEAR(psf.param("GHSIGX").eval(r.fiber, r.wave), r.ghsigx, kPrinted);
    EXPECT_NEAR(psf.param("GHSIGY").eval(r.fiber, r.wave), r.ghsigy, kPrinted);
    EXPECT_NEAR(psf.param("GH-0-0").eval(r.fiber, r.wave), r.gh00, kPrinted);
}

void expect_spot(const ex2d::GaussHermitePsf& psf, int fiber, double wave, int xc, int yc,
                 double peak)
{
    SCOPED_TRACE("spot of fiber " + std::to_string(fiber) + " at " + std::to_string(wave));
    ex2d::Spot spot = ex2d::evaluate_spot(psf, fiber, wave);
    ASSERT_EQ(spot.values.size(), 11u * 17u);
    EXPECT_EQ(spot.xc, xc);
    EXPECT_EQ(spot.yc, yc);
    double sum = std::accumulate(spot.values.begin(), spot.values.end(), 0.0);
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_GE(*std::min_element(spot.values.begin(), spot.values.end()), 0.0);
    if (peak > 0) {
        const double centre = spot.values[5 * 17 + 8];
        EXPECT_NEAR(centre, peak, kPrinted);
        EXPECT_EQ(centre, *std::max_element(spot.values.begin(), spot.values.end()));
    }
}

TEST(PsfReference, Psf51060HeaderFacts)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto result = ex2d::read_psf(path);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    const ex2d::GaussHermitePsf& psf = result.value();
    EXPECT_EQ(psf.source, path);
    EXPECT_EQ(psf.hsizex, 8);
    EXPECT_EQ(psf.hsizey, 5);
    EXPECT_EQ(psf.stamp_nx(), 17);
    EXPECT_EQ(psf.stamp_ny(), 11);
    EXPECT_EQ(psf.npix_x, 4114);
    EXPECT_EQ(psf.npix_y, 4128);
    EXPECT_EQ(psf.ghdegx, 6);
    EXPECT_EQ(psf.ghdegy, 6);
    EXPECT_EQ(psf.fibermin, 0);
    EXPECT_EQ(psf.nspec(), 500);
    EXPECT_DOUBLE_EQ(psf.psferr, 0.01);  // the file has no PSFERR
    EXPECT_EQ(psf.xtrace.ncoef, 7);
    EXPECT_EQ(psf.ytrace.ncoef, 7);
    EXPECT_EQ(psf.ytrace.nfiber, 500);
    // Each HDU carries its own Legendre domain: the traces end at 7826, the PSF table at 7827.
    EXPECT_EQ(psf.xtrace.wavemin, 5543.0);
    EXPECT_EQ(psf.xtrace.wavemax, 7826.0);
    EXPECT_EQ(psf.ytrace.wavemin, 5543.0);
    EXPECT_EQ(psf.ytrace.wavemax, 7826.0);
    EXPECT_EQ(psf.params.size(), 59u);  // 57 parameters + BUNDLE + STATUS
    for (const auto& [name, table] : psf.params) {
        SCOPED_TRACE(name);
        EXPECT_EQ(table.wavemin, 5543.0);
        EXPECT_EQ(table.wavemax, 7827.0);
        EXPECT_EQ(table.ncoef, 4);  // LEGDEG 3
        EXPECT_EQ(table.nfiber, 500);
    }
    for (const char* name : {"GHSIGX", "GHSIGY", "GH-6-6", "TAILAMP", "BUNDLE", "STATUS", "CONT"}) {
        EXPECT_EQ(psf.params.count(name), 1u) << name;
    }
    EXPECT_EQ(psf.psf_header.get_string("PSFVER").value(), "3");
    EXPECT_EQ(psf.xtrace_header.get_int("PSFVER").value(), 3);
    EXPECT_EQ(psf.psf_header.get_string("CAMERA").value(), "'r0      '");
    EXPECT_EQ(psf.psf_header.get_int("NPARAMS").value(), 57);
}

TEST(PsfReference, Psf51060TraceAndParameterValues)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto result = ex2d::read_psf(path);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    const TraceRef refs[] = {
        {0, 5800, 121.446825, 444.812768, 1.015773, 1.085901, 0.974167},
        {0, 6500, 120.668834, 1716.165307, 1.019925, 1.071328, 0.959593},
        {0, 7600, 111.378323, 3851.028960, 1.102536, 1.187943, 1.076209},
        {250, 6500, 2040.795722, 1603.562374, 1.113196, 1.114326, 0.980717},
        {499, 5800, 3943.622086, 443.504807, 0.999342, 1.040791, 0.927014},
        {499, 7600, 3952.281243, 3849.638081, 1.092406, 1.219093, 1.105317},
    };
    for (const TraceRef& r : refs) expect_trace_values(result.value(), r);
}

TEST(PsfReference, Psf51060Spots)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto result = ex2d::read_psf(path);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    expect_spot(result.value(), 0, 5800, 113, 440, 0.102506);
    expect_spot(result.value(), 0, 6500, 113, 1711, 0.098382);
    expect_spot(result.value(), 0, 7600, 103, 3846, 0.089896);
}

TEST(PsfReference, Psf67784ValuesAndSpots)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00067784.fits");
    auto result = ex2d::read_psf(path);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    const ex2d::GaussHermitePsf& psf = result.value();
    EXPECT_EQ(psf.nspec(), 500);
    EXPECT_EQ(psf.hsizex, 8);
    EXPECT_EQ(psf.hsizey, 5);
    EXPECT_EQ(psf.npix_x, 4114);
    EXPECT_EQ(psf.npix_y, 4128);
    EXPECT_DOUBLE_EQ(psf.psferr, 0.01);
    EXPECT_EQ(psf.param("GHSIGX").ncoef, 2);  // LEGDEG 1
    EXPECT_EQ(psf.param("GH-0-0").ncoef, 2);
    EXPECT_EQ(psf.param("GHSIGX").wavemin, 5543.0);
    EXPECT_EQ(psf.param("GHSIGX").wavemax, 7827.0);
    EXPECT_EQ(psf.xtrace.wavemin, 5543.0);
    EXPECT_EQ(psf.xtrace.wavemax, 7826.0);
    expect_trace_values(psf, {0, 6500, 120.730334, 1716.298005, 1.033261, 1.102182, 0.988663});
    expect_spot(psf, 0, 6500, 113, 1711, -1);
    expect_spot(psf, 0, 5800, 114, 440, -1);
}

}  // namespace
