// SPDX-License-Identifier: BSD-3-Clause
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/air_vacuum.hpp"
#include "ex2d/fibermap_columns.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

class SimulateTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { psf_ = new GaussHermitePsf(make_synthetic_psf(Arm::r, 0)); }
    static void TearDownTestSuite()
    {
        delete psf_;
        psf_ = nullptr;
    }

    /// A few fibres in the middle of the CCD, away from its left and right edges.
    static SimulationOptions small_options()
    {
        SimulationOptions opt;
        opt.seed = 11;
        opt.specmin = 240;
        opt.nspec = 5;
        opt.n_bright_stars = 1;
        opt.n_cosmics = 0;
        opt.n_bad_columns = 0;
        return opt;
    }

    static SimulatedFrame simulate(const SimulationOptions& opt)
    {
        auto result = simulate_frame(*psf_, opt);
        EXPECT_TRUE(result.is_ok()) << result.status().to_string();
        return std::move(result).value();
    }

    static GaussHermitePsf* psf_;
};

GaussHermitePsf* SimulateTest::psf_ = nullptr;

TEST_F(SimulateTest, SameSeedSameFrameOtherSeedOtherFrame)
{
    SimulationOptions opt = small_options();
    opt.n_cosmics = 5;
    opt.n_bad_columns = 1;
    const SimulatedFrame a = simulate(opt);
    const SimulatedFrame b = simulate(opt);
    ASSERT_EQ(a.preproc.image.size(), size_t(4128) * 4114);
    EXPECT_EQ(a.preproc.image, b.preproc.image);
    EXPECT_EQ(a.preproc.mask, b.preproc.mask);
    EXPECT_EQ(a.truth.photons, b.truth.photons);

    opt.seed = 12;
    const SimulatedFrame c = simulate(opt);
    long differing = 0;
    for (size_t i = 0; i < a.preproc.image.size(); ++i) {
        differing += a.preproc.image[i] != c.preproc.image[i];
    }
    EXPECT_GT(differing, long(a.preproc.image.size() / 2));
    EXPECT_NE(a.truth.photons, c.truth.photons);
}

TEST_F(SimulateTest, NoiselessImageHoldsExactlyThePhotonsLandingOnTheCcd)
{
    SimulationOptions opt = small_options();
    opt.noise = false;
    const SimulatedFrame frame = simulate(opt);
    // Default grid = the PSF domain, which the photon grid cannot exceed: the truth holds all
    // the light of the frame.
    const LegendreTable& sig = psf_->param("GHSIGX");
    const long nwave = long(std::ceil((sig.wavemax + 0.4 - sig.wavemin) / 0.8));
    ASSERT_EQ(long(frame.truth.wave.size()), nwave);
    ASSERT_EQ(frame.truth.nspec, 5);
    ASSERT_EQ(frame.truth.photons.size(), size_t(5 * nwave));

    double expected_total = 0;
    for (int s = 0; s < opt.nspec; ++s) {
        for (long w = 0; w < nwave; ++w) {
            const Spot spot = evaluate_spot(*psf_, opt.specmin + s, frame.truth.wave[w]);
            double on_ccd = 0;
            for (int iy = 0; iy < psf_->stamp_ny(); ++iy) {
                const int row = spot.yc + iy;
                if (row < 0 || row >= psf_->npix_y) continue;
                for (int ix = 0; ix < psf_->stamp_nx(); ++ix) {
                    on_ccd += spot.values[iy * psf_->stamp_nx() + ix];
                }
            }
            expected_total += frame.truth.photons[s * nwave + w] * on_ccd;
        }
    }
    double image_total = 0;
    for (double v : frame.preproc.image) image_total += v;
    EXPECT_GT(expected_total, 1e5);
    EXPECT_NEAR(image_total / expected_total, 1.0, 1e-9);
}

TEST_F(SimulateTest, TruthGridFollowsNumpyArangeAndLightCoversTheCcd)
{
    SimulationOptions opt = small_options();
    opt.noise = false;
    opt.wmin = 5760.0;
    opt.wmax = 7620.0;
    opt.dw = 0.8;
    const SimulatedFrame frame = simulate(opt);
    ASSERT_EQ(frame.truth.wave.size(), 2326u);
    const double delta = (5760.0 + 0.8) - 5760.0;
    for (size_t i = 0; i < frame.truth.wave.size(); ++i) {
        ASSERT_EQ(frame.truth.wave[i], 5760.0 + double(i) * delta);
    }
    EXPECT_NEAR(frame.truth.wave.back(), 7620.0, 1e-6);
    // Rows below the trace at 5760 A and above it at 7620 A are lit by photons of the
    // extended grid, along the central fibre's column.
    const int column = int(std::lround(psf_->xtrace.eval(242, 6000.0)));
    const int low_row = int(psf_->ytrace.eval(242, 5760.0)) - 100;
    const int high_row = int(psf_->ytrace.eval(242, 7620.0)) + 100;
    ASSERT_GT(low_row, 0);
    ASSERT_LT(high_row, psf_->npix_y);
    EXPECT_GT(frame.preproc.image[size_t(low_row) * psf_->npix_x + column], 1.0);
    EXPECT_GT(frame.preproc.image[size_t(high_row) * psf_->npix_x + column], 1.0);
    // Columns far from the lit fibres stay dark.
    EXPECT_EQ(frame.preproc.image[size_t(2000) * psf_->npix_x + 200], 0.0);
}

TEST_F(SimulateTest, IvarIsTheModelVariance)
{
    SimulationOptions opt = small_options();
    opt.read_noise = 2.5;
    opt.noise = false;
    const SimulatedFrame model = simulate(opt);
    opt.noise = true;
    const SimulatedFrame noisy = simulate(opt);
    const PreprocImage& m = model.preproc;
    ASSERT_EQ(m.readnoise.size(), m.image.size());
    long lit = 0;
    for (size_t i = 0; i < m.image.size(); ++i) {
        ASSERT_NEAR(m.ivar[i] * (2.5 * 2.5 + m.image[i]), 1.0, 1e-12) << "pixel " << i;
        ASSERT_EQ(m.readnoise[i], 2.5);
        lit += m.image[i] > 1.0;
    }
    EXPECT_GT(lit, 10000);
    EXPECT_EQ(noisy.preproc.ivar, m.ivar);
    EXPECT_NE(noisy.preproc.image, m.image);
    // Dark pixels: pure read noise, standard deviation 2.5.
    double sum2 = 0;
    long n = 0;
    for (int row = 1000; row < 1100; ++row) {
        for (int col = 0; col < 80; ++col) {
            const double v = noisy.preproc.image[size_t(row) * noisy.preproc.nx + col];
            sum2 += v * v;
            ++n;
        }
    }
    EXPECT_NEAR(std::sqrt(sum2 / n), 2.5, 0.1);
}

TEST_F(SimulateTest, MaskHasBadColumnsAndCosmics)
{
    SimulationOptions opt = small_options();
    opt.n_bad_columns = 2;
    opt.n_cosmics = 10;
    const SimulatedFrame frame = simulate(opt);
    const PreprocImage& img = frame.preproc;
    const double x_lo = psf_->xtrace.eval(opt.specmin, 6600.0);
    const double x_hi = psf_->xtrace.eval(opt.specmin + opt.nspec - 1, 6600.0);
    long bad = 0, cosmic = 0, other = 0;
    for (int row = 0; row < img.ny; ++row) {
        for (int col = 0; col < img.nx; ++col) {
            const std::uint32_t m = img.mask[size_t(row) * img.nx + col];
            if (m & 1u) {
                ++bad;
                EXPECT_GE(col, std::floor(x_lo));
                EXPECT_LE(col, std::ceil(x_hi));
            }
            if (m & 16u) {
                ++cosmic;
                EXPECT_GE(img.image[size_t(row) * img.nx + col], 400.0);
            }
            other += (m & ~17u) != 0;
        }
    }
    EXPECT_GE(bad, img.ny / 4);
    EXPECT_LE(bad, 2 * (img.ny / 2 + 1));
    EXPECT_GE(cosmic, 10);
    EXPECT_LE(cosmic, 100);
    EXPECT_EQ(other, 0);
}

TEST_F(SimulateTest, HeaderAndFibermap)
{
    SimulationOptions opt = small_options();
    opt.camera = "r3";
    opt.expid = 4242;
    opt.night = 20261121;
    const SimulatedFrame frame = simulate(opt);
    const FitsHeader& h = frame.preproc.header;
    EXPECT_EQ(h.get_string("CAMERA").value_or(""), "r3");
    EXPECT_EQ(h.get_int("EXPID").value_or(0), 4242);
    EXPECT_EQ(h.get_int("NIGHT").value_or(0), 20261121);
    EXPECT_EQ(h.get_string("FLAVOR").value_or(""), "science");
    EXPECT_EQ(h.get_int("SPECGRPH").value_or(-1), 3);
    EXPECT_EQ(h.get_string("CCDSIZE").value_or(""), "4114,4128");
    EXPECT_EQ(h.get_string("DATE-OBS").value_or(""), "2026-11-22T06:00:00.000");
    EXPECT_NEAR(h.get_double("MJD-OBS").value_or(0), 61366.25, 1e-9);

    const FitsTableBlob& fibermap = frame.preproc.fibermap;
    ASSERT_FALSE(fibermap.empty());
    EXPECT_EQ(fibermap.nrows, 500);
    const auto fiber = read_int_column(fibermap, "FIBER");
    ASSERT_TRUE(fiber.is_ok()) << fiber.status().to_string();
    ASSERT_EQ(fiber.value().size(), 500u);
    for (int i = 0; i < 500; ++i) EXPECT_EQ(fiber.value()[i], 1500 + i);
    const auto target_id = read_int_column(fibermap, "TARGETID");
    ASSERT_TRUE(target_id.is_ok()) << target_id.status().to_string();
    EXPECT_LT(target_id.value()[0], 0);            // unlit
    EXPECT_GT(target_id.value()[opt.specmin], 0);  // lit
    const auto petal = read_int_column(fibermap, "PETAL_LOC");
    ASSERT_TRUE(petal.is_ok()) << petal.status().to_string();
    EXPECT_EQ(petal.value()[499], 3);
}

TEST_F(SimulateTest, FibermapHasDesispecMainSurveyColumnsWithUnits)
{
    SimulationOptions opt = small_options();
    opt.nspec = 40;  // enough lit fibres for sky fibres among them
    const SimulatedFrame frame = simulate(opt);
    std::vector<std::uint8_t> bytes = frame.preproc.fibermap.fits_bytes;
    void* buffer = bytes.data();
    size_t size = bytes.size();
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_memfile(&f, "fibermap", READONLY, &buffer, &size, 0, nullptr, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &status);
    int ncols = 0;
    fits_get_num_cols(f, &ncols, &status);
    ASSERT_EQ(status, 0);
    std::vector<std::string> expected;
    for (const FibermapColumn& c : builtin_fibermap_columns().columns) {
        if (c.name.rfind("CMX_", 0) != 0 && c.name.rfind("SV", 0) != 0) expected.push_back(c.name);
    }
    ASSERT_EQ(ncols, int(expected.size()));  // 71, desispec's main-survey fibermap
    for (int i = 1; i <= ncols; ++i) {
        char name[FLEN_VALUE] = "", unit[FLEN_VALUE] = "", comment[FLEN_COMMENT] = "";
        fits_read_key(f, TSTRING, ("TTYPE" + std::to_string(i)).c_str(), name, comment, &status);
        ASSERT_EQ(name, expected[i - 1]) << "column " << i;
        const FibermapColumn* known = builtin_fibermap_columns().find(name);
        EXPECT_EQ(comment, known->description) << name;
        int unit_status = 0;
        fits_read_key(f, TSTRING, ("TUNIT" + std::to_string(i)).c_str(), unit, nullptr,
                      &unit_status);
        fits_clear_errmsg();
        EXPECT_EQ(unit, known->unit) << name;
    }
    char objtype_text[500][4];
    char* objtype[500];
    char desiname_text[500][23];
    char* desiname[500];
    for (int i = 0; i < 500; ++i) {
        objtype[i] = objtype_text[i];
        desiname[i] = desiname_text[i];
    }
    int objtype_col = 0, desiname_col = 0;
    fits_get_colnum(f, CASEINSEN, const_cast<char*>("OBJTYPE"), &objtype_col, &status);
    fits_get_colnum(f, CASEINSEN, const_cast<char*>("DESINAME"), &desiname_col, &status);
    fits_read_col_str(f, objtype_col, 1, 1, 500, nullptr, objtype, nullptr, &status);
    fits_read_col_str(f, desiname_col, 1, 1, 500, nullptr, desiname, nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    const auto desi_target = read_int_column(frame.preproc.fibermap, "DESI_TARGET");
    ASSERT_TRUE(desi_target.is_ok()) << desi_target.status().to_string();
    int sky = 0;
    for (int row = 0; row < 500; ++row) {
        const bool lit = row >= opt.specmin && row < opt.specmin + opt.nspec;
        const std::string type = objtype[row];
        if (!lit) {
            EXPECT_EQ(type, "NON") << row;
            continue;
        }
        EXPECT_TRUE(type == "SKY" || type == "TGT") << row;
        EXPECT_EQ(std::string(desiname[row]).size(), 22u) << row;
        EXPECT_EQ(std::string(desiname[row]).rfind("DESI J", 0), 0u) << row;
        const bool sky_bit = (desi_target.value()[row] >> 32) & 1;
        EXPECT_EQ(sky_bit, type == "SKY") << row;  // desi_mask SKY
        sky += type == "SKY";
    }
    EXPECT_GT(sky, 0);
}

// An arc: the lamp's lines in every lit fibre, each with its electrons (times the fibre's
// throughput, within 5%), and nothing between them.
TEST_F(SimulateTest, ArcFrameHoldsTheLampLinesOnly)
{
    SimulationOptions opt = small_options();
    opt.arc = true;
    const SimulatedFrame frame = simulate(opt);
    EXPECT_EQ(frame.preproc.header.get_string("FLAVOR").value_or(""), "arc");
    EXPECT_EQ(frame.preproc.header.get_string("OBSTYPE").value_or(""), "ARC");
    const SimulationTruth& truth = frame.truth;
    const size_t nwave = truth.wave.size();
    int lines_seen = 0;
    for (const ReferenceLine& line : simulated_arc_lines()) {
        if (line.wave < truth.wave.front() + 5 || line.wave > truth.wave.back() - 5) continue;
        ++lines_seen;
        for (int s = 0; s < truth.nspec; ++s) {
            double near = 0;
            for (size_t i = 0; i < nwave; ++i) {
                if (std::fabs(truth.wave[i] - line.wave) < 4.0) {
                    near += truth.photons[size_t(s) * nwave + i];
                }
            }
            EXPECT_NEAR(near / line.strength, 1.0, 0.051) << line.wave << " fibre " << s;
        }
    }
    EXPECT_GT(lines_seen, 30);
    const double dark = 0.5 * (air_to_vacuum(6717.043) + air_to_vacuum(6929.467));
    for (size_t i = 0; i < nwave; ++i) {
        if (std::fabs(truth.wave[i] - dark) >= 50) continue;
        for (int s = 0; s < truth.nspec; ++s) {
            EXPECT_EQ(truth.photons[size_t(s) * nwave + i], 0.0) << truth.wave[i];
        }
    }
}

TEST_F(SimulateTest, RejectsBadOptions)
{
    SimulationOptions opt = small_options();
    opt.specmin = 498;
    EXPECT_EQ(simulate_frame(*psf_, opt).status().code(), StatusCode::invalid_argument);
    opt = small_options();
    opt.camera = "q1";
    EXPECT_EQ(simulate_frame(*psf_, opt).status().code(), StatusCode::invalid_argument);
    opt = small_options();
    opt.dw = 0;
    EXPECT_EQ(simulate_frame(*psf_, opt).status().code(), StatusCode::invalid_argument);
    opt = small_options();
    opt.flat = true;
    opt.arc = true;
    EXPECT_EQ(simulate_frame(*psf_, opt).status().code(), StatusCode::invalid_argument);
    opt = small_options();
    opt.arc = true;
    opt.arc_level = -1;
    EXPECT_EQ(simulate_frame(*psf_, opt).status().code(), StatusCode::invalid_argument);
}

// --sky-spectrum: a tabulated sky replaces ex2d's lines; each sample lands where the
// spectrum has it (the centroid of its bins within 0.001 A), and a spectrum without flux on
// the CCD, or with a row missing, is refused.
TEST_F(SimulateTest, TabulatedSkyLaysItsLinesWhereTheSpectrumHasThem)
{
    SimulationOptions opt = small_options();
    opt.wmin = 6960;
    opt.wmax = 7040;
    const SimulatedFrame listed = simulate(opt);
    opt.sky_spectrum_wave = {7000.03};
    opt.sky_spectrum_flux = {1.0};
    const SimulatedFrame tabulated = simulate(opt);
    const auto& wave = tabulated.truth.wave;
    const size_t nwave = wave.size();
    for (int s = 0; s < opt.nspec; ++s) {
        double sum = 0, moment = 0;
        for (size_t i = 0; i < nwave; ++i) {
            // ex2d's own lines have none within 6926-7277 A: the difference is the new line.
            const double d = tabulated.truth.photons[size_t(s) * nwave + i] -
                             listed.truth.photons[size_t(s) * nwave + i];
            if (std::abs(wave[i] - 7000.03) > 5) {
                EXPECT_NEAR(d, 0.0, 1e-6) << "fibre " << s << " at " << wave[i];
                continue;
            }
            sum += d;
            moment += d * wave[i];
        }
        ASSERT_GT(sum, 100.0) << "fibre " << s;
        EXPECT_NEAR(moment / sum, 7000.03, 1e-3) << "fibre " << s;
    }

    opt.sky_spectrum_flux = {1.0, 2.0};
    auto mismatched = simulate_frame(*psf_, opt);
    ASSERT_FALSE(mismatched.is_ok());
    EXPECT_NE(mismatched.status().message().find("1 wavelengths and 2 fluxes"), std::string::npos)
        << mismatched.status().message();
    opt.sky_spectrum_wave = {3000.0};
    opt.sky_spectrum_flux = {1.0};
    auto outside = simulate_frame(*psf_, opt);
    ASSERT_FALSE(outside.is_ok());
    EXPECT_NE(outside.status().message().find("no positive flux within"), std::string::npos)
        << outside.status().message();
}

TEST(Truth, FileRoundTrip)
{
    SimulationTruth truth;
    truth.specmin = 25;
    truth.nspec = 3;
    for (int i = 0; i < 7; ++i) truth.wave.push_back(5760.0 + i * 0.8000000000000001);
    for (int i = 0; i < 21; ++i) truth.photons.push_back(std::sqrt(2.0) * i - 3.25);
    test::TempDir dir;
    const std::string path = dir.file("truth.fits");
    const Status written = write_truth(path, truth);
    ASSERT_TRUE(written.is_ok()) << written.to_string();
    const auto read = read_truth(path);
    ASSERT_TRUE(read.is_ok()) << read.status().to_string();
    EXPECT_EQ(read.value().specmin, 25);
    EXPECT_EQ(read.value().nspec, 3);
    EXPECT_EQ(read.value().wave, truth.wave);
    EXPECT_EQ(read.value().photons, truth.photons);
    // The temporary file is gone after the rename.
    long files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        files += entry.is_regular_file();
    }
    EXPECT_EQ(files, 1);
}

TEST(Truth, ErrorsNameTheFile)
{
    test::TempDir dir;
    const std::string missing = dir.file("missing.fits");
    const auto absent = read_truth(missing);
    ASSERT_FALSE(absent.is_ok());
    EXPECT_EQ(absent.status().code(), StatusCode::io_error);
    EXPECT_NE(absent.status().message().find(missing), std::string::npos);

    SimulationTruth inconsistent;
    inconsistent.nspec = 2;
    inconsistent.wave = {1.0, 2.0};
    inconsistent.photons = {1.0};
    const Status status = write_truth(dir.file("bad.fits"), inconsistent);
    EXPECT_EQ(status.code(), StatusCode::invalid_argument);
    EXPECT_NE(status.message().find("bad.fits"), std::string::npos);
}

}  // namespace
}  // namespace ex2d
