// SPDX-License-Identifier: BSD-3-Clause
// `ex2d extract --badcolumns` on a small simulated frame: against the same extraction without
// it, only MASK bit BADCOLUMN (1024) in the bins desispec's rule picks and FIBERSTATUS BADAMPR
// of the fibres it flags change; FLUX and IVAR are identical. Bad tables fail cleanly.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/badcolumns.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "run_tool.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

namespace fs = std::filesystem;

constexpr int kSpecmin = 25;
constexpr int kNspec = 25;

std::vector<long long> fiberstatus_of(const std::string& frame_path)
{
    fitsfile* f = nullptr;
    int status = 0;
    int colnum = 0;
    long long nrows = 0;
    fits_open_file(&f, frame_path.c_str(), READONLY, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &status);
    fits_get_colnum(f, CASEINSEN, const_cast<char*>("FIBERSTATUS"), &colnum, &status);
    fits_get_num_rowsll(f, &nrows, &status);
    std::vector<long long> values(std::size_t(std::max(nrows, 0LL)), -1);
    int anynul = 0;
    fits_read_col(f, TLONGLONG, colnum, 1, 1, nrows, nullptr, values.data(), &anynul, &status);
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0) << frame_path;
    return values;
}

class BadColumnExtract : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        dir_ = new test::TempDir();
        psf_ = new GaussHermitePsf(make_synthetic_psf(Arm::r, 0));
        psf_path_ = dir_->file("psf-r0.fits");
        ASSERT_TRUE(write_psf(psf_path_, *psf_).is_ok());
        SimulationOptions sim;
        sim.nspec = kNspec;
        sim.specmin = kSpecmin;
        sim.wmin = 5760;
        sim.wmax = 6400;
        auto simulated = simulate_frame(*psf_, sim);
        ASSERT_TRUE(simulated.is_ok());
        preproc_path_ = dir_->file("preproc-r0.fits");
        ASSERT_TRUE(write_preproc(preproc_path_, simulated.value().preproc).is_ok());
        table_ = new BadColumns(simulated_badcolumns(*psf_, sim));
        table_path_ = dir_->file("badcolumns-r0-20261121.csv");
        ASSERT_TRUE(write_badcolumns_csv(table_path_, *table_, "r0").is_ok());
    }
    static void TearDownTestSuite()
    {
        delete table_;
        delete psf_;
        delete dir_;
    }
    static test::RunResult extract(const std::string& output, const std::string& extra = "")
    {
        return test::run_command("extract -i " + preproc_path_ + " -p " + psf_path_ + " -o " +
                                 output + " -w 5760.0,6400.0,0.8 -s 25 -n 25 --threads 2 " + extra);
    }

    static test::TempDir* dir_;
    static GaussHermitePsf* psf_;
    static BadColumns* table_;
    static std::string psf_path_, preproc_path_, table_path_;
};
test::TempDir* BadColumnExtract::dir_ = nullptr;
GaussHermitePsf* BadColumnExtract::psf_ = nullptr;
BadColumns* BadColumnExtract::table_ = nullptr;
std::string BadColumnExtract::psf_path_, BadColumnExtract::preproc_path_,
    BadColumnExtract::table_path_;

TEST_F(BadColumnExtract, OnlyBadColumnBitsAndFiberstatusChange)
{
    ASSERT_EQ(table_->column.size(), 3u);
    const std::string plain = dir_->file("frame-plain.fits");
    const std::string masked = dir_->file("frame-masked.fits");
    const test::RunResult a = extract(plain);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const test::RunResult b = extract(masked, "--badcolumns " + table_path_);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("badcolumn mask file=" + table_path_), std::string::npos) << b.output;
    auto without = read_frame(plain);
    auto with = read_frame(masked);
    ASSERT_TRUE(without.is_ok() && with.is_ok());
    const FrameFile& u = without.value();
    const FrameFile& m = with.value();
    ASSERT_EQ(u.nspec, kNspec);
    ASSERT_EQ(u.nwave, 801);
    EXPECT_EQ(u.flux, m.flux);
    EXPECT_EQ(u.ivar, m.ivar);
    EXPECT_EQ(u.resolution, m.resolution);

    // desispec's rule, written out here on the traces at the frame's wavelengths.
    std::vector<int> per_spectrum(kNspec, 0);
    long long expected_bins = 0;
    for (int s = 0; s < kNspec; ++s) {
        for (int w = 0; w < u.nwave; ++w) {
            const double x = psf_->xtrace.eval(kSpecmin + s, u.wave[std::size_t(w)]);
            bool bad = false;
            for (std::size_t c = 0; c < table_->column.size(); ++c) {
                const double dx = std::abs(x - table_->column[c]);
                const double bias =
                    dx < 4.5 ? table_->elec_per_sec[c] * 1.1 / (1 + std::pow(dx / 2, 5)) : 0.0;
                bad = bad || bias >= 0.005;
            }
            const std::size_t k = std::size_t(s) * std::size_t(u.nwave) + std::size_t(w);
            EXPECT_EQ(m.mask[k], u.mask[k] | (bad ? 1024u : 0u))
                << "spectrum " << s << " bin " << w;
            per_spectrum[std::size_t(s)] += bad;
            expected_bins += bad;
        }
    }
    // The strong column sits on fibre 27's trace (spectrum 2) and reaches its neighbours; the
    // 0.3 e/s one between spectra 12 and 13; the 0.002 e/s one on spectrum 20 masks nothing.
    EXPECT_GT(per_spectrum[2], u.nwave / 2);
    EXPECT_GT(per_spectrum[12] + per_spectrum[13], 0);
    EXPECT_EQ(per_spectrum[20], 0);
    EXPECT_GT(expected_bins, 0);
    const std::vector<long long> status_plain = fiberstatus_of(plain);
    const std::vector<long long> status_masked = fiberstatus_of(masked);
    ASSERT_EQ(status_masked.size(), std::size_t(kNspec));
    int flagged = 0;
    for (int s = 0; s < kNspec; ++s) {
        const bool badamp = per_spectrum[std::size_t(s)] >= 0.4 * u.nwave;
        flagged += badamp;
        EXPECT_EQ(status_masked[std::size_t(s)],
                  status_plain[std::size_t(s)] | (badamp ? (1LL << 23) : 0))
            << "spectrum " << s;
    }
    EXPECT_GE(flagged, 1);
    std::cout << "masked bins " << expected_bins << ", BADAMPR fibres " << flagged << "\n";
}

TEST_F(BadColumnExtract, MalformedOrMissingTableFailsBeforeExtracting)
{
    const std::string bad = dir_->file("badcolumns-bad.csv");
    std::ofstream(bad) << "CAMERA,COLUMN,ELEC_PER_SEC\nr0,120,many\n";
    const std::string out = dir_->file("frame-bad.fits");
    const test::RunResult r = extract(out, "--badcolumns " + bad);
    EXPECT_EQ(r.exit_code, kExitInput) << r.output;
    const std::string line = test::last_line(r.output);
    EXPECT_NE(line.find(bad), std::string::npos) << line;
    EXPECT_NE(line.find("ELEC_PER_SEC 'many' is not a finite number"), std::string::npos) << line;
    EXPECT_EQ(r.output.find("extract start"), std::string::npos) << "it extracted first";
    EXPECT_FALSE(fs::exists(out));

    const std::string absent = dir_->file("badcolumns-absent.csv");
    const test::RunResult missing = extract(out, "--badcolumns " + absent);
    EXPECT_EQ(missing.exit_code, kExitInput) << missing.output;
    EXPECT_NE(test::last_line(missing.output).find(absent), std::string::npos);
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(BadColumnExtract, EmptyTableWritesTheSameFrame)
{
    const std::string empty = dir_->file("badcolumns-empty.csv");
    std::ofstream(empty) << "CAMERA,COLUMN,ELEC_PER_SEC\n";
    const std::string plain = dir_->file("frame-plain-2.fits");
    const std::string out = dir_->file("frame-empty.fits");
    ASSERT_EQ(extract(plain).exit_code, 0);
    const test::RunResult r = extract(out, "--badcolumns " + empty);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(read_frame(out).value().mask, read_frame(plain).value().mask);
    EXPECT_EQ(fiberstatus_of(out), fiberstatus_of(plain));
}

}  // namespace
}  // namespace ex2d
