// SPDX-License-Identifier: BSD-3-Clause
// The fleet end to end with the real binaries and a real redis-server: outputs identical to
// `ex2d extract`, events, status, idempotent re-runs, inputs refused as `ex2d extract` refuses
// them, and the start-up safety checks.
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include <fitsio.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ex2d/exit_codes.hpp"
#include "ex2d/frame_io.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

const std::vector<std::string> kCameras = {"b0", "r0", "z0"};

TEST(FleetPipeline, ExposureMatchesExtractBitForBit)
{
    Fleet fleet("e2e");
    const auto preprocs = fleet.make_exposure(11, kCameras);
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("worker", "worker-2");
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(11), 0);
    ASSERT_TRUE(fleet.wait_exposure(11, 60));
    const Outcome o = fleet.check({11}, kCameras);
    expect_clean(o, "fleet e2e");
    EXPECT_EQ(o.done, 3);
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:00000011", "state"}).str, "done");

    expect_matches_extract(fleet, 11, kCameras, preprocs);
    // One event per frame and one for the exposure, for the next pipeline step.
    int frame_events = 0, exposure_events = 0;
    for (const auto& e : fleet.redis({"XRANGE", "ex2d:events", "-", "+"}).elements) {
        for (const auto& [k, v] : e.elements[1].pairs()) {
            if (k == "type" && v == "frame_done") ++frame_events;
            if (k == "type" && v == "exposure_done") ++exposure_events;
        }
    }
    EXPECT_EQ(frame_events, 3);
    EXPECT_EQ(exposure_events, 1);
    // The state is readable by operators: ex2dctl status --json.
    std::string out;
    ASSERT_EQ(fleet.ctl({"--json", "status", "--exposure", "11"}, &out), 0);
    const auto status = nlohmann::json::parse(out);
    EXPECT_EQ(status["exposure"]["done"], 3);
    EXPECT_EQ(status["frames"].size(), 3u);
    EXPECT_EQ(status["frames"][0]["state"], "done");
    EXPECT_EQ(status["frames"][0]["attempt"], "1");
}

std::size_t slot_files(const std::string& dir)
{
    std::size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        n += entry.path().filename().string().rfind("ex2d-slot-", 0) == 0 ? 1 : 0;
    }
    return n;
}

/// Frames and results through the receivers' shared-memory slots (docs/protocol.md, "Shared
/// memory"), then over the sockets where a sender cannot use them: the same files as `ex2d
/// extract` either way; slots go with a process that stops, and a killed one's are swept.
TEST(FleetPipeline, SharedMemoryAndSocketsCarryTheSameFrames)
{
    Fleet fleet("shm");
    std::map<int, std::vector<std::string>> preprocs;
    for (int expid : {21, 22, 23}) preprocs[expid] = fleet.make_exposure(expid, kCameras);
    Process& reader = fleet.start("reader", "reader-1");
    Process& worker = fleet.start("worker", "worker-1");
    Process& writer = fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(21), 0);
    ASSERT_TRUE(fleet.wait_exposure(21, 60));
    ASSERT_EQ(fleet.submit(22), 0);
    ASSERT_TRUE(fleet.wait_exposure(22, 60));
    const Outcome shared = fleet.check({21, 22}, kCameras);
    expect_clean(shared, "fleet shm");
    EXPECT_EQ(shared.done, 6);
    expect_matches_extract(fleet, 21, kCameras, preprocs[21]);
    expect_matches_extract(fleet, 22, kCameras, preprocs[22]);
    // Credits sent before the first frame reaches the worker lend no slot (no frame size is
    // known yet): the first frame and at most one more, as one of the two may have come back
    // idle (reader.credit_hold_ms) and gone out again after it. Every later frame, and every
    // result (the OFFER gives its size), goes through a slot.
    const int frames_over_socket = fleet.count_log_lines("frame sent to worker via=socket");
    EXPECT_GE(frames_over_socket, 1);
    EXPECT_LE(frames_over_socket, 2);
    EXPECT_EQ(fleet.count_log_lines("frame sent to worker via=shm"), 6 - frames_over_socket);
    EXPECT_EQ(fleet.count_log_lines("result sent via=shm"), 6);
    EXPECT_EQ(fleet.count_log_lines("dropped"), 0);

    // A writer that stops unlinks its slots; a worker killed leaves its own for the sweep.
    EXPECT_EQ(slot_files(fleet.shm_dir()), 2U + 1U) << "the worker's two and the writer's one";
    writer.signal(SIGTERM);
    reader.signal(SIGTERM);
    EXPECT_EQ(writer.wait(20), 0);
    EXPECT_EQ(reader.wait(20), 0);
    worker.signal(SIGKILL);
    worker.wait(20);
    EXPECT_EQ(slot_files(fleet.shm_dir()), 2U);

    // Senders without shared memory: the writer lends slots, the worker cannot use them and
    // sends its results over the socket, answering each lending so the slot comes back.
    fleet.start("reader", "reader-2", {{"zmq.shm_dir", ""}});
    fleet.start("worker", "worker-2", {{"zmq.shm_dir", ""}});
    fleet.start("writer", "writer-2");
    ASSERT_EQ(fleet.submit(23), 0);
    ASSERT_TRUE(fleet.wait_exposure(23, 60));
    const Outcome sockets = fleet.check({21, 22, 23}, kCameras);
    expect_clean(sockets, "fleet shm, then sockets");
    EXPECT_EQ(sockets.done, 9);
    expect_matches_extract(fleet, 23, kCameras, preprocs[23]);
    EXPECT_EQ(fleet.count_log_lines("frame sent to worker via=socket"), frames_over_socket + 3);
    EXPECT_EQ(fleet.count_log_lines("result sent via=socket"), 3);
    EXPECT_EQ(fleet.count_log_lines("removed 2 shared-memory slot(s)"), 1) << "writer-2's sweep";
    EXPECT_EQ(slot_files(fleet.shm_dir()), 1U) << "writer-2's one slot, returned each time";
}

TEST(FleetPipeline, ResubmittedExposureIsNotWrittenTwice)
{
    Fleet fleet("idempotent");
    fleet.make_exposure(12, {"r1"});
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(12), 0);
    ASSERT_TRUE(fleet.wait_exposure(12, 60));
    const std::string checksum = fleet.frame_field(12, "r1", "checksum");
    const auto mtime = std::filesystem::last_write_time(fleet.output_path(12, "r1"));
    // Without --force a done frame is not queued again; with it, the writer finds the same
    // provenance on disk and acknowledges without rewriting.
    std::string out;
    ASSERT_EQ(fleet.ctl({"submit", "--exposure-dir", fleet.dir() + "/preproc/20261122/00000012",
                         "--psf", fleet.psf_template(), "--output-root", fleet.dir() + "/out", "-w",
                         "6000,6100,0.8", "-n", "25", "--compression", "none"},
                        &out),
              0);
    EXPECT_NE(out.find("queued 0 frame(s), skipped 1"), std::string::npos) << out;
    ASSERT_EQ(fleet.submit(12, "20261122", {"--force"}), 0);
    ASSERT_TRUE(
        eventually(30, [&] { return fleet.count_log_lines("frame already written") == 1; }));
    ASSERT_TRUE(fleet.wait_exposure(12, 30));
    EXPECT_EQ(fleet.frame_field(12, "r1", "checksum"), checksum);
    EXPECT_EQ(std::filesystem::last_write_time(fleet.output_path(12, "r1")), mtime);
    const Outcome o = fleet.check({12}, {"r1"});
    std::printf("fleet resubmit: %s\n", o.report().c_str());
    EXPECT_EQ(o.lost + o.duplicates + o.partial, 0);
}

TEST(FleetPipeline, BadInputFailsWithItsReasonAndIsRequeuedOnceRepaired)
{
    Fleet fleet("badinput");
    const auto paths = fleet.make_exposure(13, {"b2", "r2"});
    // Truncate one preproc file: the reader's FITS validation must name it.
    std::filesystem::resize_file(paths[0], 5000);
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(13), 0);
    ASSERT_TRUE(fleet.wait_exposure(13, 60));
    EXPECT_EQ(fleet.frame_field(13, "b2", "state"), "failed");
    EXPECT_NE(fleet.frame_field(13, "b2", "error").find("preproc-b2-00000013.fits"),
              std::string::npos)
        << fleet.frame_field(13, "b2", "error");
    EXPECT_EQ(fleet.frame_field(13, "r2", "state"), "done");
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:00000013", "state"}).str,
              "done_with_errors");
    EXPECT_EQ(fleet.ctl({"wait", "--exposure", "13", "--timeout", "10"}), kExitWithErrors);
    EXPECT_FALSE(std::filesystem::exists(fleet.output_path(13, "b2")));
    // Once the file is repaired, the operator queues the failed frame again.
    std::filesystem::remove(paths[0]);
    fleet.make_exposure(13, {"b2"});
    std::string out;
    ASSERT_EQ(fleet.ctl({"requeue", "--exposure", "13"}, &out), 0);
    EXPECT_NE(out.find("requeued 1 frame(s)"), std::string::npos) << out;
    ASSERT_TRUE(eventually(30, [&] { return fleet.frame_field(13, "b2", "state") == "done"; }));
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:00000013", "state"}).str, "done");
    const Outcome o = fleet.check({13}, {"b2", "r2"});
    std::printf("fleet requeue: %s\n", o.report().c_str());
    EXPECT_EQ(o.done, 2);
    EXPECT_EQ(o.lost + o.duplicates + o.partial, 0);
}

TEST(FleetPipeline, WavelengthOutsideThePsfFailsWithExtractsMessage)
{
    Fleet fleet("waverange");
    const auto preprocs = fleet.make_exposure(14, {"r3"});
    // `ex2d extract` refuses a grid outside the PSF's wavelength range as a usage error ...
    Process tool("extract",
                 {EX2D_TOOL_PATH, "extract", "-i", preprocs[0], "-p", fleet.psf_path("r3"), "-o",
                  fleet.dir() + "/reference.fits", "-w", "1000,2000,0.8", "-n", "25"},
                 {}, fleet.dir() + "/logs/extract.log");
    ASSERT_EQ(tool.wait(60), kExitUsage);
    const std::string log = tool.log();
    const auto at = log.find("-w range 1000..2000 A is outside the range ");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string message = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(message.find(" A of PSF " + fleet.psf_path("r3")), std::string::npos) << message;
    // ... and the fleet fails the frame with the same message instead of writing zeros.
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.ctl({"submit", "--exposure-dir", fleet.dir() + "/preproc/20261122/00000014",
                         "--psf", fleet.psf_template(), "--output-root", fleet.dir() + "/out", "-w",
                         "1000,2000,0.8", "-n", "25", "--compression", "none"}),
              0);
    ASSERT_TRUE(fleet.wait_exposure(14, 60));
    EXPECT_EQ(fleet.frame_field(14, "r3", "state"), "failed");
    EXPECT_EQ(fleet.frame_field(14, "r3", "error"), "invalid argument: " + message);
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:00000014", "state"}).str,
              "done_with_errors");
    EXPECT_FALSE(std::filesystem::exists(fleet.output_path(14, "r3")));
    std::string out;
    ASSERT_EQ(fleet.ctl({"status", "--exposure", "14"}, &out), 0);
    EXPECT_NE(out.find("failed"), std::string::npos) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
}

TEST(FleetPipeline, ServicesRefuseARedisThatCanLoseWork)
{
    Fleet fleet("unsafe");
    fleet.redis({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    for (const char* role : {"reader", "worker", "writer"}) {
        Process& p = fleet.start(role, std::string(role) + "-unsafe");
        EXPECT_EQ(p.wait(20), kExitUsage) << role;
        EXPECT_NE(p.log().find("maxmemory-policy"), std::string::npos) << p.log();
    }
    fleet.redis({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    fleet.redis({"CONFIG", "SET", "appendonly", "no"});
    Process& p = fleet.start("reader", "reader-noaof");
    EXPECT_EQ(p.wait(20), kExitUsage);
    EXPECT_NE(p.log().find("appendonly"), std::string::npos) << p.log();
    Process& allowed = fleet.start("reader", "reader-allowed", {{"redis.allow_unsafe", "true"}});
    EXPECT_TRUE(eventually(10, [&] {
        return fleet.redis({"EXISTS", "ex2d:proc:reader-allowed"}).integer == 1;
    }));
    allowed.signal(SIGTERM);
    EXPECT_EQ(allowed.wait(25), 0);
}

/// Every card of a frame's FIBERMAP header but the checksums: keyword = value / comment.
std::vector<std::string> fibermap_cards(const std::string& path)
{
    fitsfile* f = nullptr;
    int status = 0, nkeys = 0;
    fits_open_file(&f, path.c_str(), READONLY, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &status);
    fits_get_hdrspace(f, &nkeys, nullptr, &status);
    std::vector<std::string> cards;
    for (int i = 1; i <= nkeys; ++i) {
        char key[FLEN_KEYWORD], value[FLEN_VALUE], comment[FLEN_COMMENT];
        fits_read_keyn(f, i, key, value, comment, &status);
        if (std::string(key) != "CHECKSUM" && std::string(key) != "DATASUM") {
            cards.push_back(std::string(key) + " = " + value + " / " + comment);
        }
    }
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0) << path;
    return cards;
}

TEST(FleetPipeline, WriterAnnotatesTheFibermapWithTheSitesTableAsExtractDoes)
{
    Fleet fleet("columns");
    const std::string bad = fleet.dir() + "/columns-bad.json";
    const std::string table = fleet.dir() + "/columns.json";
    std::ofstream(bad) << "[{\"name\": \"TARGET_RA\"";
    std::ofstream(table) << "[{\"name\": \"TARGET_RA\", \"unit\": \"deg\", "
                            "\"description\": \"Words of this site\"}]";
    // A table that cannot be read stops the writer at start, naming it.
    Process& refused = fleet.start("writer", "writer-bad", {{"writer.fibermap_columns", bad}});
    EXPECT_EQ(refused.wait(20), kExitUsage);
    EXPECT_NE(refused.log().find("columns-bad.json: fibermap column table: not valid JSON"),
              std::string::npos)
        << refused.log();

    const auto preprocs = fleet.make_exposure(12, {"r0"});
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", {{"writer.fibermap_columns", table}});
    ASSERT_EQ(fleet.submit(12), 0);
    ASSERT_TRUE(fleet.wait_exposure(12, 60));
    const std::string reference = fleet.dir() + "/reference-r0.fits";
    Process tool("extract",
                 {EX2D_TOOL_PATH, "extract", "-i", preprocs[0], "-p", fleet.psf_path("r0"), "-o",
                  reference, "-w", "6000,6100,0.8", "-n", "25", "--threads", "1", "--backend",
                  "cpu", "--fibermap-columns", table},
                 {}, fleet.dir() + "/logs/extract.log");
    ASSERT_EQ(tool.wait(60), 0);
    const std::vector<std::string> ours = fibermap_cards(fleet.output_path(12, "r0"));
    EXPECT_EQ(ours, fibermap_cards(reference));
    EXPECT_NE(std::find(ours.begin(), ours.end(), "TTYPE7 = 'TARGET_RA' / Words of this site"),
              ours.end());
    EXPECT_NE(std::find(ours.begin(), ours.end(), "TUNIT7 = 'deg     ' / TARGET_RA units"),
              ours.end());
}

}  // namespace
}  // namespace ex2d::fleet_test
