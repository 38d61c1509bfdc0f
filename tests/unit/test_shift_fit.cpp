// SPDX-License-Identifier: BSD-3-Clause
// The polynomial fit of trace offsets: a known polynomial recovered, outliers rejected, the
// degree lowered by desispec's rule, and a fit too uncertain even at degree 0 refused.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "ex2d/synthetic_psf.hpp"
#include "shift_fit.hpp"

namespace ex2d {
namespace {

std::vector<TraceOffset> offsets_of(const GaussHermitePsf& psf, double error,
                                    double (*shift)(double, double), std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, error);
    std::vector<TraceOffset> out;
    for (int fiber = 0; fiber < psf.nspec(); fiber += 5) {
        for (double wave = 5800; wave < 7600; wave += 200) {
            TraceOffset o;
            o.fiber = fiber;
            o.wave = wave;
            o.x = psf.xtrace.eval(fiber, wave);
            o.y = psf.ytrace.eval(fiber, wave);
            o.delta = shift(o.x, o.y) + noise(rng);
            o.error = error;
            out.push_back(o);
        }
    }
    return out;
}

double quadratic_in_x(double x, double)
{
    const double u = 2 * x / 4114.0 - 1;
    return 0.2 + 0.3 * u - 0.25 * u * u;
}

TEST(ShiftFit, RecoversAPolynomialAndRejectsOutliers)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    std::vector<TraceOffset> offsets = offsets_of(psf, 0.01, quadratic_in_x, 1);
    offsets[7].delta += 2.0;  // a cosmic or a neighbour's line
    offsets[70].delta -= 1.0;
    auto fit = traceshift::fit_shift_polynomial(offsets, 2, 0, psf.npix_x, psf.npix_y);
    ASSERT_TRUE(fit.is_ok()) << fit.status().to_string();
    EXPECT_FALSE(offsets[7].used);
    EXPECT_FALSE(offsets[70].used);
    for (double x = 100; x < 4000; x += 300) {
        EXPECT_NEAR(fit.value()(x, 2000), quadratic_in_x(x, 2000), 0.003) << x;
    }
}

TEST(ShiftFit, DegreeLoweredWhereTheCornersAreUncertain)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    std::vector<TraceOffset> offsets = offsets_of(psf, 0.8, quadratic_in_x, 2);
    int degx = 2, degy = 0;
    auto fit = traceshift::fit_with_degree_rule(offsets, degx, degy, 0.05, psf, psf.nspec());
    ASSERT_TRUE(fit.is_ok()) << fit.status().to_string();
    EXPECT_LT(degx, 2);
    EXPECT_EQ(degy, 0);
}

TEST(ShiftFit, TooUncertainEvenAtDegreeZeroIsRefused)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    std::vector<TraceOffset> offsets = offsets_of(psf, 3.0, quadratic_in_x, 3);
    offsets.resize(12);
    int degx = 2, degy = 0;
    auto fit = traceshift::fit_with_degree_rule(offsets, degx, degy, 0.05, psf, psf.nspec());
    ASSERT_FALSE(fit.is_ok());
    EXPECT_NE(fit.status().message().find("exceeds --max-error"), std::string::npos)
        << fit.status().message();
}

}  // namespace
}  // namespace ex2d
