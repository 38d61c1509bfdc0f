// SPDX-License-Identifier: BSD-3-Clause
// Fleet correctness faults (docs/fault-tests.md, "Correctness"): every frame with its own
// FIBERMAP and identity, no stale writer over a finished frame, no orphaned temporary file,
// no result held for ever or dropped on the way to a writer.
#include <chrono>
#include <filesystem>
#include <thread>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "ex2d/fits_table.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/service/wire.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<long long> column(const FitsTableBlob& table, const char* name)
{
    auto values = read_int_column(table, name);
    EXPECT_TRUE(values.is_ok()) << name << ": " << values.status().to_string();
    return values.is_ok() ? values.value() : std::vector<long long>{};
}

long long inode_of(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (long long)st.st_ino : -1;
}

int attempts_above_one(Fleet& fleet, int expid, const std::vector<std::string>& cams)
{
    int n = 0;
    for (const auto& c : cams) n += fleet.frame_field(expid, c, "attempt") != "1";
    return n;
}

/// A fleet of one reader, one worker and a writer `name` that sleeps `delay_ms` with its
/// frame's temporary file complete, just before its rename; returns that writer once it sleeps.
/// `heartbeat_ttl_s` is that writer's: while it is stopped, the other writers take it for gone
/// (and sweep its temporary) once that long has passed since its last heartbeat.
Process& start_with_writer_stalled_before_rename(Fleet& fleet, int expid,
                                                 const std::string& delay_ms,
                                                 const std::string& heartbeat_ttl_s = "3")
{
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    Process& writer =
        fleet.start("writer", "writer-a", {{"service.heartbeat_ttl_s", heartbeat_ttl_s}},
                    {{"EX2D_TEST_DELAY_WRITE_MS", delay_ms}});
    EXPECT_EQ(fleet.submit(expid), 0);
    EXPECT_TRUE(eventually(30, [&] {
        return writer.log().find("EX2D_TEST_DELAY_WRITE_MS: sleeping") != std::string::npos;
    }));
    return writer;
}

// Six petals, three exposures, one reader reading all 18 frames in one process: every output
// carries the FIBER, TARGETID, CAMERA, EXPID and NIGHT of its own input.
TEST(FleetCorrectness, EveryFrameCarriesItsOwnFibermapAndIdentity)
{
    Fleet fleet("identity");
    const std::vector<std::string> cams = {"b0", "r1", "z2", "b3", "r4", "z5"};
    const std::vector<int> expids = {51, 52, 53};
    std::map<std::string, std::string> inputs;  // "expid camera" -> preproc path
    for (int expid : expids) {
        const std::vector<std::string> paths = fleet.make_exposure(expid, cams);
        for (std::size_t i = 0; i < cams.size(); ++i)
            inputs[std::to_string(expid) + " " + cams[i]] = paths[i];
    }
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("worker", "worker-2");
    fleet.start("writer", "writer-1");
    for (int expid : expids) ASSERT_EQ(fleet.submit(expid), 0);
    for (int expid : expids) ASSERT_TRUE(fleet.wait_exposure(expid, 120)) << expid;
    int compared = 0;
    for (int expid : expids) {
        for (const auto& cam : cams) {
            SCOPED_TRACE(cam + " " + std::to_string(expid));
            const std::string input = inputs.at(std::to_string(expid) + " " + cam);
            const std::string output = fleet.output_path(expid, cam);
            auto in_map = read_fibermap(input);
            auto out_map = read_fibermap(output);
            ASSERT_TRUE(in_map.is_ok()) << in_map.status().to_string();
            ASSERT_TRUE(out_map.is_ok()) << out_map.status().to_string();
            for (const char* name : {"FIBER", "TARGETID"}) {
                std::vector<long long> in = column(in_map.value(), name);
                in.resize(25);  // the frames hold spectra 0-24
                EXPECT_EQ(column(out_map.value(), name), in) << name;
            }
            EXPECT_EQ(column(out_map.value(), "FIBER").front(), 500LL * (cam[1] - '0'));
            auto header = read_frame_header(output);
            ASSERT_TRUE(header.is_ok()) << header.status().to_string();
            EXPECT_EQ(header.value().get_string("CAMERA").value_or(""), cam);
            EXPECT_EQ(header.value().get_int("EXPID").value_or(-1), expid);
            EXPECT_EQ(header.value().get_int("NIGHT").value_or(-1), 20261122);
            ++compared;
        }
    }
    EXPECT_EQ(compared, 18);
    expect_clean(fleet.check(expids, cams), "18 frames, 6 petals, one reader");
}

// Defence in depth: a frame whose FIBERMAP is another petal's (here r2's preproc file carries
// r1's table) is failed by the writer with the reason, and never written.
TEST(FleetCorrectness, WriterRefusesAFrameWhoseFibermapIsAnotherPetals)
{
    Fleet fleet("wrong-fibermap");
    const std::vector<std::string> paths = fleet.make_exposure(60, {"r1", "r2"});
    auto r1 = read_preproc(paths[0]);
    auto r2 = read_preproc(paths[1]);
    ASSERT_TRUE(r1.is_ok() && r2.is_ok());
    PreprocImage mixed = std::move(r2).value();
    mixed.fibermap = r1.value().fibermap;
    fs::remove(paths[1]);
    ASSERT_TRUE(write_preproc(paths[1], mixed).is_ok());
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(60), 0);
    ASSERT_TRUE(fleet.wait_exposure(60, 60));
    EXPECT_EQ(fleet.frame_field(60, "r1", "state"), "done");
    EXPECT_EQ(fleet.frame_field(60, "r2", "state"), "failed");
    const std::string error = fleet.frame_field(60, "r2", "error");
    EXPECT_NE(error.find("FIBERMAP row 0 is FIBER 500, expected 1000"), std::string::npos) << error;
    EXPECT_FALSE(fs::exists(fleet.output_path(60, "r2")));
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:00000060", "state"}).str,
              "done_with_errors");
    std::string status;
    EXPECT_EQ(fleet.ctl({"status", "--exposure", "60"}, &status), 0);
    EXPECT_NE(status.find("expected 1000"), std::string::npos) << status;
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
}

// A writer frozen right before its rename, past its lease, while another writer writes and
// acknowledges the frame: when it wakes, its rename refuses to replace the finished frame.
// Its heartbeat lives 60 s, so the other writer never takes it for gone and its temporary
// stays (before, with 3 s, a stop that outlasted the heartbeat on a busy machine let the other
// writer sweep the temporary, which the next test covers, and this one saw no "finish refused").
TEST(FleetCorrectness, WriterStalledBeforeItsRenameNeverReplacesTheFinishedFrame)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("stale-rename");
    fleet.make_exposure(54, {"r1"});
    // The delay sits between the last lease check and the rename.
    Process& stale = start_with_writer_stalled_before_rename(fleet, 54, "4000", "60");
    ASSERT_FALSE(::testing::Test::HasFailure());
    stale.signal(SIGSTOP);
    Process& fresh = fleet.start("writer", "writer-b");
    ASSERT_TRUE(fleet.wait_exposure(54, 60));
    const std::string path = fleet.output_path(54, "r1");
    const std::string checksum = fleet.frame_field(54, "r1", "checksum");
    const long long inode = inode_of(path);
    EXPECT_EQ(fleet.frame_field(54, "r1", "process"), "writer-b");
    stale.signal(SIGCONT);
    // Its fenced finish is the last thing the stalled writer does with this frame.
    ASSERT_TRUE(
        eventually(20, [&] { return stale.log().find("finish refused") != std::string::npos; }))
        << "the stalled writer's log:\n"
        << stale.log() << "writer-b's log:\n"
        << fresh.log();
    EXPECT_EQ(inode_of(path), inode) << "the finished frame was replaced";
    EXPECT_EQ(*wire::file_checksum128(path), checksum);
    EXPECT_EQ(std::to_string(fs::file_size(path)), fleet.frame_field(54, "r1", "bytes"));
    EXPECT_NE(stale.log().find("not renamed"), std::string::npos)
        << "the stalled writer must find the final name taken";
    EXPECT_EQ(stale.log().find("\"level\":\"error\""), std::string::npos)
        << "fenced out is a warning";
    expect_clean(fleet.check({54}, {"r1"}), "writer stalled before its rename");
}

// The same writer stopped until its heartbeat has lapsed: the other writer takes it for gone
// and sweeps its temporary. When it wakes, the missing temporary with the lease lost is a
// fenced-out write ("write abandoned ... stale_epoch", a warning), never an error, and the
// finished frame is untouched.
TEST(FleetCorrectness, WriterStalledPastItsHeartbeatFindsItsTemporarySweptAndStandsDown)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("swept-rename");
    fleet.make_exposure(56, {"r1"});
    Process& stale = start_with_writer_stalled_before_rename(fleet, 56, "4000", "3");
    ASSERT_FALSE(::testing::Test::HasFailure());
    stale.signal(SIGSTOP);
    Process& fresh = fleet.start("writer", "writer-b");
    ASSERT_TRUE(fleet.wait_exposure(56, 60));
    const std::string path = fleet.output_path(56, "r1");
    const long long inode = inode_of(path);
    const std::string checksum = fleet.frame_field(56, "r1", "checksum");
    ASSERT_TRUE(eventually(30, [&] { return temporaries_under(fleet.dir() + "/out") == 0; }))
        << "writer-b's log:\n"
        << fresh.log();
    stale.signal(SIGCONT);
    ASSERT_TRUE(
        eventually(20, [&] { return stale.log().find("write abandoned") != std::string::npos; }))
        << "the stalled writer's log:\n"
        << stale.log() << "writer-b's log:\n"
        << fresh.log();
    EXPECT_NE(stale.log().find("removed by another writer's sweep"), std::string::npos)
        << stale.log();
    EXPECT_EQ(stale.log().find("\"level\":\"error\""), std::string::npos)
        << "fenced out is a warning";
    EXPECT_EQ(inode_of(path), inode) << "the finished frame was replaced";
    EXPECT_EQ(*wire::file_checksum128(path), checksum);
    EXPECT_EQ(fleet.frame_field(56, "r1", "error"), "");
    expect_clean(fleet.check({56}, {"r1"}), "writer stalled past its heartbeat");
}

// A writer frozen mid-write, whose frame another writer finishes, and which is then killed:
// its temporary file is removed within heartbeat_ttl_s + sweep_interval_s (3 + 0.5 s here).
TEST(FleetCorrectness, TemporaryOfAWriterKilledMidWriteIsRemoved)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("orphan-tmp");
    fleet.make_exposure(55, {"z2"});
    Process& victim = start_with_writer_stalled_before_rename(fleet, 55, "30000");
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_EQ(temporaries_under(fleet.dir() + "/out"), 1);
    victim.signal(SIGSTOP);
    fleet.start("writer", "writer-b");
    ASSERT_TRUE(fleet.wait_exposure(55, 60));
    victim.signal(SIGKILL);
    EXPECT_EQ(victim.wait(5), 128 + SIGKILL);
    const auto killed = Clock::now();
    ASSERT_TRUE(eventually(10, [&] { return temporaries_under(fleet.dir() + "/out") == 0; }))
        << "the dead writer's temporary file is still there";
    const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
    std::printf("temporary removed %.1f s after the kill\n", seconds);
    EXPECT_LT(seconds, 3.0 + 0.5 + 2.0);
    // The sweep removes each file, then its ledger entry (the temporary's, then the name it
    // would have set aside): the ledger empties a moment after the file is gone.
    EXPECT_TRUE(eventually(5, [&] {
        return fleet.redis({"HLEN", "ex2d:temporaries"}).integer == 0;
    })) << "the dead writer's ledger entries are still there";
    expect_clean(fleet.check({55}, {"z2"}), "writer killed mid-write");
}

// A writer restarted under a new name on the same endpoint: once the old name's entry is
// removed, results still flow to the new one, and nothing is re-delivered.
TEST(FleetCorrectness, WriterRestartedOnTheSameEndpointUnderANewNameKeepsResultsFlowing)
{
    Fleet fleet("same-endpoint");
    // Entries silent for ten heartbeat lifetimes are removed: 10 s here.
    fleet.settings["service.heartbeat_ttl_s"] = "1";
    fleet.settings["service.heartbeat_interval_s"] = "0.25";
    fleet.settings["worker.result_timeout_s"] = "8";
    const std::map<std::string, std::string> shared = {
        {"zmq.bind", "ipc://" + fleet.dir() + "/writer-shared.sock"}};
    const std::vector<std::string> cams = {"b0", "r0", "z0"};
    fleet.make_exposure(56, cams);
    fleet.make_exposure(57, cams);
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    Process& old_writer = fleet.start("writer", "writer-a", shared);
    ASSERT_EQ(fleet.submit(56), 0);
    ASSERT_TRUE(fleet.wait_exposure(56, 60));
    old_writer.signal(SIGKILL);
    old_writer.wait(5);
    fleet.start("writer", "writer-b", shared);
    ASSERT_TRUE(eventually(30, [&] {
        return fleet.redis({"HEXISTS", "ex2d:endpoints", "writer-a"}).integer == 0;
    })) << "the old name's entry was never removed";
    ASSERT_EQ(fleet.submit(57), 0);
    ASSERT_TRUE(fleet.wait_exposure(57, 30)) << "results stopped flowing to the restarted writer";
    EXPECT_EQ(attempts_above_one(fleet, 57, cams), 0);
    EXPECT_EQ(fleet.count_log_lines("result not delivered"), 0);
    expect_clean(fleet.check({56, 57}, cams), "writer restarted on the same endpoint");
}

// With no writer at all, a worker does not hold its extracted frame for ever: it hands it back
// after worker.result_timeout_s, and the frame is written once a writer comes.
TEST(FleetCorrectness, ResultNoWriterTakesIsHandedBackWithinItsBound)
{
    Fleet fleet("no-writer");
    fleet.settings["worker.result_timeout_s"] = "3";
    fleet.make_exposure(58, {"r2"});
    fleet.start("reader", "reader-1");
    Process& worker = fleet.start("worker", "worker-1");
    ASSERT_EQ(fleet.submit(58), 0);
    ASSERT_TRUE(eventually(
        30, [&] { return worker.log().find("\"msg\":\"extracted") != std::string::npos; }));
    const auto extracted = Clock::now();
    ASSERT_TRUE(eventually(
        15, [&] { return worker.log().find("result not delivered") != std::string::npos; }));
    const double held = std::chrono::duration<double>(Clock::now() - extracted).count();
    std::printf("result held %.1f s before it was handed back (bound 3 s)\n", held);
    EXPECT_LT(held, 3.0 + 2.0);
    // The hand-back is logged after its Redis round trip, a moment after the warning.
    EXPECT_TRUE(eventually(10, [&] {
        return worker.log().find("handed back job=nightly/00000058/r2") != std::string::npos;
    }));
    fleet.start("writer", "writer-1");
    ASSERT_TRUE(fleet.wait_exposure(58, 60));
    EXPECT_EQ(fleet.frame_field(58, "r2", "state"), "done");
    expect_clean(fleet.check({58}, {"r2"}), "no writer, then a writer");
}

// Fast workers and one slow writer over tcp:// (where ZMTP heartbeats run): results wait with
// their workers until the writer grants room, so none is dropped and none re-delivered.
TEST(FleetCorrectness, SlowWriterOverTcpLosesNoResult)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("slow-writer");
    fleet.settings["zmq.bind"] = "tcp://127.0.0.1:*";
    const std::vector<std::string> cams = {"b0", "b1", "b2", "r0", "r1", "r2"};
    fleet.make_exposure(59, cams);
    fleet.start("reader", "reader-1");
    for (const char* name : {"worker-1", "worker-2", "worker-3"}) fleet.start("worker", name);
    // Each write stalls longer than the heartbeat timeout (3 s) with the writer not reading.
    fleet.start("writer", "writer-1", {}, {{"EX2D_TEST_DELAY_WRITE_MS", "3500"}});
    ASSERT_EQ(fleet.submit(59), 0);
    ASSERT_TRUE(fleet.wait_exposure(59, 120));
    EXPECT_EQ(attempts_above_one(fleet, 59, cams), 0) << "a result was re-delivered";
    EXPECT_EQ(fleet.count_log_lines("result not delivered"), 0);
    EXPECT_EQ(fleet.count_log_lines("lease was lost"), 0);
    expect_clean(fleet.check({59}, cams), "slow writer over tcp");
}

}  // namespace
}  // namespace ex2d::fleet_test
