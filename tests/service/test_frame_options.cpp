// SPDX-License-Identifier: BSD-3-Clause
// The options a frame carries through the fleet, as JSON: the wavelength grid goes through
// the same parser as ex2d's -w.
#include <gtest/gtest.h>

#include "ex2d/service/frame_messages.hpp"

namespace ex2d::service {
namespace {

TEST(FrameOptions, WavelengthRoundTrips)
{
    ExtractionOptions in;
    in.wmin = 5760;
    in.wmax = 7620;
    in.dw = 0.8;
    const auto out = options_from_json(options_to_json(in));
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ(out.value().wmin, 5760.0);
    EXPECT_EQ(out.value().wmax, 7620.0);
    EXPECT_EQ(out.value().dw, 0.8);
}

TEST(FrameOptions, WavelengthWithTrailingGarbageIsRefused)
{
    for (const std::string w : {"5760,7620,0.8abc", "1,2,3,4", "7620,5760,0.8", "5760,7620,nan"}) {
        const auto out = options_from_json(R"({"wavelength": ")" + w + R"("})");
        ASSERT_FALSE(out.is_ok()) << w;
        EXPECT_EQ(out.status().code(), StatusCode::format_error);
        EXPECT_EQ(out.status().message(),
                  "options: wavelength must be 'wmin,wmax,dw' with "
                  "wmax > wmin and dw > 0, got '" +
                      w + "'");
    }
}

}  // namespace
}  // namespace ex2d::service
