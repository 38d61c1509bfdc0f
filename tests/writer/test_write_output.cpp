// SPDX-License-Identifier: BSD-3-Clause
// The writer's last line of defence: a frame is written only under its own job's identity,
// and the final rename never replaces a frame of the same job (services/writer).
#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/wire.hpp"
#include "final_file.hpp"
#include "fits_fixtures.hpp"
#include "test_paths.hpp"
#include "writer.hpp"

namespace {

namespace fs = std::filesystem;
using ex2d::writer::Placement;

constexpr int kNspec = 4, kNwave = 6, kNdiag = 3;

ex2d::ExtractedFrame small_frame(int specmin)
{
    ex2d::ExtractedFrame fr;
    fr.specmin = specmin;
    fr.nspec = kNspec;
    fr.nwave = kNwave;
    fr.ndiag = kNdiag;
    for (int j = 0; j < kNwave; ++j) fr.wave.push_back(6000.0 + 0.8 * j);
    for (int i = 0; i < kNspec * kNwave; ++i) {
        fr.flux.push_back(1.0 + i);
        fr.ivar.push_back(4.0);
        fr.mask.push_back(0);
        fr.chi2pix.push_back(1.0);
    }
    for (int i = 0; i < kNspec * kNdiag * kNwave; ++i) fr.resolution.push_back(0.25);
    return fr;
}

/// The outputs of job nightly/00000042/r2 (petal 2: FIBER = 1000 + row).
ex2d::service::FrameOutputs outputs_of_r2()
{
    ex2d::service::FrameOutputs out;
    out.job.job = "nightly/00000042/r2";
    out.job.camera = "r2";
    out.job.expid = "00000042";
    out.job.night = "20261122";
    out.image_header.set_string("CAMERA", "r2      ");
    out.image_header.set_int("EXPID", 42);
    out.image_header.set_int("NIGHT", 20261122);
    out.fibermap = ex2d::test::make_fibermap_blob(500, 1000, 39627000000000000LL, 1000, true);
    out.frame = ex2d::to_stored_frame(small_frame(3), 0.8);
    return out;
}

TEST(WriterIdentity, TheJobsOwnFrameIsAccepted)
{
    const ex2d::Status s = ex2d::writer::check_frame_identity(outputs_of_r2());
    EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(WriterIdentity, AnotherFramesFibermapOrHeaderIsRefusedWithTheReason)
{
    auto refused = [](const ex2d::service::FrameOutputs& out) {
        const ex2d::Status s = ex2d::writer::check_frame_identity(out);
        EXPECT_EQ(s.code(), ex2d::StatusCode::format_error);
        return s.message();
    };
    auto petal1 = outputs_of_r2();
    petal1.fibermap = ex2d::test::make_fibermap_blob(500, 500, 39627000000000000LL, 1000, true);
    EXPECT_NE(refused(petal1).find("FIBERMAP row 3 is FIBER 503, expected 1003"), std::string::npos)
        << refused(petal1);
    auto short_map = outputs_of_r2();
    short_map.fibermap = ex2d::test::make_fibermap_blob(5, 1000, 1, 1000, true);
    EXPECT_NE(refused(short_map).find("FIBERMAP has 5 rows for spectra 3..6"), std::string::npos);
    auto camera = outputs_of_r2();
    camera.image_header.set_string("CAMERA", "r1");
    EXPECT_NE(refused(camera).find("header CAMERA is r1"), std::string::npos);
    auto expid = outputs_of_r2();
    expid.image_header.set_int("EXPID", 41);
    EXPECT_NE(refused(expid).find("header EXPID is 41"), std::string::npos);
    auto night = outputs_of_r2();
    night.image_header.set_int("NIGHT", 20261121);
    const std::string message = refused(night);
    EXPECT_NE(message.find("header NIGHT is 20261121"), std::string::npos);
    EXPECT_NE(message.find("not job nightly/00000042/r2's"), std::string::npos) << message;
}

/// A frame file whose FLUX header carries the provenance of `job`.
ex2d::FitsHeader write_frame_of(const std::string& path, const std::string& job, double flux)
{
    ex2d::FrameProvenance prov;
    prov.image_header.set_string("CAMERA", "r2");
    prov.image_header.set_string("FLAVOR", "science");
    prov.image_header.set_string("EX2DJOB", job);
    prov.image_header.set_string("EX2DPREP", "0123456789abcdef");
    prov.image_header.set_string("EX2DPSFC", "fedcba9876543210");
    prov.image_header.set_string("EX2DVERS", EX2D_VERSION);
    prov.options.wmin = 6000.0;
    prov.options.wmax = 6004.0;
    prov.options.dw = 0.8;
    prov.options.nspec = kNspec;
    ex2d::ExtractedFrame frame = small_frame(0);
    frame.flux[0] = flux;
    const ex2d::Status written = ex2d::write_frame(path, frame, prov);
    EXPECT_TRUE(written.is_ok()) << written.to_string();
    return prov.image_header;
}

long long inode_of(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (long long)st.st_ino : -1;
}

TEST(FinalRename, NeverReplacesAnExistingName)
{
    ex2d::test::TempDir dir;
    const std::string a = dir.file("a.fits"), b = dir.file("b.fits");
    std::ofstream(a) << "new";
    std::ofstream(b) << "old";
    EXPECT_EQ(ex2d::writer::rename_no_replace(a, b), -1);
    EXPECT_EQ(errno, EEXIST);
    EXPECT_TRUE(fs::exists(a));
    std::ifstream in(b);
    std::string text;
    in >> text;
    EXPECT_EQ(text, "old");
    fs::remove(b);
    EXPECT_EQ(ex2d::writer::rename_no_replace(a, b), 0);
    EXPECT_FALSE(fs::exists(a));
}

/// The three names of a write: the final frame, the writer's temporary and its aside name.
struct WriteNames {
    ex2d::test::TempDir dir;
    const std::string final_path = dir.file("frame-r2-00000042.fits");
    const std::string tmp = dir.file("frame-r2-00000042.tmp-host-1.fits");
    const std::string aside = dir.file("frame-r2-00000042.replaced-host-1.fits");
};

TEST(FinalRename, AFrameOfTheSameJobIsNeverReplaced)
{
    WriteNames names;
    const auto& [dir, final_path, tmp, aside] = names;
    write_frame_of(final_path, "nightly/00000042/r2", 1.0);
    const ex2d::FitsHeader ours = write_frame_of(tmp, "nightly/00000042/r2", 2.0);
    const long long inode = inode_of(final_path);
    int lease_checks = 0;
    auto placed = ex2d::writer::place_final(tmp, final_path, aside, ours, [&] {
        ++lease_checks;
        return true;
    });
    ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
    EXPECT_EQ(placed.value(), Placement::already_there);
    EXPECT_EQ(inode_of(final_path), inode);
    EXPECT_EQ(ex2d::read_frame(final_path).value().flux[0], 1.0);
    EXPECT_TRUE(fs::exists(tmp)) << "the caller removes its temporary";
    EXPECT_FALSE(fs::exists(aside));
    EXPECT_EQ(lease_checks, 0);
}

TEST(FinalRename, AnOlderOutputIsReplacedOnlyWhileTheLeaseHolds)
{
    WriteNames names;
    const auto& [dir, final_path, tmp, aside] = names;
    write_frame_of(final_path, "campaign-old/00000042/r2", 1.0);
    const ex2d::FitsHeader ours = write_frame_of(tmp, "nightly/00000042/r2", 2.0);

    auto lost = ex2d::writer::place_final(tmp, final_path, aside, ours, [] { return false; });
    ASSERT_FALSE(lost.is_ok());
    EXPECT_NE(lost.status().message().find("lease lost"), std::string::npos);
    EXPECT_EQ(ex2d::read_frame(final_path).value().flux[0], 1.0);

    auto placed = ex2d::writer::place_final(tmp, final_path, aside, ours, [] { return true; });
    ASSERT_TRUE(placed.is_ok()) << placed.status().to_string();
    EXPECT_EQ(placed.value(), Placement::placed);
    EXPECT_EQ(ex2d::read_frame(final_path).value().flux[0], 2.0);
    EXPECT_FALSE(fs::exists(tmp));
    EXPECT_FALSE(fs::exists(aside));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

// A writer stalled past its lease and its heartbeat is taken for gone: another writer's sweep
// removes its temporary. When it wakes, the missing temporary with the lease lost is a fenced-out
// write (invalid_argument, "stale_epoch"), not an I/O failure; the finished frame is untouched.
// With the lease still held, a vanished temporary is an I/O error.
TEST(FinalRename, ATemporarySweptWhileTheLeaseWasLostIsAFencedOutWrite)
{
    WriteNames names;
    const auto& [dir, final_path, tmp, aside] = names;
    write_frame_of(final_path, "nightly/00000042/r2", 1.0);
    const ex2d::FitsHeader ours = write_frame_of(tmp, "nightly/00000042/r2", 2.0);
    const long long inode = inode_of(final_path);
    fs::remove(tmp);

    auto fenced = ex2d::writer::place_final(tmp, final_path, aside, ours, [] { return false; });
    ASSERT_FALSE(fenced.is_ok());
    EXPECT_EQ(fenced.status().code(), ex2d::StatusCode::invalid_argument);
    EXPECT_NE(fenced.status().message().find("stale_epoch"), std::string::npos)
        << fenced.status().to_string();
    EXPECT_NE(fenced.status().message().find("sweep"), std::string::npos);
    EXPECT_EQ(inode_of(final_path), inode);

    auto vanished = ex2d::writer::place_final(tmp, final_path, aside, ours, [] { return true; });
    ASSERT_FALSE(vanished.is_ok());
    EXPECT_EQ(vanished.status().code(), ex2d::StatusCode::io_error);
    EXPECT_NE(vanished.status().message().find("No such file"), std::string::npos)
        << vanished.status().to_string();
    EXPECT_EQ(inode_of(final_path), inode);
}

class MemoryLedger : public ex2d::writer::TemporaryLedger {
public:
    ex2d::Status record(const std::string& path) override
    {
        recorded.push_back(path);
        return ex2d::Status::ok();
    }
    void forget(const std::string&) override {}
    std::vector<std::string> recorded;
};

// The checksum the writer records in Redis is computed from memory, not read back: it must still
// be the finished file's XXH3-128, for .fits and .fits.gz, and a second write that finds the
// frame there (skipped) reads the same from disk.
TEST(WriteOutput, TheRecordedChecksumAndSizeAreThoseOfTheFinishedFile)
{
    ex2d::test::TempDir dir;
    ex2d::service::FrameOutputs out = outputs_of_r2();
    out.image_header.set_string("FLAVOR", "science");
    out.options.wmin = 6000.0;
    out.options.wmax = 6004.0;
    out.options.dw = 0.8;
    const ex2d::service::Actor me{"writer-test", "host", 1};
    for (const char* name : {"frame-r2-00000042.fits", "frame-r2-00000042.fits.gz"}) {
        out.job.output = dir.file(name);
        MemoryLedger ledger;
        auto written = ex2d::writer::write_output(
            out, me, true, [] { return true; }, ledger);
        ASSERT_TRUE(written.is_ok()) << written.status().to_string();
        EXPECT_FALSE(written.value().skipped);
        EXPECT_EQ(written.value().checksum, ex2d::wire::file_checksum128(out.job.output)) << name;
        EXPECT_EQ(written.value().bytes, (long long)fs::file_size(out.job.output)) << name;
        EXPECT_EQ(ledger.recorded.size(), 2u);

        auto again = ex2d::writer::write_output(
            out, me, true, [] { return true; }, ledger);
        ASSERT_TRUE(again.is_ok()) << again.status().to_string();
        EXPECT_TRUE(again.value().skipped);
        EXPECT_EQ(again.value().checksum, written.value().checksum) << name;
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 2);
}

}  // namespace

namespace result_message {

std::string file_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

ex2d::Result<ex2d::service::FrameOutputs> through_the_wire(ex2d::service::FrameOutputs out,
                                                           std::size_t& bytes)
{
    auto parts = ex2d::wire::encode(ex2d::service::encode_result(std::move(out)));
    bytes = 0;
    for (const auto& part : parts) bytes += part.size();
    ex2d::wire::DecodeError error;
    auto message = ex2d::wire::decode(std::move(parts), error);
    if (!message) return ex2d::Status::format(error.detail);
    return ex2d::service::decode_result(*message);
}

// A frame written by the fleet's writer from a RESULT is the file `ex2d extract` writes from
// the extraction itself, byte for byte, SCORES included, though RESULT carries float32.
TEST(ResultMessage, TheWritersFileIsExtractsFileByteForByte)
{
    ex2d::test::TempDir dir;
    ex2d::ExtractedFrame frame = small_frame(3);
    frame.flux[5] = 1.0 / 3.0;  // not exact in float32: rounded once, on either path
    frame.ivar[7] = 1e-3;
    frame.chi2pix[2] = 2.0 / 3.0;
    frame.xflux.assign(frame.flux.size(), 9.0);
    frame.pixmask_fraction.assign(frame.flux.size(), 0.5);
    ex2d::service::FrameOutputs out = outputs_of_r2();
    out.image_header.set_string("FLAVOR", "science");
    out.options.wmin = 6000.0;
    out.options.wmax = 6004.0;
    out.options.dw = 0.8;
    out.frame = ex2d::to_stored_frame(frame, out.options.dw);
    ASSERT_EQ(out.frame.scores.nbins, kNwave);

    ex2d::FrameProvenance prov;
    prov.image_header = out.image_header;
    prov.fibermap = out.fibermap;
    prov.options = out.options;
    const std::string direct = dir.file("direct.fits");
    ASSERT_TRUE(ex2d::write_frame(direct, frame, prov).is_ok());

    std::size_t bytes = 0;
    auto decoded = through_the_wire(out, bytes);
    ASSERT_TRUE(decoded.is_ok()) << decoded.status().to_string();
    const std::string via_result = dir.file("via-result.fits");
    ASSERT_TRUE(ex2d::write_frame(via_result, decoded.value().frame, prov).is_ok());
    EXPECT_EQ(file_bytes(direct), file_bytes(via_result));
    auto back = ex2d::read_frame(via_result);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back.value().flux[5], double(float(1.0 / 3.0)));
    EXPECT_NE(std::find(back.value().hdu_names.begin(), back.value().hdu_names.end(), "SCORES"),
              back.value().hdu_names.end());
}

TEST(ResultMessage, CarriesOnlyWhatTheFileHoldsInItsPrecision)
{
    ex2d::service::FrameOutputs out = outputs_of_r2();
    out.frame = ex2d::to_stored_frame(small_frame(3), 0.8);
    std::size_t bytes = 0;
    ASSERT_TRUE(through_the_wire(out, bytes).is_ok());
    const std::size_t n = std::size_t(kNspec) * kNwave;
    // flux, ivar, chi2pix, mask and RESOLUTION at 4 bytes, wave and 3 score columns at 8.
    const std::size_t arrays = 4 * (4 * n + n * kNdiag) + 8 * (kNwave + 3 * kNspec);
    EXPECT_LT(bytes, arrays + out.fibermap.fits_bytes.size() + 64 * 1024);
    EXPECT_GE(bytes, arrays + out.fibermap.fits_bytes.size());
}

TEST(ResultMessage, AFloat64FluxOrMissingScoresIsRefusedNamingTheField)
{
    ex2d::service::FrameOutputs out = outputs_of_r2();
    out.frame = ex2d::to_stored_frame(small_frame(3), 0.8);
    auto message = ex2d::service::encode_result(out);
    std::vector<double> wide(std::size_t(kNspec) * kNwave, 1.0);
    message.arrays[1] =
        ex2d::wire::ArrayPart::from_vector(ex2d::wire::DType::f64, wide, {kNspec, kNwave});
    ex2d::wire::DecodeError error;
    auto decoded = ex2d::wire::decode(ex2d::wire::encode(message), error);
    ASSERT_TRUE(decoded.has_value()) << error.detail;
    auto result = ex2d::service::decode_result(*decoded);
    ASSERT_FALSE(result.is_ok());
    EXPECT_NE(result.status().message().find("flux has the wrong dtype"), std::string::npos)
        << result.status().to_string();

    auto no_scores = ex2d::service::encode_result(out);
    no_scores.meta.erase("scores");
    decoded = ex2d::wire::decode(ex2d::wire::encode(no_scores), error);
    ASSERT_TRUE(decoded.has_value()) << error.detail;
    result = ex2d::service::decode_result(*decoded);
    ASSERT_FALSE(result.is_ok());
    EXPECT_NE(result.status().message().find("scores"), std::string::npos)
        << result.status().to_string();
}

}  // namespace result_message
