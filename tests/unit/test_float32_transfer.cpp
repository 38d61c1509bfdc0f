// SPDX-License-Identifier: BSD-3-Clause
// Narrowing of pixels and weights to float32 for the CUDA backend: masks unchanged, no NaN.
#include <cfloat>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "ex2d/float32_transfer.hpp"

namespace ex2d {
namespace {

TEST(Float32Transfer, TinyPositiveWeightsStayUnmasked)
{
    EXPECT_LT(float(1e-40), FLT_MIN) << "the case this guards: 1e-40 is a float32 denormal, "
                                        "zero wherever the device flushes denormals";
    EXPECT_EQ(float(1e-50), 0.0f);
    EXPECT_EQ(weight_as_float32(1e-50, 1.0), FLT_MIN);
    EXPECT_EQ(weight_as_float32(1e-40, 1.0), FLT_MIN);
    EXPECT_GT(weight_as_float32(1e-300, 1.0), 0.0f);
    EXPECT_EQ(weight_as_float32(0.25, 1.0), 0.25f);
}

TEST(Float32Transfer, HugeWeightsStayFinite)
{
    EXPECT_TRUE(std::isinf(float(1e40)));
    EXPECT_EQ(weight_as_float32(1e40, 1.0), FLT_MAX);
}

TEST(Float32Transfer, MaskedWeightsAreZero)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(weight_as_float32(0.0, 1.0), 0.0f);
    EXPECT_EQ(weight_as_float32(-3.0, 1.0), 0.0f);
    EXPECT_EQ(weight_as_float32(nan, 1.0), 0.0f);
    EXPECT_EQ(weight_as_float32(inf, 1.0), 0.0f);
}

// The pixel rule of usable_pixels.hpp: a non-finite value masks its pixel whatever its weight.
TEST(Float32Transfer, NonFiniteValuesMaskTheirPixel)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(weight_as_float32(2.0, nan), 0.0f);
    EXPECT_EQ(weight_as_float32(2.0, inf), 0.0f);
    EXPECT_EQ(weight_as_float32(2.0, -inf), 0.0f);
    EXPECT_EQ(weight_as_float32(2.0, 1e40), 2.0f) << "finite beyond float's range: clamped, kept";
}

TEST(Float32Transfer, PixelsNeverCarryNaNOrInfinity)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(pixel_as_float32(nan, 0.0f), 0.0f);
    EXPECT_EQ(pixel_as_float32(inf, 1.0f), 0.0f);
    EXPECT_EQ(pixel_as_float32(1e40, 1.0f), FLT_MAX);
    EXPECT_EQ(pixel_as_float32(-1e40, 1.0f), -FLT_MAX);
    EXPECT_EQ(pixel_as_float32(123.5, 0.0f), 0.0f) << "a masked pixel's value is not sent";
    EXPECT_EQ(pixel_as_float32(123.5, 0.5f), 123.5f);
    // 0 * the value sent stays 0, which 0 * NaN would not.
    EXPECT_EQ(0.0f * pixel_as_float32(nan, 0.0f), 0.0f);
}

}  // namespace
}  // namespace ex2d
