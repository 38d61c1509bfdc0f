// SPDX-License-Identifier: BSD-3-Clause
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ex2d/psf_io.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

TEST(ArmDefaults, GridsAndCcdSizesOfDesiCameras)
{
    const ArmDefaults b = arm_defaults(Arm::b);
    EXPECT_EQ(b.wmin, 3600.0);
    EXPECT_EQ(b.wmax, 5800.0);
    EXPECT_EQ(b.dw, 0.8);
    EXPECT_EQ(b.npix_x, 4096);
    EXPECT_EQ(b.npix_y, 4096);
    EXPECT_EQ(b.psferr, 0.04);
    const ArmDefaults r = arm_defaults(Arm::r);
    EXPECT_EQ(r.wmin, 5760.0);
    EXPECT_EQ(r.wmax, 7620.0);
    EXPECT_EQ(r.npix_x, 4114);
    EXPECT_EQ(r.npix_y, 4128);
    EXPECT_EQ(r.psferr, 0.01);
    const ArmDefaults z = arm_defaults(Arm::z);
    EXPECT_EQ(z.wmin, 7520.0);
    EXPECT_EQ(z.wmax, 9824.0);
    EXPECT_EQ(z.npix_x, 4114);
    EXPECT_EQ(z.npix_y, 4128);
    EXPECT_EQ(z.psferr, 0.01);
    for (Arm arm : {Arm::b, Arm::r, Arm::z}) {
        const ArmDefaults d = arm_defaults(arm);
        EXPECT_LT(d.psf_wavemin, d.wmin);
        EXPECT_GT(d.psf_wavemax, d.wmax);
    }
}

TEST(ParseArm, AcceptsArmLettersAndCameraNames)
{
    EXPECT_EQ(parse_arm("b").value(), Arm::b);
    EXPECT_EQ(parse_arm("r0").value(), Arm::r);
    EXPECT_EQ(parse_arm("Z7").value(), Arm::z);
    EXPECT_EQ(arm_letter(Arm::z), 'z');
    for (const char* bad : {"", "x", "x1", "r10", "rr", "red"}) {
        const auto result = parse_arm(bad);
        ASSERT_FALSE(result.is_ok()) << bad;
        EXPECT_EQ(result.status().code(), StatusCode::invalid_argument);
    }
}

class SyntheticPsfTest : public ::testing::TestWithParam<Arm> {};

TEST_P(SyntheticPsfTest, LayoutMatchesTheCcd)
{
    const Arm arm = GetParam();
    const ArmDefaults d = arm_defaults(arm);
    const GaussHermitePsf psf = make_synthetic_psf(arm, 3);
    ASSERT_TRUE(psf.validate().is_ok()) << psf.validate().to_string();
    EXPECT_EQ(psf.nspec(), 500);
    EXPECT_EQ(psf.npix_x, d.npix_x);
    EXPECT_EQ(psf.npix_y, d.npix_y);
    EXPECT_EQ(psf.xtrace.ncoef, 7);
    EXPECT_EQ(psf.param("GHSIGX").ncoef, 4);
    EXPECT_EQ(psf.psferr, d.psferr);
    EXPECT_EQ(psf.psf_header.get_string("CAMERA").value_or(""),
              std::string(1, arm_letter(arm)) + "3");
    EXPECT_EQ(psf.psf_header.get_int("PSFVER").value_or(0), 3);
    EXPECT_EQ(psf.psf_header.get_int("LEGDEG").value_or(0), 3);
    EXPECT_DOUBLE_EQ(psf.psf_header.get_double("PSFERR").value_or(0), d.psferr);
    EXPECT_DOUBLE_EQ(psf.xtrace.wavemin, d.psf_wavemin);
    EXPECT_DOUBLE_EQ(psf.param("GHSIGY").wavemax, d.psf_wavemax);

    // First and last fibre near the real r0 PSF's columns.
    const double mid = 0.5 * (d.wmin + d.wmax);
    EXPECT_NEAR(psf.xtrace.eval(0, mid), 121.0, 5.0);
    EXPECT_NEAR(psf.xtrace.eval(250, mid), 2041.0, 5.0);
    EXPECT_NEAR(psf.xtrace.eval(499, mid), 3946.0, 5.0);
    EXPECT_EQ(psf.param("BUNDLE").eval(37, mid), 1.0);
    EXPECT_EQ(psf.param("TAILAMP").eval(37, mid), 0.0);

    for (double w = d.psf_wavemin; w <= d.psf_wavemax; w += 5.0) {
        double previous_x = -1e9;
        for (int fiber = 0; fiber < 500; ++fiber) {
            const double x = psf.xtrace.eval(fiber, w);
            ASSERT_GE(x, 60.0) << "fiber " << fiber << " at " << w;
            ASSERT_LE(x, d.npix_x - 60.0) << "fiber " << fiber << " at " << w;
            ASSERT_GT(x - previous_x, 6.0) << "fiber " << fiber << " at " << w;
            previous_x = x;
        }
    }
    for (int fiber : {0, 24, 25, 249, 250, 499}) {
        EXPECT_LT(psf.ytrace.eval(fiber, d.psf_wavemin), 0.0);
        EXPECT_GT(psf.ytrace.eval(fiber, d.psf_wavemax), d.npix_y + 50.0);
        double previous_y = -1e9;
        for (double w = d.psf_wavemin; w <= d.psf_wavemax; w += 0.8) {
            const double y = psf.ytrace.eval(fiber, w);
            ASSERT_GT(y - previous_y, 1.0) << "fiber " << fiber << " at " << w;  // ~1.4 px / bin
            previous_y = y;
        }
        for (double w = d.wmin + 20.0; w <= d.wmax - 20.0; w += 10.0) {
            const double y = psf.ytrace.eval(fiber, w);
            ASSERT_GE(y, 0.0);
            ASSERT_LT(y, double(d.npix_y));
        }
    }
    // Fibres of a bundle share Y to within 2 px at any wavelength.
    EXPECT_NEAR(psf.ytrace.eval(0, mid), psf.ytrace.eval(499, mid), 2.0);
}

TEST_P(SyntheticPsfTest, ShapeParametersInRange)
{
    const Arm arm = GetParam();
    const ArmDefaults d = arm_defaults(arm);
    const GaussHermitePsf psf = make_synthetic_psf(arm);
    for (int fiber = 0; fiber < 500; fiber += 7) {
        for (double w = d.psf_wavemin; w <= d.psf_wavemax; w += 20.0) {
            const double sigx = psf.param("GHSIGX").eval(fiber, w);
            const double sigy = psf.param("GHSIGY").eval(fiber, w);
            ASSERT_GE(sigx, 0.95);
            ASSERT_LE(sigx, 1.25);
            ASSERT_GE(sigy, 0.95);
            ASSERT_LE(sigy, 1.25);
            const double gh00 = psf.param("GH-0-0").eval(fiber, w);
            ASSERT_GE(gh00, 0.93);
            ASSERT_LE(gh00, 1.1);
            for (int i = 0; i <= 6; ++i) {
                for (int j = 0; j <= 6; ++j) {
                    if (i + j == 0) continue;
                    const std::string name = "GH-" + std::to_string(i) + "-" + std::to_string(j);
                    ASSERT_LE(std::fabs(psf.param(name).eval(fiber, w)), 0.05) << name;
                }
            }
        }
    }
}

TEST_P(SyntheticPsfTest, SpotsAreNormalisedAndCentred)
{
    const Arm arm = GetParam();
    const ArmDefaults d = arm_defaults(arm);
    const GaussHermitePsf psf = make_synthetic_psf(arm);
    for (int fiber : {0, 13, 250, 401, 499}) {
        for (double w : {d.wmin, 0.5 * (d.wmin + d.wmax), d.wmax, d.wmin + 123.45}) {
            const Spot spot = evaluate_spot(psf, fiber, w);
            ASSERT_EQ(spot.values.size(), size_t(psf.stamp_nx() * psf.stamp_ny()));
            double total = 0, mx = 0, my = 0, negative = 0;
            for (int iy = 0; iy < psf.stamp_ny(); ++iy) {
                for (int ix = 0; ix < psf.stamp_nx(); ++ix) {
                    const double v = spot.values[iy * psf.stamp_nx() + ix];
                    total += v;
                    mx += v * (spot.xc + ix);
                    my += v * (spot.yc + iy);
                    negative += v < 0 ? 1 : 0;
                }
            }
            EXPECT_NEAR(total, 1.0, 1e-12);
            EXPECT_EQ(negative, 0);
            EXPECT_NEAR(mx, psf.xtrace.eval(fiber, w), 0.05) << "fiber " << fiber << " at " << w;
            EXPECT_NEAR(my, psf.ytrace.eval(fiber, w), 0.05) << "fiber " << fiber << " at " << w;
        }
    }
}

TEST_P(SyntheticPsfTest, FileRoundTripKeepsTraces)
{
    const Arm arm = GetParam();
    const ArmDefaults d = arm_defaults(arm);
    const GaussHermitePsf psf = make_synthetic_psf(arm, 5);
    test::TempDir dir;
    const std::string path = dir.file("psf.fits");
    const Status written = write_psf(path, psf);
    ASSERT_TRUE(written.is_ok()) << written.to_string();
    const auto read = read_psf(path);
    ASSERT_TRUE(read.is_ok()) << read.status().to_string();
    const GaussHermitePsf& back = read.value();
    EXPECT_EQ(back.nspec(), 500);
    EXPECT_EQ(back.npix_x, d.npix_x);
    EXPECT_EQ(back.npix_y, d.npix_y);
    EXPECT_EQ(back.hsizex, 8);
    EXPECT_EQ(back.hsizey, 5);
    EXPECT_DOUBLE_EQ(back.psferr, d.psferr);
    for (int fiber : {0, 123, 499}) {
        for (double w : {d.wmin, 0.5 * (d.wmin + d.wmax), d.wmax}) {
            EXPECT_NEAR(back.xtrace.eval(fiber, w), psf.xtrace.eval(fiber, w), 1e-12);
            EXPECT_NEAR(back.ytrace.eval(fiber, w), psf.ytrace.eval(fiber, w), 1e-12);
            EXPECT_NEAR(back.param("GHSIGY").eval(fiber, w), psf.param("GHSIGY").eval(fiber, w),
                        1e-12);
        }
    }
}

TEST(SyntheticPsf, IsDeterministic)
{
    const GaussHermitePsf a = make_synthetic_psf(Arm::r);
    const GaussHermitePsf b = make_synthetic_psf(Arm::r);
    EXPECT_EQ(a.xtrace.coef, b.xtrace.coef);
    EXPECT_EQ(a.ytrace.coef, b.ytrace.coef);
    EXPECT_EQ(a.param("GH-2-2").coef, b.param("GH-2-2").coef);
}

INSTANTIATE_TEST_SUITE_P(Arms, SyntheticPsfTest, ::testing::Values(Arm::b, Arm::r, Arm::z),
                         [](const ::testing::TestParamInfo<Arm>& info) {
                             return std::string(1, arm_letter(info.param));
                         });

}  // namespace
}  // namespace ex2d
