// SPDX-License-Identifier: BSD-3-Clause
// write_preproc / read_preproc: DESI layout (RICE-compressed MASK), the 767 weight rule,
// masking of non-finite pixels, and failures as Status values naming the file.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/preproc.hpp"
#include "test_paths.hpp"
#include "fits_fixtures.hpp"

namespace {

namespace fs = std::filesystem;

/// An in-memory FIBERMAP: FIBER = 500*petal + row, TARGETID, OBJTYPE, and a TILEID key.
ex2d::FitsTableBlob make_fibermap(int petal, int nrows)
{
    return ex2d::test::make_fibermap_blob(nrows, 500 * petal, 39627000000000000LL, 1234, true);
}

ex2d::PreprocImage sample_image()
{
    ex2d::PreprocImage img;
    img.ny = 6;
    img.nx = 5;
    const int n = img.ny * img.nx;
    const std::uint32_t bits[] = {0, 1, 16, 256, 512, 1023, 0, 8};
    for (int i = 0; i < n; ++i) {
        img.image.push_back(0.25 * i - 3.0);  // exact in float32
        img.ivar.push_back(1.0 / 64.0 + i);
        img.mask.push_back(bits[i % 8]);
        img.readnoise.push_back(3.5 + 0.125 * (i % 4));
    }
    img.header.set_string("CAMERA", "r3", "camera");
    img.header.set_string("FLAVOR", "science");
    img.header.set_int("EXPID", 67784);
    img.header.set_double("EXPTIME", 900.5);
    img.header.set_string("IN_LONG", std::string(100, 'x') + "/preproc-r3.fits");
    img.fibermap = make_fibermap(3, 12);
    return img;
}

size_t count_files(const fs::path& dir)
{
    return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(PreprocIo, RoundTripKeepsEveryArrayHeaderAndFibermap)
{
    ex2d::test::TempDir dir;
    const ex2d::PreprocImage img = sample_image();
    const std::string path = dir.file("preproc-r3-00067784.fits");
    ex2d::Status s = ex2d::write_preproc(path, img);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(count_files(dir.path()), 1u);

    auto r = ex2d::read_preproc(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const ex2d::PreprocImage& back = r.value();
    EXPECT_EQ(back.source, path);
    EXPECT_EQ(back.ny, 6);
    EXPECT_EQ(back.nx, 5);
    EXPECT_EQ(back.image, img.image);
    EXPECT_EQ(back.ivar, img.ivar);
    EXPECT_EQ(back.mask, img.mask);
    EXPECT_EQ(back.readnoise, img.readnoise);
    EXPECT_EQ(back.n_nonfinite_masked, 0);
    EXPECT_EQ(back.header.get_string("CAMERA").value(), "r3");
    EXPECT_EQ(back.header.get_string("FLAVOR").value(), "science");
    EXPECT_EQ(back.header.get_int("EXPID").value(), 67784);
    EXPECT_EQ(back.header.get_double("EXPTIME").value(), 900.5);
    EXPECT_EQ(back.header.get_string("IN_LONG").value(), img.header.get_string("IN_LONG").value());
    EXPECT_EQ(back.header.get_string("EXTNAME").value(), "IMAGE");
    EXPECT_EQ(back.header.get_int("BITPIX").value(), -32);

    ASSERT_FALSE(back.fibermap.empty());
    EXPECT_EQ(back.fibermap.nrows, 12);
    auto fibers = ex2d::read_int_column(back.fibermap, "FIBER");
    ASSERT_TRUE(fibers.is_ok()) << fibers.status().to_string();
    ASSERT_EQ(fibers.value().size(), 12u);
    EXPECT_EQ(fibers.value().front(), 1500);
    EXPECT_EQ(fibers.value().back(), 1511);
    auto targets = ex2d::read_int_column(back.fibermap, "TARGETID");
    ASSERT_TRUE(targets.is_ok());
    EXPECT_EQ(targets.value()[5], 39627000000000005LL);
    EXPECT_FALSE(ex2d::read_int_column(back.fibermap, "NOPE").is_ok());

    // The header survives a second round trip card for card (no duplicated keywords).
    const std::string again = dir.file("again.fits");
    ASSERT_TRUE(ex2d::write_preproc(again, back).is_ok());
    auto r2 = ex2d::read_preproc(again);
    ASSERT_TRUE(r2.is_ok());
    EXPECT_EQ(r2.value().header.cards, back.header.cards);
}

/// Number of HDUs in an in-memory FITS file.
int count_hdus(const ex2d::FitsTableBlob& blob)
{
    void* buffer = const_cast<std::uint8_t*>(blob.fits_bytes.data());
    size_t size = blob.fits_bytes.size();
    fitsfile* f = nullptr;
    int status = 0;
    int nhdu = 0;
    fits_open_memfile(&f, "blob.fits", READONLY, &buffer, &size, 0, nullptr, &status);
    fits_get_num_hdus(f, &nhdu, &status);
    if (f) fits_close_file(f, &status);
    return status == 0 ? nhdu : -status;
}

// A fleet reader reads frame after frame in one process: each frame's FIBERMAP must be its
// own (in-memory copies once reused the previous frame's bytes and carried its table).
TEST(PreprocIo, FibermapsOfManyFramesReadInOneProcessAreEachTheirOwn)
{
    ex2d::test::TempDir dir;
    constexpr int kRows = 500;
    std::vector<std::string> paths;
    for (int petal = 0; petal < 4; ++petal) {
        ex2d::PreprocImage img = sample_image();
        img.fibermap = make_fibermap(petal, kRows);
        paths.push_back(dir.file("preproc-r" + std::to_string(petal) + "-00067784.fits"));
        ASSERT_TRUE(ex2d::write_preproc(paths.back(), img).is_ok());
    }
    for (int round = 0; round < 2; ++round) {
        for (int petal = 0; petal < 4; ++petal) {
            SCOPED_TRACE("round " + std::to_string(round) + " petal " + std::to_string(petal));
            auto image = ex2d::read_preproc(paths[petal]);
            ASSERT_TRUE(image.is_ok()) << image.status().to_string();
            auto alone = ex2d::read_fibermap(paths[petal]);
            ASSERT_TRUE(alone.is_ok()) << alone.status().to_string();
            for (const ex2d::FitsTableBlob* blob : {&image.value().fibermap, &alone.value()}) {
                EXPECT_EQ(count_hdus(*blob), 2);
                EXPECT_EQ(blob->nrows, kRows);
                auto fibers = ex2d::read_int_column(*blob, "FIBER");
                ASSERT_TRUE(fibers.is_ok()) << fibers.status().to_string();
                ASSERT_EQ(fibers.value().size(), size_t(kRows));
                for (int row = 0; row < kRows; ++row) {
                    ASSERT_EQ(fibers.value()[row], 500 * petal + row) << "row " << row;
                }
            }
        }
    }
}

TEST(PreprocIo, ColumnRangeHoldsThoseColumnsOfEveryPlane)
{
    ex2d::test::TempDir dir;
    const ex2d::PreprocImage img = sample_image();
    const std::string path = dir.file("preproc-r3-00067784.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, img).is_ok());

    auto r = ex2d::read_preproc(path, ex2d::ColumnRange{1, 4});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const ex2d::PreprocImage& part = r.value();
    EXPECT_EQ(part.ny, 6);
    EXPECT_EQ(part.nx, 3);
    EXPECT_EQ(part.col_begin, 1);
    EXPECT_EQ(part.ccd_width(), 5);
    ASSERT_EQ(part.image.size(), 18u);
    for (int row = 0; row < 6; ++row) {
        for (int c = 0; c < 3; ++c) {
            const size_t whole = size_t(row) * 5 + 1 + c, held = size_t(row) * 3 + c;
            EXPECT_EQ(part.image[held], img.image[whole]) << row << "," << c;
            EXPECT_EQ(part.ivar[held], img.ivar[whole]);
            EXPECT_EQ(part.mask[held], img.mask[whole]);
            EXPECT_EQ(part.readnoise[held], img.readnoise[whole]);
        }
    }
    EXPECT_EQ(part.fibermap.nrows, 12);

    // What extraction reads: the same planes without READNOISE.
    auto planes =
        ex2d::read_preproc(path, ex2d::ColumnRange{1, 4}, ex2d::PreprocPlanes::extraction);
    ASSERT_TRUE(planes.is_ok()) << planes.status().to_string();
    EXPECT_EQ(planes.value().image, part.image);
    EXPECT_EQ(planes.value().ivar, part.ivar);
    EXPECT_EQ(planes.value().mask, part.mask);
    EXPECT_TRUE(planes.value().readnoise.empty());
    // A window cannot be written back as if it were a whole frame.
    EXPECT_FALSE(ex2d::write_preproc(dir.file("window.fits"), part).is_ok());
    EXPECT_THROW((void)ex2d::read_preproc(path, ex2d::ColumnRange{3, 7}), ex2d::Error);

    auto meta = ex2d::read_preproc_metadata(path);
    ASSERT_TRUE(meta.is_ok());
    EXPECT_TRUE(meta.value().image.empty());
    EXPECT_EQ(meta.value().ccd_width(), 5);
    EXPECT_EQ(meta.value().header.get_string("CAMERA").value(), "r3");
    EXPECT_EQ(meta.value().fibermap.nrows, 12);
}

TEST(PreprocIo, LayoutOnDiskIsDesis)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("preproc.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, sample_image()).is_ok());
    fitsfile* f = nullptr;
    int status = 0;
    int type = 0;
    int nhdu = 0;
    char value[FLEN_VALUE];
    int ival = 0;
    fits_open_file(&f, path.c_str(), READONLY, &status);
    fits_get_num_hdus(f, &nhdu, &status);
    EXPECT_EQ(nhdu, 5);
    const char* expected[] = {"IMAGE", "IVAR", "MASK", "READNOISE", "FIBERMAP"};
    for (int h = 1; h <= nhdu; ++h) {
        fits_movabs_hdu(f, h, &type, &status);
        fits_read_key(f, TSTRING, "EXTNAME", value, nullptr, &status);
        EXPECT_STREQ(value, expected[h - 1]);
    }
    fits_movabs_hdu(f, 1, &type, &status);
    fits_read_key(f, TINT, "BITPIX", &ival, nullptr, &status);
    EXPECT_EQ(ival, -32);
    fits_movabs_hdu(f, 3, &type, &status);
    EXPECT_EQ(fits_is_compressed_image(f, &status), 1);
    fits_read_key(f, TSTRING, "ZCMPTYPE", value, nullptr, &status);
    EXPECT_STREQ(value, "RICE_1");
    fits_read_key(f, TINT, "ZBITPIX", &ival, nullptr, &status);
    EXPECT_EQ(ival, 16);
    fits_read_key(f, TINT, "ZTILE1", &ival, nullptr, &status);
    EXPECT_EQ(ival, 5);
    fits_read_key(f, TINT, "ZTILE2", &ival, nullptr, &status);
    EXPECT_EQ(ival, 1);
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0);
}

TEST(PreprocIo, WeightsFollowTheExtractionMask767)
{
    ex2d::PreprocImage img;
    img.ny = 1;
    img.nx = 8;
    img.image = {1, 1, 1, 1, 1, 1, std::nan(""), 1};
    img.ivar = {2, 3, 4, 5, 6, 0, 7, -1};
    img.mask = {0, 256, 16, 512, 1, 0, 0, 0};
    ex2d::LargeArray<double> w = img.weights();
    const ex2d::LargeArray<double> expected = {2, 3, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(w, expected);
    EXPECT_EQ(img.take_weights(), expected);
    EXPECT_TRUE(img.ivar.empty());
}

TEST(PreprocIo, NonFinitePixelsAreMaskedAndCounted)
{
    ex2d::test::TempDir dir;
    ex2d::PreprocImage img = sample_image();
    img.image[3] = std::numeric_limits<double>::quiet_NaN();
    img.ivar[7] = std::numeric_limits<double>::infinity();
    img.image[9] = -std::numeric_limits<double>::infinity();
    img.ivar[9] = std::numeric_limits<double>::quiet_NaN();
    img.mask[7] = 16;
    const std::string path = dir.file("preproc-nan.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, img).is_ok());
    auto r = ex2d::read_preproc(path);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const ex2d::PreprocImage& back = r.value();
    EXPECT_EQ(back.n_nonfinite_masked, 3);
    for (int i : {3, 7, 9}) {
        SCOPED_TRACE(i);
        EXPECT_EQ(back.image[size_t(i)], 0.0);
        EXPECT_EQ(back.ivar[size_t(i)], 0.0);
        EXPECT_EQ(back.mask[size_t(i)] & 1u, 1u);
    }
    EXPECT_EQ(back.mask[7], 17u);
    EXPECT_EQ(back.image[4], img.image[4]);

    ex2d::PreprocImage again = back;
    EXPECT_EQ(again.mask_nonfinite(), 0);
    EXPECT_EQ(again.n_nonfinite_masked, 3);
}

/// A 60 x 50 preproc file cut to half its bytes, in `dir`.
std::string write_truncated_preproc(const ex2d::test::TempDir& dir)
{
    ex2d::PreprocImage img = sample_image();
    img.ny = 60;
    img.nx = 50;
    img.image.assign(3000, 1.5);
    img.ivar.assign(3000, 2.0);
    img.mask.assign(3000, 0);
    img.readnoise.clear();
    const std::string full = dir.file("full.fits");
    EXPECT_TRUE(ex2d::write_preproc(full, img).is_ok());
    std::ifstream in(full, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string cut = dir.file("cut.fits");
    std::ofstream(cut, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size() / 2));
    return cut;
}

TEST(PreprocIo, MissingAndTruncatedFilesAreIoErrors)
{
    ex2d::test::TempDir dir;
    const std::string missing = dir.file("missing.fits");
    auto r = ex2d::read_preproc(missing);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error);
    EXPECT_NE(r.status().message().find(missing), std::string::npos);

    const std::string cut = write_truncated_preproc(dir);
    r = ex2d::read_preproc(cut);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cut), std::string::npos);
    // The same through the column reader, which reads rows straight from the file.
    r = ex2d::read_preproc(cut, ex2d::ColumnRange{10, 20});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cut), std::string::npos);
}

// Columns are read straight from the file only where the stored floats are the values; a
// scaled plane (BSCALE) goes through CFITSIO and comes out scaled, as the whole plane does.
TEST(PreprocIo, ScaledPlanesAreReadThroughCfitsio)
{
    ex2d::test::TempDir dir;
    const ex2d::PreprocImage img = sample_image();
    const std::string path = dir.file("scaled.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, img).is_ok());
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_file(&f, path.c_str(), READWRITE, &status);
    double bscale = 2.0;
    fits_update_key(f, TDOUBLE, "BSCALE", &bscale, nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);

    auto whole = ex2d::read_preproc(path);
    auto part = ex2d::read_preproc(path, ex2d::ColumnRange{1, 4});
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    ASSERT_TRUE(part.is_ok()) << part.status().to_string();
    for (int row = 0; row < img.ny; ++row) {
        for (int c = 0; c < 3; ++c) {
            const size_t k = size_t(row) * img.nx + 1 + c;
            EXPECT_EQ(whole.value().image[k], 2.0 * img.image[k]);
            EXPECT_EQ(part.value().image[size_t(row) * 3 + c], whole.value().image[k]);
            EXPECT_EQ(part.value().ivar[size_t(row) * 3 + c], img.ivar[k]);
        }
    }
}

/// A file with IMAGE and IVAR of [4][3] and a MASK of shape [mask_ny][3]; MASK absent when
/// mask_ny is 0.
void write_raw_preproc(const std::string& path, long mask_ny)
{
    fitsfile* f = nullptr;
    int status = 0;
    long naxes[2] = {3, 4};
    float pixels[12] = {0};
    fits_create_file(&f, path.c_str(), &status);
    for (const char* name : {"IMAGE", "IVAR"}) {
        fits_create_img(f, FLOAT_IMG, 2, naxes, &status);
        fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>(name), nullptr, &status);
        fits_write_img(f, TFLOAT, 1, 12, pixels, &status);
        if (mask_ny == 0) break;  // IVAR is missing too in that case
    }
    if (mask_ny > 0) {
        long mask_axes[2] = {3, mask_ny};
        short mask[12] = {0};
        fits_create_img(f, SHORT_IMG, 2, mask_axes, &status);
        fits_write_key(f, TSTRING, "EXTNAME", const_cast<char*>("MASK"), nullptr, &status);
        fits_write_img(f, TSHORT, 1, 3 * mask_ny, mask, &status);
    }
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
}

TEST(PreprocIo, MissingIvarAndWrongMaskShapeAreFormatErrors)
{
    ex2d::test::TempDir dir;
    const std::string no_ivar = dir.file("no-ivar.fits");
    write_raw_preproc(no_ivar, 0);
    auto r = ex2d::read_preproc(no_ivar);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_EQ(r.status().message(), no_ivar + ": no HDU named IVAR");

    const std::string bad_mask = dir.file("bad-mask.fits");
    write_raw_preproc(bad_mask, 2);
    r = ex2d::read_preproc(bad_mask);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error);
    EXPECT_NE(r.status().message().find(bad_mask + ": HDU MASK"), std::string::npos)
        << r.status().message();

    const std::string good = dir.file("good.fits");
    write_raw_preproc(good, 4);
    r = ex2d::read_preproc(good);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(r.value().readnoise.empty());
    EXPECT_TRUE(r.value().fibermap.empty());
}

TEST(PreprocIo, FailedWritesLeaveNoFile)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("preproc.fits");

    ex2d::PreprocImage wrong_size = sample_image();
    wrong_size.ivar.pop_back();
    ex2d::Status s = ex2d::write_preproc(path, wrong_size);
    EXPECT_EQ(s.code(), ex2d::StatusCode::invalid_argument);
    EXPECT_NE(s.message().find(path), std::string::npos);

    // Fails half-way, after IMAGE, IVAR and MASK are written: the temporary must go.
    ex2d::PreprocImage bad_fibermap = sample_image();
    bad_fibermap.fibermap.fits_bytes.assign(2880, 'x');
    s = ex2d::write_preproc(path, bad_fibermap);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_EQ(count_files(dir.path()), 0u);
}

}  // namespace

namespace float32_reader {

struct Float32Read {
    ex2d::LargeArray<float> image, weights;
    ex2d::LargeArray<std::uint32_t> mask;
    ex2d::LargeArray<unsigned char> file_buffer;
    std::size_t bytes_seen = 0;
};

ex2d::Result<std::optional<ex2d::PreprocFloat32>> read32(
    const std::string& path, Float32Read& out, ex2d::InputRead how = ex2d::InputRead::automatic)
{
    return ex2d::read_preproc_float32(
        path, [&](const void*, std::size_t size) { out.bytes_seen += size; }, out.image,
        out.weights, out.mask, how, out.file_buffer);
}

// The fleet's reader must send exactly what `ex2d extract` extracts: the float64 reader's
// image and weights, narrowed, bit for bit, NaNs and masked pixels included.
TEST(PreprocFloat32, EqualsTheFloat64ReaderBitForBit)
{
    ex2d::test::TempDir dir;
    ex2d::PreprocImage img = sample_image();
    img.image[3] = std::numeric_limits<double>::quiet_NaN();
    img.ivar[7] = std::numeric_limits<double>::infinity();
    img.image[9] = -std::numeric_limits<double>::infinity();
    img.ivar[11] = -2.0;
    const std::string path = dir.file("preproc-r3-00067784.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, img).is_ok());

    auto reference = ex2d::read_preproc(path, {}, ex2d::PreprocPlanes::extraction);
    ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
    ex2d::PreprocImage expected = std::move(reference).value();
    const ex2d::LargeArray<double> expected_weights = expected.weights();

    // Mapped, and read with O_DIRECT into a buffer of its own (what `automatic` does with a
    // file that is not in the page cache): the same bytes, the same planes.
    for (const ex2d::InputRead how : {ex2d::InputRead::mapped, ex2d::InputRead::direct}) {
        SCOPED_TRACE(how == ex2d::InputRead::direct ? "direct" : "mapped");
        Float32Read got;
        auto r = read32(path, got, how);
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        ASSERT_TRUE(r.value().has_value());
        const ex2d::PreprocFloat32& planes = *r.value();
        EXPECT_EQ(got.bytes_seen, fs::file_size(path));
        EXPECT_EQ(planes.ny, img.ny);
        EXPECT_EQ(planes.nx, img.nx);
        EXPECT_EQ(planes.n_nonfinite_masked, 3);
        EXPECT_EQ(planes.header.get_string("CAMERA").value_or(""), "r3");
        EXPECT_EQ(planes.fibermap.nrows, 12);
        ASSERT_EQ(got.image.size(), expected.image.size());
        for (std::size_t i = 0; i < got.image.size(); ++i) {
            SCOPED_TRACE(i);
            EXPECT_EQ(double(got.image[i]), expected.image[i]);
            EXPECT_EQ(double(got.weights[i]), expected_weights[i]);
        }
        EXPECT_EQ(got.weights[11], 0.0f);
    }
}

TEST(PreprocFloat32, ReusesTheBuffersItIsGiven)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("preproc.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, sample_image()).is_ok());
    Float32Read got;
    ASSERT_TRUE(read32(path, got).is_ok());
    const float* image_memory = got.image.data();
    const float* weights_memory = got.weights.data();
    ASSERT_TRUE(read32(path, got).is_ok());
    EXPECT_EQ(got.image.data(), image_memory);
    EXPECT_EQ(got.weights.data(), weights_memory);
}

TEST(PreprocFloat32, ScaledPlanesAreLeftToTheFloat64Reader)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("scaled.fits");
    ASSERT_TRUE(ex2d::write_preproc(path, sample_image()).is_ok());
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_file(&f, path.c_str(), READWRITE, &status);
    fits_movnam_hdu(f, IMAGE_HDU, const_cast<char*>("IVAR"), 0, &status);
    double bscale = 2.0;
    fits_update_key(f, TDOUBLE, "BSCALE", &bscale, nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    Float32Read got;
    auto r = read32(path, got);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_FALSE(r.value().has_value());
    EXPECT_TRUE(got.image.empty());
}

TEST(PreprocFloat32, MissingTruncatedAndWrongFilesNameTheFile)
{
    ex2d::test::TempDir dir;
    Float32Read got;
    const std::string missing = dir.file("missing.fits");
    auto r = read32(missing, got);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error);
    EXPECT_NE(r.status().message().find(missing), std::string::npos);

    const std::string cut = write_truncated_preproc(dir);
    r = read32(cut, got);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::io_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cut), std::string::npos);

    const std::string empty = dir.file("empty.fits");
    std::ofstream(empty).close();
    r = read32(empty, got);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(empty), std::string::npos);

    const std::string no_ivar = dir.file("no-ivar.fits");
    write_raw_preproc(no_ivar, 0);
    r = read32(no_ivar, got);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), ex2d::StatusCode::format_error) << r.status().to_string();
    EXPECT_NE(r.status().message().find("IVAR"), std::string::npos);
}

}  // namespace float32_reader
