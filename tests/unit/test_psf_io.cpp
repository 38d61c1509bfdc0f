// SPDX-License-Identifier: BSD-3-Clause
// write_psf / read_psf: exact round trip, and every failure is a Status naming the file.
#include <filesystem>
#include <fstream>
#include <random>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "test_paths.hpp"

namespace {

namespace fs = std::filesystem;

ex2d::LegendreTable random_table(std::mt19937_64& rng, int nfiber, int ncoef, double wmin,
                                 double wmax, double scale)
{
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    ex2d::LegendreTable t;
    t.wavemin = wmin;
    t.wavemax = wmax;
    t.nfiber = nfiber;
    t.ncoef = ncoef;
    for (int i = 0; i < nfiber * ncoef; ++i) t.coef.push_back(scale * u(rng));
    return t;
}

/// A small PSF (7 fibres, GH degrees 2x3, LEGDEG 2) with arbitrary full-precision numbers.
ex2d::GaussHermitePsf small_psf()
{
    std::mt19937_64 rng(12345);
    const int nfiber = 7;
    ex2d::GaussHermitePsf psf;
    psf.xtrace = random_table(rng, nfiber, 5, 5543.0, 7826.0, 100.0);
    psf.ytrace = random_table(rng, nfiber, 6, 5543.0, 7826.0, 1000.0);
    psf.hsizex = 7;
    psf.hsizey = 4;
    psf.ghdegx = 2;
    psf.ghdegy = 3;
    psf.npix_x = 4114;
    psf.npix_y = 4128;
    psf.fibermin = 25;
    psf.psferr = 0.037;
    const double wmin = 5543.25;
    const double wmax = 7827.0 + 1.0 / 3.0;
    psf.params["GHSIGX"] = random_table(rng, nfiber, 3, wmin, wmax, 1.0);
    psf.params["GHSIGY"] = random_table(rng, nfiber, 3, wmin, wmax, 1.0);
    for (int i = 0; i <= psf.ghdegx; ++i) {
        for (int j = 0; j <= psf.ghdegy; ++j) {
            std::string name = "GH-" + std::to_string(i) + "-" + std::to_string(j);
            psf.params[name] = random_table(rng, nfiber, 3, wmin, wmax, 0.1);
        }
    }
    psf.params["TAILAMP"] = random_table(rng, nfiber, 3, wmin, wmax, 0.0);
    psf.params["BUNDLE"] = random_table(rng, nfiber, 3, wmin, wmax, 10.0);
    psf.xtrace_header.set_string("IN_PSF", "SPECPROD/calibnight/20201220/psfnight-r5.fits");
    psf.psf_header.set_string("CAMERA", "r5");
    psf.psf_header.set_string("IN_PSF", "SPECPROD/calibnight/20201220/psfnight-r5.fits");
    return psf;
}

void expect_tables_equal(const ex2d::LegendreTable& a, const ex2d::LegendreTable& b,
                         const std::string& what)
{
    SCOPED_TRACE(what);
    EXPECT_EQ(a.wavemin, b.wavemin);
    EXPECT_EQ(a.wavemax, b.wavemax);
    EXPECT_EQ(a.nfiber, b.nfiber);
    EXPECT_EQ(a.ncoef, b.ncoef);
    EXPECT_EQ(a.coef, b.coef);  // bit-exact
}

void expect_psfs_equal(const ex2d::GaussHermitePsf& a, const ex2d::GaussHermitePsf& b)
{
    expect_tables_equal(a.xtrace, b.xtrace, "XTRACE");
    expect_tables_equal(a.ytrace, b.ytrace, "YTRACE");
    ASSERT_EQ(a.params.size(), b.params.size());
    for (const auto& [name, table] : a.params) {
        ASSERT_EQ(b.params.count(name), 1u) << name;
        expect_tables_equal(table, b.params.at(name), name);
    }
    EXPECT_EQ(a.hsizex, b.hsizex);
    EXPECT_EQ(a.hsizey, b.hsizey);
    EXPECT_EQ(a.ghdegx, b.ghdegx);
    EXPECT_EQ(a.ghdegy, b.ghdegy);
    EXPECT_EQ(a.npix_x, b.npix_x);
    EXPECT_EQ(a.npix_y, b.npix_y);
    EXPECT_EQ(a.fibermin, b.fibermin);
    EXPECT_EQ(a.psferr, b.psferr);
}

size_t count_files(const fs::path& dir)
{
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        (void)entry;
        ++n;
    }
    return n;
}

void truncate_copy(const std::string& from, const std::string& to)
{
    std::ifstream in(from, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(to, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size() / 2));
}

TEST(PsfIo, RoundTripIsExact)
{
    ex2d::test::TempDir dir;
    const ex2d::GaussHermitePsf psf = small_psf();
    const std::string path = dir.file("psf-r5-00000001.fits");
    ASSERT_TRUE(ex2d::write_psf(path, psf).is_ok());
    EXPECT_EQ(count_files(dir.path()), 1u);  // no temporary left
    auto back = ex2d::read_psf(path);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    expect_psfs_equal(psf, back.value());
    EXPECT_EQ(back.value().source, path);
    EXPECT_EQ(back.value().psf_header.get_string("IN_PSF").value(),
              "SPECPROD/calibnight/20201220/psfnight-r5.fits");
    EXPECT_EQ(back.value().psf_header.get_string("PSFVER").value(), "3");
    EXPECT_EQ(back.value().psf_header.get_int("LEGDEG").value(), 2);
    EXPECT_EQ(back.value().psf_header.get_int("NPARAMS").value(), 2 + 12 + 1);
    EXPECT_EQ(back.value().psf_header.get_int("FIBERMAX").value(), 31);
    EXPECT_EQ(back.value().xtrace_header.get_int("PSFVER").value(), 3);

    // A second round trip reproduces the headers card for card.
    const std::string again = dir.file("again.fits");
    ASSERT_TRUE(ex2d::write_psf(again, back.value()).is_ok());
    auto back2 = ex2d::read_psf(again);
    ASSERT_TRUE(back2.is_ok()) << back2.status().to_string();
    EXPECT_EQ(back2.value().psf_header.cards, back.value().psf_header.cards);
    EXPECT_EQ(back2.value().xtrace_header.cards, back.value().xtrace_header.cards);
}

TEST(PsfIo, RealPsfRoundTripIsExact)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto psf = ex2d::read_psf(path);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    ex2d::test::TempDir dir;
    const std::string copy = dir.file("copy.fits");
    ASSERT_TRUE(ex2d::write_psf(copy, psf.value()).is_ok());
    auto back = ex2d::read_psf(copy);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    expect_psfs_equal(psf.value(), back.value());
    EXPECT_EQ(back.value().params.size(), 59u);
    EXPECT_EQ(back.value().psf_header.get_int("NPARAMS").value(), 57);
    EXPECT_EQ(back.value().psf_header.get_double("MEANDX").value(), -0.09100032995670529);
}

TEST(PsfIo, MissingFileIsAnIoError)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("nope.fits");
    auto r = ex2d::read_psf(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error);
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

TEST(PsfIo, TruncatedFileIsAnIoError)
{
    ex2d::test::TempDir dir;
    const std::string full = dir.file("full.fits");
    const std::string cut = dir.file("cut.fits");
    ASSERT_TRUE(ex2d::write_psf(full, small_psf()).is_ok());
    truncate_copy(full, cut);
    auto r = ex2d::read_psf(cut);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cut), std::string::npos) << r.status().message();
}

TEST(PsfIo, TruncatedRealFileIsAnIoError)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00067784.fits");
    ex2d::test::TempDir dir;
    const std::string cut = dir.file("cut.fits");
    truncate_copy(path, cut);
    auto r = ex2d::read_psf(cut);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cut), std::string::npos);
}

TEST(PsfIo, PreprocFileIsAFormatError)
{
    ex2d::test::TempDir dir;
    ex2d::PreprocImage img;
    img.ny = 4;
    img.nx = 3;
    img.image.assign(12, 1.0);
    img.ivar.assign(12, 1.0);
    img.mask.assign(12, 0);
    const std::string path = dir.file("preproc-r0-00000001.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, img).is_ok());
    auto r = ex2d::read_psf(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_EQ(r.status().message(),
              path + ": no HDU named XTRACE (not a PSFVER 3 Gauss-Hermite PSF?)");
}

/// Writes XTRACE and YTRACE images only, as a PSF file without its PSF table.
void write_traces_only(const std::string& path)
{
    fitsfile* f = nullptr;
    int status = 0;
    long naxes[2] = {3, 2};
    double coef[6] = {1, 2, 3, 4, 5, 6};
    fits_create_file(&f, path.c_str(), &status);
    for (const char* name : {"XTRACE", "YTRACE"}) {
        fits_create_img(f, DOUBLE_IMG, 2, naxes, &status);
        fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>(name), nullptr, &status);
        fits_write_img(f, TDOUBLE, 1, 6, coef, &status);
    }
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
}

TEST(PsfIo, MissingPsfHduIsAFormatError)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("traces.fits");
    write_traces_only(path);
    auto r = ex2d::read_psf(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_EQ(r.status().message(),
              path + ": no HDU named PSF (not a PSFVER 3 Gauss-Hermite PSF?)");
}

/// Rewrites one keyword of the PSF HDU of an existing file.
void update_psf_key(const std::string& path, const char* key, const char* value)
{
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_file(&f, path.c_str(), READWRITE, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("PSF"), 0, &status);
    fits_update_key(f, TSTRING, key, const_cast<char*>(value), nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
}

TEST(PsfIo, WrongPsfTypeOrVersionIsAFormatError)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("psf.fits");
    ASSERT_TRUE(ex2d::write_psf(path, small_psf()).is_ok());
    update_psf_key(path, "PSFTYPE", "GAUSS");
    auto r = ex2d::read_psf(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_NE(r.status().message().find(path + ": PSFTYPE is 'GAUSS'"), std::string::npos);

    ASSERT_TRUE(ex2d::write_psf(path, small_psf()).is_ok());  // replaces the file
    update_psf_key(path, "PSFVER", "2");
    r = ex2d::read_psf(path);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_NE(r.status().message().find(path + ": PSFVER 2"), std::string::npos);
}

TEST(PsfIo, WriteIntoMissingFolderFailsCleanly)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("no/such/folder/psf.fits");
    ex2d::Status s = ex2d::write_psf(path, small_psf());
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), ex2d::StatusCode::io_error);
    EXPECT_NE(s.message().find(path), std::string::npos);
    EXPECT_EQ(count_files(dir.path()), 0u);
}

}  // namespace
