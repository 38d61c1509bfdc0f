// SPDX-License-Identifier: BSD-3-Clause
// `.fits.gz` frames (fits::write_atomically): the same frame as the uncompressed file once read
// back, one standard gzip member that zlib, gzip and astropy read, and no temporary left
// behind by a write that fails.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <zlib.h>

#include "ex2d/frame_io.hpp"
#include "run_tool.hpp"
#include "test_paths.hpp"

namespace {

namespace fs = std::filesystem;

constexpr int kNspec = 25, kNwave = 400, kNdiag = 11;

/// Noise-like values, so that the compressor has real work and several deflate blocks.
ex2d::ExtractedFrame noisy_frame(int nspec = kNspec)
{
    std::mt19937 rng(7);
    std::normal_distribution<double> normal;
    ex2d::ExtractedFrame fr;
    fr.specmin = 0;
    fr.nspec = nspec;
    fr.nwave = kNwave;
    fr.ndiag = kNdiag;
    for (int j = 0; j < kNwave; ++j) fr.wave.push_back(5760.0 + 0.8 * j);
    for (int i = 0; i < nspec * kNwave; ++i) {
        fr.flux.push_back(40.0 + 3.0 * normal(rng));
        fr.ivar.push_back(0.1 + 0.01 * std::abs(normal(rng)));
        fr.mask.push_back(i % 501 == 0 ? 1u : 0u);
        fr.chi2pix.push_back(normal(rng) * normal(rng));
    }
    for (int i = 0; i < nspec * kNdiag * kNwave; ++i)
        fr.resolution.push_back(0.1 * std::abs(normal(rng)));
    fr.flux[17] = std::nan("");
    fr.chi2pix[18] = std::numeric_limits<double>::infinity();
    return fr;
}

/// What a float32 image holds of `v`.
std::vector<double> as_float32(const std::vector<double>& v)
{
    std::vector<double> out;
    out.reserve(v.size());
    for (double x : v) out.push_back(double(float(x)));
    return out;
}

/// Equal element by element, NaN equal to NaN.
::testing::AssertionResult same_values(const std::vector<double>& a, const std::vector<double>& b)
{
    if (a.size() != b.size())
        return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i] && !(std::isnan(a[i]) && std::isnan(b[i]))) {
            return ::testing::AssertionFailure()
                   << "element " << i << ": " << a[i] << " and " << b[i];
        }
    }
    return ::testing::AssertionSuccess();
}

ex2d::FrameProvenance provenance()
{
    ex2d::FrameProvenance p;
    p.image_header.set_string("CAMERA", "r0");
    p.image_header.set_string("FLAVOR", "science");
    p.image_header.set_int("EXPID", 51060);
    p.options.dw = 0.8;
    return p;
}

std::vector<unsigned char> file_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> names_in(const fs::path& dir)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    return names;
}

/// The header without the cards that differ between two writes of the same frame.
std::vector<std::string> stable_cards(const ex2d::FitsHeader& h)
{
    std::vector<std::string> cards;
    for (const std::string& c : h.cards) {
        if (c.rfind("CHECKSUM", 0) != 0 && c.rfind("DATASUM", 0) != 0) cards.push_back(c);
    }
    return cards;
}

TEST(FrameGzip, ReadsBackAsTheSameFrameAsTheUncompressedFile)
{
    ex2d::test::TempDir dir;
    const ex2d::ExtractedFrame frame = noisy_frame();
    const std::string plain = dir.file("frame-r0-00051060.fits");
    const std::string gz = dir.file("frame-r0-00051060.fits.gz");
    ASSERT_TRUE(ex2d::write_frame(plain, frame, provenance()).is_ok());
    const ex2d::Status s = ex2d::write_frame(gz, frame, provenance());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    const auto a = ex2d::read_frame(plain);
    const auto b = ex2d::read_frame(gz);
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_EQ(a.value().hdu_names, b.value().hdu_names);
    EXPECT_TRUE(same_values(a.value().flux, b.value().flux));
    EXPECT_TRUE(same_values(a.value().flux, as_float32(frame.flux)));
    EXPECT_TRUE(same_values(a.value().ivar, b.value().ivar));
    EXPECT_TRUE(same_values(a.value().ivar, as_float32(frame.ivar)));
    EXPECT_EQ(a.value().mask, b.value().mask);
    EXPECT_TRUE(same_values(a.value().chi2pix, b.value().chi2pix));
    EXPECT_TRUE(same_values(a.value().chi2pix, as_float32(frame.chi2pix)));
    EXPECT_EQ(a.value().wave, b.value().wave);
    EXPECT_TRUE(same_values(a.value().resolution, b.value().resolution));
    EXPECT_TRUE(same_values(a.value().resolution,
                            as_float32({frame.resolution.begin(), frame.resolution.end()})));
    EXPECT_EQ(a.value().fiber, b.value().fiber);
    EXPECT_EQ(stable_cards(a.value().header), stable_cards(b.value().header));
    EXPECT_LT(fs::file_size(gz), fs::file_size(plain));
}

// The fleet's writer checksums what the observer sees instead of reading the file back, so the
// observer must see the file's own bytes, compressed or not, exactly once.
TEST(FrameGzip, TheBytesObserverSeesExactlyTheFileWritten)
{
    ex2d::test::TempDir dir;
    const ex2d::StoredFrame stored = ex2d::to_stored_frame(noisy_frame(), 0.8);
    for (const char* name : {"frame-r0-00051060.fits", "frame-r0-00051060.fits.gz"}) {
        const std::string path = dir.file(name);
        std::vector<unsigned char> seen;
        int calls = 0;
        const ex2d::Status s = ex2d::write_frame(path, stored, provenance(),
                                                 [&](const std::uint8_t* bytes, std::size_t size) {
                                                     ++calls;
                                                     seen.assign(bytes, bytes + size);
                                                 });
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        EXPECT_EQ(calls, 1) << name;
        EXPECT_GT(seen.size(), 2880u) << name;
        EXPECT_TRUE(seen == file_bytes(path)) << name << ": the observer saw " << seen.size()
                                              << " bytes, the file holds " << fs::file_size(path);
    }
}

TEST(FrameGzip, IsOneGzipMemberHoldingTheWholeFitsFile)
{
    ex2d::test::TempDir dir;
    const std::string gz = dir.file("frame-r0-00051060.fits.gz");
    ASSERT_TRUE(ex2d::write_frame(gz, noisy_frame(), provenance()).is_ok());
    const std::vector<unsigned char> in = file_bytes(gz);
    ASSERT_GT(in.size(), 18u);
    EXPECT_EQ(in[0], 0x1f);
    EXPECT_EQ(in[1], 0x8b);

    z_stream z{};
    ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    std::vector<unsigned char> out(64u << 20);
    z.next_in = const_cast<unsigned char*>(in.data());
    z.avail_in = uInt(in.size());
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    const int rc = inflate(&z, Z_FINISH);
    const uLong used = z.total_in, produced = z.total_out;
    inflateEnd(&z);
    ASSERT_EQ(rc, Z_STREAM_END);
    // CFITSIO stops at the end of the first member: everything must be in that one.
    EXPECT_EQ(used, in.size()) << "bytes after the first gzip member";
    EXPECT_EQ(produced % 2880, 0u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), 9), "SIMPLE  =");

    const auto gzip = ex2d::test::run_command("-t " + gz, "", "gzip");
    if (gzip.exit_code == 127) GTEST_SKIP() << "no gzip program: " << gzip.output;
    EXPECT_EQ(gzip.exit_code, 0) << gzip.output;
}

TEST(FrameGzip, AstropyReadsItAndAgreesWithItsChecksums)
{
    // Debian's python3-astropy lives beside /usr/bin/python3, which need not be first in PATH.
    std::string python;
    for (const char* candidate : {"python3", "/usr/bin/python3"}) {
        if (ex2d::test::run_command("-c 'import astropy.io.fits'", "", candidate).exit_code == 0) {
            python = candidate;
            break;
        }
    }
    if (python.empty()) GTEST_SKIP() << "no python3 with astropy (Debian: python3-astropy)";
    ex2d::test::TempDir dir;
    const std::string gz = dir.file("frame-r0-00051060.fits.gz");
    ASSERT_TRUE(ex2d::write_frame(gz, noisy_frame(), provenance()).is_ok());
    // -W error: a checksum that does not match is a warning in astropy, here a failure.
    const std::string script =
        "import sys, astropy.io.fits as f\n"
        "with f.open(sys.argv[1], checksum=True) as h:\n"
        "    [x.data for x in h]\n"
        "    print(h['FLUX'].data.shape, h['RESOLUTION'].data.shape)\n";
    const auto r = ex2d::test::run_command("-W error -c \"" + script + "\" " + gz, "", python);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(25, 400) (25, 11, 400)"), std::string::npos) << r.output;
}

TEST(FrameGzip, ASmallerFrameAfterALargerOneHoldsNothingOfIt)
{
    // The memory of the first file is reused for the second (CFITSIO reads a memory
    // file's initial buffer as a file already there): nothing of the first may show in the second.
    ex2d::test::TempDir dir;
    const ex2d::ExtractedFrame large = noisy_frame(100);  // 2.4 MB: its memory is kept
    const ex2d::ExtractedFrame small = noisy_frame(2);
    for (const char* suffix : {".fits", ".fits.gz"}) {
        const std::string first = dir.file(std::string("large") + suffix);
        const std::string second = dir.file(std::string("small") + suffix);
        ASSERT_TRUE(ex2d::write_frame(first, large, provenance()).is_ok());
        ASSERT_TRUE(ex2d::write_frame(second, small, provenance()).is_ok());
        const auto r = ex2d::read_frame(second);
        ASSERT_TRUE(r.is_ok()) << r.status().to_string();
        EXPECT_EQ(r.value().nspec, 2);
        EXPECT_EQ(r.value().hdu_names.size(), 8u) << suffix;
        EXPECT_TRUE(same_values(r.value().flux, as_float32(small.flux))) << suffix;
    }
}

TEST(FrameGzip, AFailedWriteLeavesNoTemporaryBehind)
{
    ex2d::test::TempDir dir;
    // The final name is taken by a folder: the temporary is written, the rename fails.
    const std::string taken = dir.file("frame-r0-00051060.fits.gz");
    fs::create_directory(taken);
    fs::create_directory(fs::path(taken) / "inside");
    ex2d::Status s = ex2d::write_frame(taken, noisy_frame(), provenance());
    ASSERT_FALSE(s.is_ok());
    EXPECT_EQ(s.code(), ex2d::StatusCode::io_error);
    EXPECT_NE(s.message().find(taken), std::string::npos) << s.message();
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"frame-r0-00051060.fits.gz"});

    const std::string nowhere = dir.file("missing/frame-r0-00051060.fits.gz");
    s = ex2d::write_frame(nowhere, noisy_frame(), provenance());
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(nowhere), std::string::npos) << s.message();
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"frame-r0-00051060.fits.gz"});
}

TEST(FrameGzip, AReadOnlyFolderIsRefusedWithNothingLeftInIt)
{
    if (::geteuid() == 0) GTEST_SKIP() << "running as root: a read-only folder would not stop it";
    ex2d::test::TempDir dir;
    const fs::path locked = dir.path() / "locked";
    fs::create_directory(locked);
    ::chmod(locked.c_str(), 0555);
    const std::string path = (locked / "frame-r0-00051060.fits.gz").string();
    const ex2d::Status s = ex2d::write_frame(path, noisy_frame(), provenance());
    ::chmod(locked.c_str(), 0755);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
    EXPECT_TRUE(names_in(locked).empty());
}

}  // namespace
