// SPDX-License-Identifier: BSD-3-Clause
// Air and vacuum wavelengths, the night-sky reference lines and lines found in a spectrum.
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/air_vacuum.hpp"
#include "ex2d/night_sky_lines.hpp"

namespace ex2d {
namespace {

TEST(AirVacuum, KnownLines)
{
    // Vacuum wavelengths as DESI's sky reference has them (field-lessons.md): [O I] 5578.9
    // and 6302.0 A; H-alpha 6562.80 A in air is 6564.61 A in vacuum.
    EXPECT_NEAR(air_to_vacuum(5577.339), 5578.888, 0.001);
    EXPECT_NEAR(air_to_vacuum(6300.304), 6302.046, 0.001);
    EXPECT_NEAR(air_to_vacuum(6562.80), 6564.613, 0.001);
    EXPECT_NEAR(air_to_vacuum(8344.602), 8346.896, 0.001);
}

TEST(AirVacuum, InverseOfEachOther)
{
    for (double w = 3500.0; w <= 10000.0; w += 250.0) {
        EXPECT_NEAR(vacuum_to_air(air_to_vacuum(w)), w, 1e-8) << w;
        EXPECT_NEAR(air_to_vacuum(vacuum_to_air(w)), w, 1e-8) << w;
    }
}

TEST(NightSkyLines, VacuumAndSorted)
{
    const auto& lines = night_sky_lines();
    ASSERT_EQ(lines.size(), 14u);
    EXPECT_NEAR(lines.front().wave, 4359.553, 0.001);  // Hg I 4358.328 in air
    EXPECT_NEAR(lines[2].wave, 5578.888, 0.001);       // [O I] 5577.339 in air
    for (size_t i = 1; i < lines.size(); ++i) {
        EXPECT_GT(lines[i].wave, lines[i - 1].wave);
        EXPECT_GT(lines[i].strength, 0);
    }
    // Lines with another night-sky line 0.5-2 A away are left out: the OH Q1 heads with their
    // Q2 lines to the blue, and Na D.
    for (double air :
         {5889.950, 5895.924, 6863.955, 7276.405, 7750.640, 7913.708, 8344.602, 8827.096}) {
        for (const ReferenceLine& line : lines) {
            EXPECT_GT(std::abs(line.wave - air_to_vacuum(air)), 0.5) << "blended line " << air;
        }
    }
}

TEST(LinesFromSpectrum, FindsGaussianLinesAtTheirCentroids)
{
    std::vector<double> wave, flux;
    const double centers[] = {6302.046, 6365.536, 6865.85};
    const double amplitudes[] = {100.0, 30.0, 8.0};
    for (double w = 6250.0; w < 6900.0; w += 0.1) {
        double f = 5.0 + 0.002 * (w - 6250.0);
        for (int k = 0; k < 3; ++k) {
            const double d = (w - centers[k]) / 0.3;
            f += amplitudes[k] * std::exp(-0.5 * d * d);
        }
        wave.push_back(w);
        flux.push_back(f);
    }
    auto lines = lines_from_spectrum(wave, flux, "test spectrum");
    ASSERT_TRUE(lines.is_ok()) << lines.status().to_string();
    ASSERT_EQ(lines.value().size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(lines.value()[k].wave, centers[k], 0.01) << k;
    EXPECT_GT(lines.value()[0].strength, lines.value()[1].strength);
}

TEST(LinesFromSpectrum, RefusesBadInputNamingIt)
{
    auto too_short = lines_from_spectrum({1, 2}, {1, 2}, "sky.dat");
    ASSERT_FALSE(too_short.is_ok());
    EXPECT_NE(too_short.status().message().find("sky.dat"), std::string::npos);
    auto unsorted = lines_from_spectrum({1, 2, 3, 2.5, 4, 5}, {0, 1, 0, 0, 0, 0}, "sky.dat");
    ASSERT_FALSE(unsorted.is_ok());
    EXPECT_NE(unsorted.status().message().find("do not increase"), std::string::npos);
    auto flat = lines_from_spectrum({1, 2, 3, 4, 5}, {1, 1, 1, 1, 1}, "sky.dat");
    ASSERT_FALSE(flat.is_ok());
    EXPECT_NE(flat.status().message().find("no emission line"), std::string::npos);
}

}  // namespace
}  // namespace ex2d
