// SPDX-License-Identifier: BSD-3-Clause
// Trace shifts in the fleet (issue 31, items 5 and 6): the reader shifts the traces before the
// worker extracts, records the shifts in the frame's header and Redis hash and can write the
// shifted PSF where desi_proc does; a frame it cannot measure is extracted with the input PSF
// and flagged, never silently. With reader.trace_shifts_in worker the worker runs the same
// step on its host side, overlapping the extraction of the frame before, and every output is
// the one the reader's placement gives.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "ex2d/psf_io.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;

int extract_reference(Fleet& fleet, const std::string& preproc, const std::string& output)
{
    Process tool(
        "extract",
        {EX2D_TOOL_PATH, "extract", "-i", preproc, "-p", fleet.psf_path("r0"), "-o", output, "-w",
         "6000,6100,0.8", "-n", "25", "--threads", "1", "--backend", "cpu", "--psferr", "0.01"},
        {}, fleet.dir() + "/logs/extract.log");
    return tool.wait(60);
}

// Forced to continuum (x only) on the harness's small science frame: the shifts are measured,
// recorded and the shifted PSF is written beside the frame; the worker extracted with it.
TEST(FleetTraceShifts, ContinuumShiftsRecordedAndPsfWritten)
{
    Fleet fleet("traceshift");
    const auto preprocs = fleet.make_exposure(81, {"r0"});
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(81, "20261122", {"--trace-shifts", "continuum", "--write-shifted-psf"}),
              0);
    ASSERT_TRUE(fleet.wait_exposure(81, 90));
    EXPECT_EQ(fleet.frame_field(81, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(81, "r0", "trace_shifts"), "continuum");
    const double meandx = std::stod(fleet.frame_field(81, "r0", "meandx"));
    EXPECT_LT(std::fabs(meandx), 0.02) << "the frame was simulated through the PSF's traces";
    EXPECT_EQ(fleet.frame_field(81, "r0", "meandy"), "0.0000");

    auto frame = read_frame(fleet.output_path(81, "r0"));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().header.get_string("TRSHIFT").value_or(""), "continuum");
    EXPECT_NEAR(frame.value().header.get_double("MEANDX").value_or(99), meandx, 1e-4);
    EXPECT_EQ(frame.value().header.get_string("ORIG_PSF").value_or(""), fleet.psf_path("r0"));

    const std::string shifted =
        fs::path(fleet.output_path(81, "r0")).parent_path() / "psf-r0-00000081.fits";
    auto psf = read_psf(shifted);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    EXPECT_EQ(psf.value().psf_header.get_string("IN_PSF").value_or(""), fleet.psf_path("r0"));
    EXPECT_EQ(psf.value().psf_header.get_string("IN_IMAGE").value_or(""), preprocs[0]);
    expect_clean(fleet.check({81}, {"r0"}), "trace-shifted frame");
}

// desi_proc's choice for a SCIENCE frame is sky; the small frame (6000-6100 A) has no sky
// line: the rule is to extract with the input PSF and flag the frame in its header and in
// Redis, with the reason.
TEST(FleetTraceShifts, FrameWithoutSkyLinesIsFlaggedAndExtractedWithTheInputPsf)
{
    Fleet fleet("traceshift-fail");
    const auto preprocs = fleet.make_exposure(82, {"r0"});
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(82, "20261122", {"--trace-shifts", "auto"}), 0);
    ASSERT_TRUE(fleet.wait_exposure(82, 90));
    EXPECT_EQ(fleet.frame_field(82, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(82, "r0", "trace_shifts"), "failed");
    const std::string reason = fleet.frame_field(82, "r0", "trace_shift_error");
    EXPECT_NE(reason.find("no reference line"), std::string::npos) << reason;
    EXPECT_NE(reason.find(preprocs[0]), std::string::npos) << reason;

    auto frame = read_frame(fleet.output_path(82, "r0"));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().header.get_string("TRSHIFT").value_or(""), "FAILED");
    EXPECT_FALSE(frame.value().header.get_string("TRSHFAIL").value_or("").empty());
    const std::string reference = fleet.dir() + "/reference-82.fits";
    ASSERT_EQ(extract_reference(fleet, preprocs[0], reference), 0);
    auto b = read_frame(reference);
    ASSERT_TRUE(b.is_ok());
    EXPECT_EQ(frame.value().flux, b.value().flux) << "extracted with the input PSF";
    EXPECT_GE(fleet.count_log_lines("trace-shifts failed"), 1);
}

/// What a fleet made of one exposure: each frame's file and shifted PSF (bytes; "" where none)
/// and the fields of its Redis hash that do not depend on which process or when (not the
/// checksum of the file: its CHECKSUM cards say when each HDU was written).
struct PlacedRun {
    std::map<std::string, std::string> frames, psfs;
    std::map<std::string, std::map<std::string, std::string>> fields;
    Outcome outcome;
    int reader_steps = 0;  ///< trace-shift steps the reader ran (measured or failed)
    int worker_steps = 0;  ///< and the worker
};

std::string file_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int count_in(const std::string& text, const std::string& what)
{
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

/// The exposure through 1 reader, 1 worker (credit 2, so that a frame's step can overlap the
/// extraction of the one before) and 1 writer, with the step at `placement`. Every run of a
/// test uses the same folder, so that paths (and so header cards) are the same.
PlacedRun run_with_step_in(const std::string& placement, int expid,
                           const std::vector<std::string>& cameras,
                           const std::vector<std::string>& submit_args)
{
    PlacedRun run;
    Fleet fleet("traceshift-placement");
    fleet.make_exposure(expid, cameras);
    Process& reader = fleet.start("reader", "reader-1", {{"reader.trace_shifts_in", placement}});
    Process& worker = fleet.start("worker", "worker-1", {{"worker.credit", "2"}});
    fleet.start("writer", "writer-1");
    EXPECT_EQ(fleet.submit(expid, "20261122", submit_args), 0);
    EXPECT_TRUE(fleet.wait_exposure(expid, 120)) << placement;
    for (const std::string& camera : cameras) {
        const std::string output = fleet.output_path(expid, camera);
        run.frames[camera] = file_bytes(output);
        run.psfs[camera] = file_bytes(fs::path(output).parent_path() /
                                      ("psf-" + camera + "-" + expid8(expid) + ".fits"));
        const auto hash =
            fleet.redis({"HGETALL", "ex2d:frame:nightly:" + expid8(expid) + ":" + camera});
        for (const auto& [k, v] : hash.pairs()) {
            if (k == "state" || k == "bytes" || k == "error" || k == "trace_shifts" ||
                k == "trace_shift_error" || k.rfind("mean", 0) == 0 || k.rfind("min", 0) == 0 ||
                k.rfind("max", 0) == 0) {
                run.fields[camera][k] = v;
            }
        }
    }
    run.outcome = fleet.check({expid}, cameras);
    const auto steps = [](const std::string& log) {
        return count_in(log, "trace-shifts method=") + count_in(log, "trace-shifts failed method=");
    };
    run.reader_steps = steps(reader.log());
    run.worker_steps = steps(worker.log());
    return run;
}

/// A FITS file's HDUs: each one's header cards and data bytes (padding included).
struct Hdu {
    std::vector<std::string> cards;
    std::string data;
};

std::vector<Hdu> hdus_of(const std::string& file)
{
    constexpr std::size_t kBlock = 2880;
    std::vector<Hdu> hdus;
    std::size_t at = 0;
    while (at + kBlock <= file.size()) {
        Hdu hdu;
        long long bitpix = 8, naxis = 0, pcount = 0, gcount = 1, count = 1;
        for (bool end = false; !end && at + kBlock <= file.size(); at += kBlock) {
            for (std::size_t c = 0; c < kBlock; c += 80) {
                const std::string card = file.substr(at + c, 80);
                const std::string key = card.substr(0, 8);
                const auto value = [&] { return std::stoll(card.substr(10, 20)); };
                if (key == "BITPIX  ") bitpix = value();
                if (key == "NAXIS   ") naxis = value();
                if (key.rfind("NAXIS", 0) == 0 && key != "NAXIS   ") count *= value();
                if (key == "PCOUNT  ") pcount = value();
                if (key == "GCOUNT  ") gcount = value();
                if (key == "END     ") end = true;
                if (!end && key != "        ") hdu.cards.push_back(card);
                if (end) break;
            }
        }
        const long long bytes = naxis > 0 ? std::llabs(bitpix) / 8 * gcount * (pcount + count) : 0;
        const std::size_t padded = std::size_t((bytes + kBlock - 1) / kBlock * kBlock);
        hdu.data = file.substr(at, padded);
        at += padded;
        hdus.push_back(std::move(hdu));
    }
    return hdus;
}

/// Every HDU the same: each header card (CHECKSUM aside, and DATASUM's comment: they hold the
/// time the HDU was written, and CHECKSUM's value follows from that) and every data byte.
void expect_same_fits(const std::string& what, const std::string& a, const std::string& b)
{
    const std::vector<Hdu> x = hdus_of(a), y = hdus_of(b);
    ASSERT_EQ(x.size(), y.size()) << what << ": HDUs";
    for (std::size_t h = 0; h < x.size(); ++h) {
        const auto cards = [](const Hdu& hdu) {
            std::vector<std::string> kept;
            for (const auto& c : hdu.cards) {
                if (c.rfind("DATASUM =", 0) == 0)
                    kept.push_back(c.substr(0, 30));
                else if (c.rfind("CHECKSUM=", 0) != 0)
                    kept.push_back(c);
            }
            return kept;
        };
        EXPECT_EQ(cards(x[h]), cards(y[h])) << what << ": HDU " << h << " header";
        EXPECT_TRUE(x[h].data == y[h].data) << what << ": HDU " << h << " data";
    }
}

void expect_same_outputs(const PlacedRun& reader, const PlacedRun& worker)
{
    expect_clean(reader.outcome, "trace shifts in the reader");
    expect_clean(worker.outcome, "trace shifts in the worker");
    for (const auto& [camera, frame] : reader.frames) {
        EXPECT_GE(hdus_of(frame).size(), 8u) << camera;
        expect_same_fits("frame " + camera, frame, worker.frames.at(camera));
        expect_same_fits("shifted PSF " + camera, reader.psfs.at(camera), worker.psfs.at(camera));
        EXPECT_EQ(reader.fields.at(camera), worker.fields.at(camera)) << camera;
        EXPECT_EQ(reader.fields.at(camera).at("state"), "done") << camera;
    }
}

// The same frames with the step in the reader and in the worker: measured (continuum), the
// shifted PSFs written, every output identical in every byte, the Redis fields too; each
// placement's process ran every step and the other none.
TEST(FleetTraceShifts, StepInTheWorkerGivesTheReadersOutputs)
{
    const std::vector<std::string> cameras{"r0", "r1", "r2"};
    const std::vector<std::string> args{"--trace-shifts", "continuum", "--write-shifted-psf"};
    const PlacedRun reader = run_with_step_in("reader", 83, cameras, args);
    const PlacedRun worker = run_with_step_in("worker", 83, cameras, args);
    expect_same_outputs(reader, worker);
    EXPECT_EQ(reader.fields.at("r0").at("trace_shifts"), "continuum");
    EXPECT_FALSE(reader.psfs.at("r0").empty()) << "--write-shifted-psf";
    EXPECT_EQ(reader.reader_steps, 3);
    EXPECT_EQ(reader.worker_steps, 0);
    EXPECT_EQ(worker.reader_steps, 0);
    EXPECT_EQ(worker.worker_steps, 3);
}

// A step that cannot measure (sky lines asked of a frame without any) follows the same rule
// in the worker: extracted with the input PSF, TRSHIFT 'FAILED' with the reason, the same
// Redis fields; and a frame with no step to run (--trace-shifts none) is recorded the same.
TEST(FleetTraceShifts, FailingStepInTheWorkerFollowsTheReadersRule)
{
    const std::vector<std::string> cameras{"r0", "r1"};
    const PlacedRun reader = run_with_step_in("reader", 84, cameras, {"--trace-shifts", "auto"});
    const PlacedRun worker = run_with_step_in("worker", 84, cameras, {"--trace-shifts", "auto"});
    expect_same_outputs(reader, worker);
    EXPECT_EQ(worker.fields.at("r0").at("trace_shifts"), "failed");
    EXPECT_NE(worker.fields.at("r0").at("trace_shift_error").find("no reference line"),
              std::string::npos);
    EXPECT_EQ(worker.worker_steps, 2);

    const PlacedRun none_reader =
        run_with_step_in("reader", 85, {"r0"}, {"--trace-shifts", "none"});
    const PlacedRun none_worker =
        run_with_step_in("worker", 85, {"r0"}, {"--trace-shifts", "none"});
    expect_same_outputs(none_reader, none_worker);
    EXPECT_EQ(none_worker.fields.at("r0").at("trace_shifts"), "none");
    EXPECT_EQ(none_worker.worker_steps, 0) << "nothing to measure, no thread";
}

// The worker's step runs while its device (here its CPU) extracts the frame before: with an
// extraction of 1.5 s and a step of 0.3 s, only the first frame waits for its step; the
// others' steps end while the frame before is extracted.
TEST(FleetTraceShifts, WorkersStepOverlapsTheExtractionOfTheFrameBefore)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("traceshift-overlap");
    const std::vector<std::string> cameras{"r0", "r1", "r2"};
    fleet.make_exposure(86, cameras);
    fleet.start("reader", "reader-1", {{"reader.trace_shifts_in", "worker"}});
    Process& worker = fleet.start(
        "worker", "worker-1", {{"worker.credit", "2"}},
        {{"EX2D_TEST_DELAY_EXTRACT_MS", "1500"}, {"EX2D_TEST_DELAY_TRACE_SHIFTS_MS", "300"}});
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(86, "20261122", {"--trace-shifts", "continuum"}), 0);
    ASSERT_TRUE(fleet.wait_exposure(86, 120));
    expect_clean(fleet.check({86}, cameras), "overlapped steps");
    const std::string log = worker.log();
    EXPECT_EQ(count_in(log, "trace-shift step done on the worker"), 3);
    EXPECT_EQ(count_in(log, "extraction started trace_shift_wait_s="), 3);
    EXPECT_EQ(count_in(log, "extraction started trace_shift_wait_s=0.000"), 2) << log;
}

// SIGTERM while the worker's step runs: the frame goes back at once and the worker exits 0;
// another worker extracts it, with its own step, and the frame is written once.
TEST(FleetTraceShifts, FrameHandedBackWhileItsStepRunsIsWrittenOnce)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("traceshift-drain");
    fleet.make_exposure(87, {"r0"});
    fleet.start("reader", "reader-1", {{"reader.trace_shifts_in", "worker"}});
    fleet.start("writer", "writer-1");
    Process& a =
        fleet.start("worker", "worker-a", {}, {{"EX2D_TEST_DELAY_TRACE_SHIFTS_MS", "3000"}});
    ASSERT_EQ(fleet.submit(87, "20261122", {"--trace-shifts", "continuum"}), 0);
    ASSERT_TRUE(eventually(30, [&] {
        return a.log().find("EX2D_TEST_DELAY_TRACE_SHIFTS_MS: sleeping") != std::string::npos;
    }));
    a.signal(SIGTERM);
    EXPECT_EQ(a.wait(10), 0);
    EXPECT_EQ(count_in(a.log(), "trace-shift step done on the worker"), 0);
    EXPECT_EQ(fleet.frame_field(87, "r0", "meandx"), "") << "the handed-back step records nothing";
    Process& b = fleet.start("worker", "worker-b");
    ASSERT_TRUE(fleet.wait_exposure(87, 90));
    EXPECT_EQ(fleet.frame_field(87, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(87, "r0", "trace_shifts"), "continuum");
    EXPECT_EQ(count_in(b.log(), "trace-shift step done on the worker"), 1);
    auto frame = read_frame(fleet.output_path(87, "r0"));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().header.get_string("TRSHIFT").value_or(""), "continuum");
    expect_clean(fleet.check({87}, {"r0"}), "handed back during its step");
}

}  // namespace
}  // namespace ex2d::fleet_test
