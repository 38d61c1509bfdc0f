// SPDX-License-Identifier: BSD-3-Clause
// The bad-column mask (datamodel 4.7) against values worked out by hand on four traces:
//   spectrum 0 at x = 10 and spectrum 1 at x = 18 (straight), spectrum 2 from x = 20 to 40
//   (x = 30 + 10 u over 11 bins, 2 px per bin), spectrum 3 at x = 50;
// bias(dx) = E * 1.1 / (1 + |dx/2|^5) for |dx| < 4.5; threshold 0.005 e/s.
#include <fitsio.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ex2d/badcolumns.hpp"
#include "fits_fixtures.hpp"

namespace ex2d {
namespace {

constexpr int kNspec = 4;
constexpr int kNwave = 11;

LegendreTable four_traces()
{
    LegendreTable t;
    t.wavemin = 5000;
    t.wavemax = 6000;
    t.nfiber = kNspec;
    t.ncoef = 2;
    t.coef = {10, 0, 18, 0, 30, 10, 50, 0};
    return t;
}

std::vector<double> grid()
{
    std::vector<double> wave;
    wave.reserve(kNwave);
    for (int w = 0; w < kNwave; ++w) wave.push_back(5000 + 100.0 * w);
    return wave;
}

/// A FIBERMAP with FIBER = row and FIBERSTATUS = `status0` in row 0, 0 elsewhere.
FitsTableBlob fibermap_with_status(int nrows, long long status0)
{
    size_t size = 0;
    void* buffer = nullptr;
    fitsfile* f = nullptr;
    int status = 0;
    char* ttype[] = {const_cast<char*>("FIBER"), const_cast<char*>("FIBERSTATUS")};
    char* tform[] = {const_cast<char*>("J"), const_cast<char*>("J")};
    fits_create_memfile(&f, &buffer, &size, 2880, std::realloc, &status);
    fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
    fits_create_tbl(f, BINARY_TBL, nrows, 2, ttype, tform, nullptr, "FIBERMAP", &status);
    for (int i = 0; i < nrows; ++i) {
        long long fiber = i;
        long long fiberstatus = i == 0 ? status0 : 0;
        fits_write_col(f, TLONGLONG, 1, i + 1, 1, 1, &fiber, &status);
        fits_write_col(f, TLONGLONG, 2, i + 1, 1, 1, &fiberstatus, &status);
    }
    return test::close_table_blob(f, buffer, status, nrows);
}

struct Fixture {
    LegendreTable xtrace = four_traces();
    std::vector<double> wave = grid();
    std::vector<std::uint32_t> mask = std::vector<std::uint32_t>(kNspec * kNwave, 0);
    FitsTableBlob fibermap = fibermap_with_status(kNspec, 0);

    BadColumnFrame frame(char arm)
    {
        return {&xtrace, &wave, 0, kNspec, mask.data(), &fibermap, arm};
    }
    std::uint32_t bin(int spectrum, int w) const { return mask[spectrum * kNwave + w]; }
    int masked_in(int spectrum) const
    {
        int n = 0;
        for (int w = 0; w < kNwave; ++w) n += (bin(spectrum, w) & kSpecmaskBadColumn) != 0;
        return n;
    }
};

BadColumns table(std::vector<double> columns, std::vector<double> values)
{
    return {"test-table", std::move(columns), std::move(values)};
}

TEST(BadColumnBias, MatchesTheFormulaAndItsCut)
{
    EXPECT_DOUBLE_EQ(badcolumn_flux_bias(0.0), 1.1);
    EXPECT_DOUBLE_EQ(badcolumn_flux_bias(-4.0), 1.1 / 33.0);
    EXPECT_DOUBLE_EQ(badcolumn_flux_bias(3.0), 1.1 / (1.0 + 7.59375));
    EXPECT_DOUBLE_EQ(badcolumn_flux_bias(4.49), 1.1 / (1.0 + std::pow(2.245, 5)));
    EXPECT_EQ(badcolumn_flux_bias(4.5), 0.0);
    EXPECT_EQ(badcolumn_flux_bias(-7.0), 0.0);
}

TEST(BadColumnMask, ColumnBetweenTwoFibresMasksBothWhenStrong)
{
    // Column 14 is 4 px from spectra 0 and 1: bias 1.0 * 1.1/33 = 0.0333 >= 0.005 in every
    // bin; spectrum 2 starts 6 px away, beyond the 4.5 px cut.
    Fixture fx;
    fx.mask[0] = 1;  // SOMEBADPIX from extraction stays
    auto outcome = apply_badcolumn_mask(table({14}, {1.0}), fx.frame('z'));
    ASSERT_TRUE(outcome.is_ok()) << outcome.status().to_string();
    EXPECT_EQ(fx.masked_in(0), kNwave);
    EXPECT_EQ(fx.masked_in(1), kNwave);
    EXPECT_EQ(fx.masked_in(2), 0);
    EXPECT_EQ(fx.masked_in(3), 0);
    EXPECT_EQ(fx.bin(0, 0), 1025u);
    EXPECT_EQ(fx.bin(1, 5), 1024u);
    EXPECT_EQ(outcome.value().masked_bins, 2 * kNwave);
    EXPECT_EQ(outcome.value().masked_fibers, 2);
    EXPECT_EQ(outcome.value().flagged_spectra, (std::vector<int>{0, 1}));
    // BADAMPZ is bit 24.
    auto status = read_int_column(fx.fibermap, "FIBERSTATUS");
    ASSERT_TRUE(status.is_ok());
    EXPECT_EQ(status.value(), (std::vector<long long>{16777216, 16777216, 0, 0}));
    EXPECT_EQ(read_int_column(fx.fibermap, "FIBER").value(), (std::vector<long long>{0, 1, 2, 3}));
}

TEST(BadColumnMask, ColumnBetweenTwoFibresMasksNeitherWhenWeak)
{
    // The same column at 0.1 e/s: 0.1 * 1.1/33 = 0.0033 < 0.005, so neither neighbour.
    Fixture fx;
    auto outcome = apply_badcolumn_mask(table({14}, {0.1}), fx.frame('z'));
    ASSERT_TRUE(outcome.is_ok());
    for (int s = 0; s < kNspec; ++s) EXPECT_EQ(fx.masked_in(s), 0) << "spectrum " << s;
    EXPECT_EQ(outcome.value().masked_bins, 0);
    EXPECT_EQ(read_int_column(fx.fibermap, "FIBERSTATUS").value(),
              (std::vector<long long>(kNspec, 0)));
}

TEST(BadColumnMask, NothingBeyondTheBiasRangeNorBelowThreshold)
{
    // 54.5 is exactly 4.5 px from spectrum 3 (cut even at 1e6 e/s); 50 sits on spectrum 3 but
    // 0.004 * 1.1 = 0.0044 < 0.005.
    Fixture fx;
    auto outcome = apply_badcolumn_mask(table({54.5, 50}, {1e6, 0.004}), fx.frame('r'));
    ASSERT_TRUE(outcome.is_ok());
    EXPECT_EQ(outcome.value().masked_bins, 0);
    for (int s = 0; s < kNspec; ++s) EXPECT_EQ(fx.masked_in(s), 0) << "spectrum " << s;
    // Just inside the cut the same strong column masks every bin of spectrum 3 (BADAMPR).
    auto inside = apply_badcolumn_mask(table({54.4}, {1e6}), fx.frame('r'));
    ASSERT_TRUE(inside.is_ok());
    EXPECT_EQ(fx.masked_in(3), kNwave);
    EXPECT_EQ(read_int_column(fx.fibermap, "FIBERSTATUS").value()[3], 1 << 23);
}

TEST(BadColumnMask, TiltedTraceAndTheFortyPercentRule)
{
    // Column 27 at 0.5 e/s against spectrum 2 (x = 20, 22, ..., 40): dx = -3, -1, 1, 3 in
    // bins 2..5 (bias 0.064 and 0.533), |dx| >= 5 elsewhere: 4 of 11 bins, 36% < 40%.
    Fixture fx;
    fx.fibermap = fibermap_with_status(kNspec, 0);
    auto outcome = apply_badcolumn_mask(table({27}, {0.5}), fx.frame('b'));
    ASSERT_TRUE(outcome.is_ok());
    for (int w = 0; w < kNwave; ++w) {
        EXPECT_EQ(fx.bin(2, w), (w >= 2 && w <= 5) ? 1024u : 0u) << "bin " << w;
    }
    EXPECT_EQ(fx.masked_in(1), 0);
    EXPECT_TRUE(outcome.value().flagged_spectra.empty());
    EXPECT_EQ(read_int_column(fx.fibermap, "FIBERSTATUS").value()[2], 0);

    // With --frac-threshold 0.35 (4 >= 3.85) the fibre gets BADAMPB, bit 22.
    Fixture again;
    BadColumnThresholds thresholds;
    thresholds.fiber_fraction = 0.35;
    auto flagged = apply_badcolumn_mask(table({27}, {0.5}), again.frame('b'), thresholds);
    ASSERT_TRUE(flagged.is_ok());
    EXPECT_EQ(flagged.value().flagged_spectra, (std::vector<int>{2}));
    EXPECT_EQ(read_int_column(again.fibermap, "FIBERSTATUS").value(),
              (std::vector<long long>{0, 0, 4194304, 0}));
}

TEST(BadColumnMask, SpectraAreFibreRowsFromSpecmin)
{
    // A two-spectrum frame from specmin 1 (spectra 1 and 2): FIBERMAP rows 1 and 2, PSF
    // fibres 1 and 2. Row 0 keeps its own FIBERSTATUS bit.
    Fixture fx;
    fx.fibermap = fibermap_with_status(kNspec, 8);
    std::vector<std::uint32_t> mask(2 * kNwave, 0);
    BadColumnFrame frame{&fx.xtrace, &fx.wave, 1, 2, mask.data(), &fx.fibermap, 'r'};
    auto outcome = apply_badcolumn_mask(table({18}, {1.0}), frame);
    ASSERT_TRUE(outcome.is_ok());
    // Fibre 2 starts at x = 20 and 22: dx = 2 and 4 mask its first two bins only.
    EXPECT_EQ(outcome.value().masked_bins, kNwave + 2);
    EXPECT_EQ(mask[0], 1024u);
    EXPECT_EQ(mask[kNwave], 1024u);
    EXPECT_EQ(mask[kNwave + 1], 1024u);
    EXPECT_EQ(mask[kNwave + 2], 0u);
    EXPECT_EQ(read_int_column(fx.fibermap, "FIBERSTATUS").value(),
              (std::vector<long long>{8, 8388608, 0, 0}));
}

TEST(BadColumnMask, EmptyTableChangesNothing)
{
    Fixture fx;
    const std::vector<std::uint8_t> before = fx.fibermap.fits_bytes;
    auto outcome = apply_badcolumn_mask(table({}, {}), fx.frame('r'));
    ASSERT_TRUE(outcome.is_ok());
    EXPECT_EQ(outcome.value().masked_bins, 0);
    EXPECT_EQ(fx.mask, std::vector<std::uint32_t>(kNspec * kNwave, 0));
    EXPECT_EQ(fx.fibermap.fits_bytes, before);
}

TEST(BadColumnMask, FibermapWithoutFiberstatusIsAFormatError)
{
    Fixture fx;
    size_t size = 0;
    void* buffer = nullptr;
    fitsfile* f = nullptr;
    int status = 0;
    char* ttype[] = {const_cast<char*>("FIBER")};
    char* tform[] = {const_cast<char*>("J")};
    fits_create_memfile(&f, &buffer, &size, 2880, std::realloc, &status);
    fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
    fits_create_tbl(f, BINARY_TBL, kNspec, 1, ttype, tform, nullptr, "FIBERMAP", &status);
    long long headstart = 0, datastart = 0, dataend = 0;
    fits_flush_file(f, &status);
    fits_get_hduaddrll(f, &headstart, &datastart, &dataend, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    auto* bytes = static_cast<std::uint8_t*>(buffer);
    fx.fibermap.fits_bytes.assign(bytes, bytes + dataend);
    std::free(buffer);
    auto outcome = apply_badcolumn_mask(table({14}, {1.0}), fx.frame('r'));
    ASSERT_FALSE(outcome.is_ok());
    EXPECT_EQ(outcome.status().code(), StatusCode::format_error);
    EXPECT_NE(outcome.status().message().find("FIBERSTATUS"), std::string::npos);
    EXPECT_EQ(fx.masked_in(0), 0);
}

class BadColumnCsv : public ::testing::Test {
protected:
    std::string write(const std::string& name, const std::string& text)
    {
        std::string path = (dir_ / name).string();
        std::ofstream(path) << text;
        return path;
    }
    void SetUp() override
    {
        dir_ = std::filesystem::temp_directory_path() /
               ("ex2d-badcolumns-" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::filesystem::path dir_;
};

TEST_F(BadColumnCsv, ReadsAstropyLayout)
{
    const std::string path = write(
        "b.csv", "CAMERA,COLUMN,ELEC_PER_SEC,SIGMA\r\nb0,1234,0.25,0.01\nb0,\"7\",1e-3,0.5\n");
    auto read = read_badcolumns_csv(path);
    ASSERT_TRUE(read.is_ok()) << read.status().to_string();
    EXPECT_EQ(read.value().column, (std::vector<double>{1234, 7}));
    EXPECT_EQ(read.value().elec_per_sec, (std::vector<double>{0.25, 0.001}));
    EXPECT_EQ(read.value().source, path);
}

TEST_F(BadColumnCsv, HeaderAloneIsAnEmptyTable)
{
    auto read = read_badcolumns_csv(write("e.csv", "CAMERA,COLUMN,ELEC_PER_SEC,SIGMA\n"));
    ASSERT_TRUE(read.is_ok());
    EXPECT_TRUE(read.value().column.empty());
}

TEST_F(BadColumnCsv, MalformedFilesNameTheFileAndTheProblem)
{
    struct Case {
        const char* text;
        const char* problem;
    };
    for (const Case& c : {Case{"CAMERA,COLUMN,SIGMA\nb0,3,0.1\n", "lacks column ELEC_PER_SEC"},
                          Case{"ELEC_PER_SEC\n0.1\n", "lacks column COLUMN"},
                          Case{"COLUMN,ELEC_PER_SEC\n12,lots\n", "line 2: ELEC_PER_SEC 'lots'"},
                          Case{"COLUMN,ELEC_PER_SEC\n12,0.1\nx7,0.2\n", "line 3: COLUMN 'x7'"},
                          Case{"COLUMN,ELEC_PER_SEC\n12,nan\n", "is not a finite number"},
                          Case{"COLUMN,ELEC_PER_SEC\n12\n", "1 fields, the header has 2"},
                          Case{"", "no header line"}}) {
        const std::string path = write("bad.csv", c.text);
        auto read = read_badcolumns_csv(path);
        ASSERT_FALSE(read.is_ok()) << c.text;
        EXPECT_EQ(read.status().code(), StatusCode::format_error);
        EXPECT_NE(read.status().message().find(path), std::string::npos);
        EXPECT_NE(read.status().message().find(c.problem), std::string::npos)
            << read.status().message();
    }
    auto missing = read_badcolumns_csv((dir_ / "absent.csv").string());
    ASSERT_FALSE(missing.is_ok());
    EXPECT_EQ(missing.status().code(), StatusCode::io_error);
    EXPECT_NE(missing.status().message().find("absent.csv"), std::string::npos);
}

}  // namespace
}  // namespace ex2d
