// SPDX-License-Identifier: BSD-3-Clause
// write_frame / write_model_image / read_frame: the exact desispec frame layout,
// checksums, FIBERMAP row selection, SCORES values and atomic writes.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "test_paths.hpp"
#include "fits_fixtures.hpp"

namespace {

namespace fs = std::filesystem;

constexpr int kNspec = 3;
constexpr int kNwave = 20;
constexpr int kNdiag = 11;
constexpr int kSpecmin = 2;

/// FIBERMAP of petal 3 with `nrows` rows: FIBER = 1500 + row, TARGETID = 1000 + row.
ex2d::FitsTableBlob make_fibermap(int nrows)
{
    return ex2d::test::make_fibermap_blob(nrows, 1500, 1000, 80605, false);
}

ex2d::ExtractedFrame small_frame()
{
    ex2d::ExtractedFrame fr;
    fr.specmin = kSpecmin;
    fr.nspec = kNspec;
    fr.nwave = kNwave;
    fr.ndiag = kNdiag;
    fr.psferr = 0.01;
    for (int j = 0; j < kNwave; ++j) fr.wave.push_back(6000.0 + 0.8 * j);
    for (int i = 0; i < kNspec; ++i) {
        for (int j = 0; j < kNwave; ++j) {
            fr.flux.push_back(10.0 * (i + 1) + 0.5 * j);
            fr.ivar.push_back(4.0);
            fr.mask.push_back(j == 3 ? 0x80000001u : std::uint32_t(j % 3));
            fr.chi2pix.push_back(1.0 + 0.125 * j);
        }
    }
    fr.ivar[0] = -2.0;  // SCORES treats negative ivar as 0
    for (int i = 0; i < kNspec * kNdiag * kNwave; ++i) fr.resolution.push_back(0.001 * (i % 97));
    return fr;
}

ex2d::FrameProvenance small_provenance()
{
    ex2d::FrameProvenance p;
    p.image_header.set_string("EXTNAME", "IMAGE");
    p.image_header.set_string("CAMERA", "r3");
    p.image_header.set_string("FLAVOR", "science");
    p.image_header.set_int("EXPID", 67784);
    p.image_header.set_string("BUNIT", "electron");
    p.image_header.set_string("CHECKSUM", "stale");
    p.image_header.set_string("DEPNAM00", "python");
    p.image_header.set_string("DEPVER00", "3.10");
    p.image_header.set_string("DEPNAM01", "desispec");
    p.image_header.set_string("DEPVER01", "0.60");
    p.fibermap = make_fibermap(10);
    p.psf_header.set_string("IN_PSF", "SPECPROD/calibnight/20201220/psfnight-r3-20201220.fits");
    p.input_image = "SPECPROD/preproc/20201220/00067784/preproc-r3-00067784.fits";
    p.input_psf = "SPECPROD/exposures/20201220/00067784/psf-r3-00067784.fits";
    p.options.wmin = 6000.0;
    p.options.wmax = 6015.2;
    p.options.dw = 0.8;
    p.options.specmin = kSpecmin;
    p.options.nspec = kNspec;
    return p;
}

size_t count_files(const fs::path& dir)
{
    return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

/// Raw header access to a written file with cfitsio.
class FitsReader {
public:
    explicit FitsReader(const std::string& path)
    {
        fits_open_file(&f_, path.c_str(), READONLY, &status_);
    }
    ~FitsReader()
    {
        int st = 0;
        if (f_) fits_close_file(f_, &st);
    }
    int num_hdus()
    {
        int n = 0;
        fits_get_num_hdus(f_, &n, &status_);
        return n;
    }
    void move(int hdu)
    {
        int type = 0;
        fits_movabs_hdu(f_, hdu, &type, &status_);
    }
    std::string str(const char* key)
    {
        char value[FLEN_VALUE] = {0};
        int st = 0;
        if (fits_read_key(f_, TSTRING, key, value, nullptr, &st)) return "<absent>";
        return value;
    }
    double num(const char* key)
    {
        double v = std::nan("");
        int st = 0;
        fits_read_key(f_, TDOUBLE, key, &v, nullptr, &st);
        return v;
    }
    std::string comment(const char* key)
    {
        char value[FLEN_VALUE] = {0};
        char comm[FLEN_COMMENT] = {0};
        int st = 0;
        fits_read_key(f_, TSTRING, key, value, comm, &st);
        return comm;
    }
    std::vector<double> column(int col, int nrows)
    {
        std::vector<double> v(size_t(nrows), 0.0);
        int anynul = 0;
        fits_read_col(f_, TDOUBLE, col, 1, 1, nrows, nullptr, v.data(), &anynul, &status_);
        return v;
    }
    void verify_checksums(int& dataok, int& hduok)
    {
        fits_verify_chksum(f_, &dataok, &hduok, &status_);
    }
    int status() const { return status_; }

private:
    fitsfile* f_ = nullptr;
    int status_ = 0;
};

TEST(FrameIo, LayoutMatchesDesispec)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame-r3-00067784.fits");
    ex2d::Status s = ex2d::write_frame(path, small_frame(), small_provenance());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(count_files(dir.path()), 1u);  // the temporary was renamed

    FitsReader r(path);
    ASSERT_EQ(r.num_hdus(), 8);
    const char* names[] = {"FLUX",       "IVAR",     "MASK",    "WAVELENGTH",
                           "RESOLUTION", "FIBERMAP", "CHI2PIX", "SCORES"};
    const double bitpix[] = {-32, -32, 32, -64, -32, 8, -32, 8};
    for (int h = 1; h <= 8; ++h) {
        SCOPED_TRACE(names[h - 1]);
        r.move(h);
        EXPECT_EQ(r.str("EXTNAME"), names[h - 1]);
        EXPECT_EQ(r.num("BITPIX"), bitpix[h - 1]);
        EXPECT_NE(r.str("CHECKSUM"), "<absent>");
        EXPECT_NE(r.str("DATASUM"), "<absent>");
        int dataok = 0;
        int hduok = 0;
        r.verify_checksums(dataok, hduok);
        EXPECT_EQ(dataok, 1);
        EXPECT_EQ(hduok, 1);
    }
    r.move(1);
    EXPECT_EQ(r.num("NAXIS1"), kNwave);
    EXPECT_EQ(r.num("NAXIS2"), kNspec);
    EXPECT_EQ(r.str("BUNIT"), "electron/Angstrom");
    r.move(2);
    EXPECT_EQ(r.str("BUNIT"), "<absent>");
    r.move(3);
    EXPECT_EQ(r.num("BZERO"), 2147483648.0);
    EXPECT_EQ(r.num("BSCALE"), 1.0);
    r.move(4);
    EXPECT_EQ(r.num("NAXIS"), 1);
    EXPECT_EQ(r.num("NAXIS1"), kNwave);
    EXPECT_EQ(r.str("BUNIT"), "Angstrom");
    r.move(5);
    EXPECT_EQ(r.num("NAXIS"), 3);
    EXPECT_EQ(r.num("NAXIS1"), kNwave);
    EXPECT_EQ(r.num("NAXIS2"), kNdiag);
    EXPECT_EQ(r.num("NAXIS3"), kNspec);
    r.move(6);
    EXPECT_EQ(r.num("NAXIS2"), kNspec);
    EXPECT_EQ(r.num("TILEID"), 80605);  // the fibermap header travels with it
    EXPECT_EQ(r.column(2, kNspec), (std::vector<double>{1502, 1503, 1504}));
    EXPECT_EQ(r.column(1, kNspec), (std::vector<double>{1002, 1003, 1004}));
    EXPECT_EQ(r.status(), 0);
}

TEST(FrameIo, FluxHeaderCarriesProvenanceAndGeometry)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    ASSERT_TRUE(ex2d::write_frame(path, small_frame(), small_provenance()).is_ok());
    auto fr = ex2d::read_frame(path);
    ASSERT_TRUE(fr.is_ok()) << fr.status().to_string();
    const ex2d::FitsHeader& h = fr.value().header;
    EXPECT_EQ(h.get_string("EXTNAME").value(), "FLUX");
    EXPECT_EQ(h.get_string("FLAVOR").value(), "science");
    EXPECT_EQ(h.get_string("CAMERA").value(), "r3");
    EXPECT_EQ(h.get_int("EXPID").value(), 67784);
    EXPECT_EQ(h.get_int("NSPEC").value(), kNspec);
    EXPECT_EQ(h.get_double("WAVEMIN").value(), 6000.0);
    EXPECT_EQ(h.get_double("WAVEMAX").value(), 6015.2);
    EXPECT_EQ(h.get_double("WAVESTEP").value(), 0.8);
    EXPECT_EQ(h.get_string("SPECTER").value(), std::string("ex2d ") + EX2D_VERSION);
    EXPECT_EQ(h.get_string("IN_PSF").value(),
              "SPECPROD/exposures/20201220/00067784/psf-r3-00067784.fits");
    EXPECT_EQ(h.get_string("IN_IMG").value(),
              "SPECPROD/preproc/20201220/00067784/preproc-r3-00067784.fits");
    EXPECT_EQ(h.get_string("ORIG_PSF").value(),
              "SPECPROD/calibnight/20201220/psfnight-r3-20201220.fits");
    EXPECT_EQ(h.get_int("FIBERMIN").value(), 1502);
    EXPECT_EQ(h.get_string("BUNIT").value(), "electron/Angstrom");
    EXPECT_EQ(h.get_string("DEPNAM00").value(), "python");
    EXPECT_EQ(h.get_string("DEPNAM01").value(), "desispec");
    EXPECT_EQ(h.get_string("DEPNAM02").value(), "ex2d");
    EXPECT_EQ(h.get_string("DEPVER02").value(), EX2D_VERSION);
    EXPECT_EQ(h.get_string("DEPNAM03").value(), "cfitsio");
    EXPECT_EQ(h.get_string("DEPVER03").value().substr(0, 2), "4.");
    EXPECT_EQ(h.get_string("DEPNAM04").value(), "erfa");
    EXPECT_FALSE(h.has("DEPNAM05"));
    EXPECT_EQ(h.get_int("EXBUNDLE").value(), 25);
    EXPECT_EQ(h.get_int("EXNSUBB").value(), 5);
    EXPECT_EQ(h.get_int("EXNWSTEP").value(), 50);
    EXPECT_EQ(h.get_int("EXWAVPAD").value(), 10);
    EXPECT_EQ(h.get_double("EXWPADFR").value(), 0.2);
    EXPECT_EQ(h.get_double("EXPPADFR").value(), 0.8);
    EXPECT_EQ(h.get_double("EXREGUL").value(), 0.0);
    EXPECT_EQ(h.get_double("EXPSFERR").value(), 0.01);
    EXPECT_EQ(h.get_double("EXMINWT").value(), 1e-4);
    EXPECT_EQ(h.get_double("EXDFLOOR").value(), 1e-15);
    EXPECT_EQ(h.get_double("EXEIGCLP").value(), 1e-14);
    // The stale CHECKSUM of the input header is not copied; the new one is valid (above).
    EXPECT_NE(h.get_string("CHECKSUM").value(), "stale");
}

TEST(FrameIo, ScoresMatchHandComputedValues)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    ASSERT_TRUE(ex2d::write_frame(path, small_frame(), small_provenance()).is_ok());
    FitsReader r(path);
    r.move(8);
    EXPECT_EQ(r.str("TTYPE1"), "SUM_RAW_COUNT_R");
    EXPECT_EQ(r.str("TTYPE2"), "MEDIAN_RAW_COUNT_R");
    EXPECT_EQ(r.str("TTYPE3"), "MEDIAN_RAW_SNR_R");
    EXPECT_EQ(r.comment("TTYPE1"), "sum counts in wave. range 5800,7600A");
    EXPECT_EQ(r.comment("TTYPE2"), "median counts/A in wave. range 5800,7600A");
    EXPECT_EQ(r.comment("TTYPE3"), "median SNR/sqrt(A) in wave. range 5800,7600A");
    EXPECT_EQ(r.str("TFORM1"), "D");
    std::vector<double> sum = r.column(1, kNspec);
    std::vector<double> median_count = r.column(2, kNspec);
    std::vector<double> median_snr = r.column(3, kNspec);
    ASSERT_EQ(r.status(), 0);
    // flux = 10*(i+1) + 0.5*j over the 20 bins, all inside [5800, 7600); dwave = 0.8;
    // medians of 20 increasing values are the mean of bins 9 and 10; ivar = 4.
    const double expected_sum[] = {295.0, 495.0, 695.0};
    for (int i = 0; i < kNspec; ++i) {
        SCOPED_TRACE(i);
        const double mid = 10.0 * (i + 1) + 0.5 * 9.5;  // (flux[9] + flux[10]) / 2
        EXPECT_NEAR(sum[size_t(i)], expected_sum[i], 1e-12);
        EXPECT_NEAR(median_count[size_t(i)], mid / 0.8, 1e-9);
        EXPECT_NEAR(median_snr[size_t(i)], 2.0 * mid / std::sqrt(0.8), 1e-9);
    }
}

TEST(FrameIo, ReadFrameRoundTrip)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    const ex2d::ExtractedFrame frame = small_frame();
    ASSERT_TRUE(ex2d::write_frame(path, frame, small_provenance()).is_ok());
    auto r = ex2d::read_frame(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const ex2d::FrameFile& f = r.value();
    EXPECT_EQ(f.hdu_names,
              (std::vector<std::string>{"FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION",
                                        "FIBERMAP", "CHI2PIX", "SCORES"}));
    EXPECT_EQ(f.nspec, kNspec);
    EXPECT_EQ(f.nwave, kNwave);
    EXPECT_EQ(f.ndiag, kNdiag);
    auto as_float = [](const auto& v) {
        std::vector<double> out;
        out.reserve(v.size());
        for (double x : v) out.push_back(double(float(x)));
        return out;
    };
    EXPECT_EQ(f.flux, as_float(frame.flux));
    EXPECT_EQ(f.ivar, as_float(frame.ivar));
    EXPECT_EQ(f.chi2pix, as_float(frame.chi2pix));
    EXPECT_EQ(f.resolution, as_float(frame.resolution));
    EXPECT_EQ(f.wave, frame.wave);  // float64, exact
    EXPECT_EQ(f.mask, frame.mask);  // full uint32 range through BZERO
    EXPECT_EQ(f.fiber, (std::vector<long long>{1502, 1503, 1504}));
}

TEST(FrameIo, MinimalFibermapFromPetal)
{
    ex2d::test::TempDir dir;
    ex2d::FrameProvenance prov = small_provenance();
    prov.fibermap = ex2d::FitsTableBlob{};
    prov.image_header.set_int("SPECGRPH", 4);
    const std::string path = dir.file("frame.fits");
    ASSERT_TRUE(ex2d::write_frame(path, small_frame(), prov).is_ok());
    auto r = ex2d::read_frame(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r.value().fiber, (std::vector<long long>{2002, 2003, 2004}));
    EXPECT_EQ(r.value().header.get_int("FIBERMIN").value(), 2002);

    prov.image_header.erase("SPECGRPH");  // falls back to the CAMERA digit, 3
    ASSERT_TRUE(ex2d::write_frame(path, small_frame(), prov).is_ok());
    r = ex2d::read_frame(path);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r.value().fiber, (std::vector<long long>{1502, 1503, 1504}));
    EXPECT_EQ(count_files(dir.path()), 1u);
}

TEST(FrameIo, MissingOrInvalidFlavorWritesNothing)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    ex2d::FrameProvenance prov = small_provenance();
    prov.image_header.erase("FLAVOR");
    ex2d::Status s = ex2d::write_frame(path, small_frame(), prov);
    EXPECT_EQ(s.code(), ex2d::StatusCode::format_error);
    EXPECT_NE(s.message().find(path), std::string::npos);
    EXPECT_NE(s.message().find("FLAVOR"), std::string::npos);

    prov.image_header.set_string("FLAVOR", "SCIENCE");  // case-sensitive, as desispec
    s = ex2d::write_frame(path, small_frame(), prov);
    EXPECT_EQ(s.code(), ex2d::StatusCode::format_error);
    EXPECT_NE(s.message().find(path), std::string::npos);
    EXPECT_EQ(count_files(dir.path()), 0u);

    for (const char* ok : {"none", "flat", "arc", "zero", "bias", "science"}) {
        prov.image_header.set_string("FLAVOR", ok);
        EXPECT_TRUE(ex2d::write_frame(path, small_frame(), prov).is_ok()) << ok;
    }
}

TEST(FrameIo, TooShortFibermapOrWrongArraysFailWithoutFile)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    ex2d::FrameProvenance prov = small_provenance();
    prov.fibermap = make_fibermap(4);  // rows [2, 5) do not exist
    ex2d::Status s = ex2d::write_frame(path, small_frame(), prov);
    EXPECT_EQ(s.code(), ex2d::StatusCode::format_error);
    EXPECT_NE(s.message().find(path), std::string::npos);

    ex2d::ExtractedFrame frame = small_frame();
    frame.resolution.pop_back();
    s = ex2d::write_frame(path, frame, small_provenance());
    EXPECT_EQ(s.code(), ex2d::StatusCode::invalid_argument);
    EXPECT_EQ(count_files(dir.path()), 0u);
}

TEST(FrameIo, ModelImage)
{
    ex2d::test::TempDir dir;
    ex2d::ExtractedFrame frame = small_frame();
    frame.model_ny = 7;
    frame.model_nx = 4;
    for (int i = 0; i < 28; ++i) frame.model.push_back(1.0 / 3.0 + i);
    const std::string path = dir.file("model.fits");
    ASSERT_TRUE(ex2d::write_model_image(path, frame, small_provenance()).is_ok());
    EXPECT_EQ(count_files(dir.path()), 1u);
    FitsReader r(path);
    ASSERT_EQ(r.num_hdus(), 1);
    r.move(1);
    EXPECT_EQ(r.num("BITPIX"), -64);
    EXPECT_EQ(r.num("NAXIS1"), 4);
    EXPECT_EQ(r.num("NAXIS2"), 7);
    EXPECT_EQ(r.str("EXTNAME"), "MODEL");
    EXPECT_EQ(r.str("BUNIT"), "<absent>");
    EXPECT_EQ(r.num("NSPEC"), kNspec);
    EXPECT_EQ(r.str("FLAVOR"), "science");
    int dataok = 0;
    int hduok = 0;
    r.verify_checksums(dataok, hduok);
    EXPECT_EQ(dataok, 1);
    EXPECT_EQ(hduok, 1);
    EXPECT_EQ(r.status(), 0);
}

TEST(FrameIo, GzipSuffixWritesACompressedFile)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame-r3-00067784.fits.gz");
    const ex2d::ExtractedFrame frame = small_frame();
    ex2d::Status s = ex2d::write_frame(path, frame, small_provenance());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(count_files(dir.path()), 1u);
    std::ifstream in(path, std::ios::binary);
    unsigned char magic[2] = {0, 0};
    in.read(reinterpret_cast<char*>(magic), 2);
    EXPECT_EQ(magic[0], 0x1f);
    EXPECT_EQ(magic[1], 0x8b);
    auto r = ex2d::read_frame(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r.value().wave, frame.wave);
    EXPECT_EQ(r.value().mask, frame.mask);
    EXPECT_EQ(r.value().hdu_names.size(), 8u);
}

TEST(FrameIo, ReadFrameErrorsNameTheFile)
{
    ex2d::test::TempDir dir;
    const std::string missing = dir.file("missing.fits");
    auto r = ex2d::read_frame(missing);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error);
    EXPECT_NE(r.status().message().find(missing), std::string::npos);

    ex2d::ExtractedFrame frame = small_frame();
    frame.model_ny = 2;
    frame.model_nx = 2;
    frame.model = {1, 2, 3, 4};
    const std::string model = dir.file("model.fits");
    ASSERT_TRUE(ex2d::write_model_image(model, frame, small_provenance()).is_ok());
    r = ex2d::read_frame(model);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_EQ(r.status().message(), model + ": no HDU named FLUX");
}

}  // namespace

TEST(FrameIo, InputPathsAreShortenedAsDesispecDoes)
{
    ::setenv("DESI_SPECTRO_REDUX", "/global/cfs/cdirs/desi/spectro/redux", 1);
    ::setenv("SPECPROD", "daily", 1);
    ::setenv("DESI_SPECTRO_CALIB", "/global/cfs/cdirs/desi/spectro/desi_spectro_calib/trunk", 1);
    EXPECT_EQ(ex2d::shorten_desi_path("/global/cfs/cdirs/desi/spectro/redux/daily/exposures/"
                                      "20201220/00068979/psf-r5-00068979.fits"),
              "SPECPROD/exposures/20201220/00068979/psf-r5-00068979.fits");
    EXPECT_EQ(
        ex2d::shorten_desi_path(
            "/global/cfs/cdirs/desi/spectro/desi_spectro_calib/trunk/spec/sm4/psf-sm4-r.fits"),
        "SPCALIB/spec/sm4/psf-sm4-r.fits");
    EXPECT_EQ(ex2d::shorten_desi_path("/scratch/preproc-r5-00068979.fits"),
              "/scratch/preproc-r5-00068979.fits");
    ::setenv("DESI_SPECTRO_REDUX", "/redux/", 1);
    EXPECT_EQ(ex2d::shorten_desi_path("/redux/daily/preproc/x.fits"), "SPECPROD/preproc/x.fits");
    ::unsetenv("SPECPROD");
    EXPECT_EQ(ex2d::shorten_desi_path("/redux/daily/preproc/x.fits"),
              "/redux/daily/preproc/x.fits");
    ::unsetenv("DESI_SPECTRO_REDUX");
    ::unsetenv("DESI_SPECTRO_CALIB");
}
