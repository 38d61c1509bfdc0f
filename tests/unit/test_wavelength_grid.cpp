// SPDX-License-Identifier: BSD-3-Clause
// The one parser of "wmin,wmax,dw" (ex2d's -w, ex2dctl submit's -w, the fleet's options).
#include <gtest/gtest.h>

#include "ex2d/input_checks.hpp"

namespace ex2d {
namespace {

TEST(WavelengthGrid, ParsesThreeNumbers)
{
    double wmin = 0, wmax = 0, dw = 0;
    ASSERT_TRUE(parse_wavelength_grid("5760,7620,0.8", "-w", wmin, wmax, dw).is_ok());
    EXPECT_EQ(wmin, 5760.0);
    EXPECT_EQ(wmax, 7620.0);
    EXPECT_EQ(dw, 0.8);
    ASSERT_TRUE(parse_wavelength_grid(" 3600.5, 5800 ,1e-1 ", "-w", wmin, wmax, dw).is_ok());
    EXPECT_EQ(wmin, 3600.5);
    EXPECT_EQ(wmax, 5800.0);
    EXPECT_EQ(dw, 0.1);
}

TEST(WavelengthGrid, RejectsTrailingGarbageNonFiniteAndBadOrder)
{
    const char* bad[] = {"5760,7620,0.8abc",
                         "1,2,3,4",
                         "1,2,3,",
                         "1,2",
                         "1,,3",
                         ",2,3",
                         "",
                         "a,b,c",
                         "5760;7620;0.8",
                         "nan,7620,0.8",
                         "5760,inf,0.8",
                         "5760,7620,inf",
                         "-inf,7620,0.8",
                         "5760,7620,nan",
                         "7620,5760,0.8",
                         "5760,5760,0.8",
                         "5760,7620,0",
                         "5760,7620,-0.8",
                         "5760,7620,0.8 x"};
    for (const char* text : bad) {
        double wmin = 1, wmax = 2, dw = 3;
        const Status st = parse_wavelength_grid(text, "options: wavelength", wmin, wmax, dw);
        EXPECT_EQ(st.code(), StatusCode::invalid_argument) << text;
        EXPECT_EQ(st.message(), std::string("options: wavelength must be 'wmin,wmax,dw' with "
                                            "wmax > wmin and dw > 0, got '") +
                                    text + "'");
        EXPECT_EQ(wmin, 1);  // left as they were
        EXPECT_EQ(wmax, 2);
        EXPECT_EQ(dw, 3);
    }
}

TEST(WavelengthGrid, TheCommandLineOptionNamesItself)
{
    double wmin = 1, wmax = 2, dw = 3;
    EXPECT_TRUE(parse_wavelength_option("", wmin, wmax, dw).is_ok());
    EXPECT_EQ(wmin, 1);
    const Status st = parse_wavelength_option("5760,7620,0.8abc", wmin, wmax, dw);
    EXPECT_EQ(st.message(),
              "-w/--wavelength must be 'wmin,wmax,dw' with wmax > wmin and dw > 0, "
              "got '5760,7620,0.8abc'");
    ASSERT_TRUE(parse_wavelength_option("3600,5800,0.5", wmin, wmax, dw).is_ok());
    EXPECT_EQ(wmin, 3600.0);
    EXPECT_EQ(wmax, 5800.0);
    EXPECT_EQ(dw, 0.5);
}

}  // namespace
}  // namespace ex2d
