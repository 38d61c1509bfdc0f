// SPDX-License-Identifier: BSD-3-Clause
// The fleet under faults (docs/fault-tests.md): kill -9 of each role in the middle of a frame,
// a worker stopped past its lease, Redis killed and restarted, a poison frame, workers joining
// and draining. Every test prints and asserts lost = 0, duplicates = 0 and partial = 0.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "ex2d/service/wire.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

std::vector<std::string> cameras(int n)
{
    std::vector<std::string> out;
    out.reserve(std::size_t(n));
    for (int i = 0; i < n; ++i)
        out.push_back(std::string(1, "brz"[i / 10]) + std::to_string(i % 10));
    return out;
}

// A frame held by `process` in `state`, as the ledger shows it; empty if none.
std::string frame_held_by(Fleet& fleet, int expid, const std::vector<std::string>& cams,
                          const std::string& state, const std::string& process)
{
    for (const auto& c : cams) {
        if (fleet.frame_field(expid, c, "state") == state &&
            fleet.frame_field(expid, c, "process") == process) {
            return c;
        }
    }
    return {};
}

struct KillCase {
    const char* role;
    const char* state;
    const char* delay;
};

class KillMidFrame : public ::testing::TestWithParam<KillCase> {};

TEST_P(KillMidFrame, FrameIsRecoveredOnceWithNothingPartial)
{
    EX2D_REQUIRE_TEST_HOOKS();
    const KillCase k = GetParam();
    Fleet fleet(std::string("kill-") + k.role);
    const auto cams = cameras(4);
    fleet.make_exposure(31, cams);
    const std::string victim = std::string(k.role) + "-victim";
    // The victim is slow in its stage so that the kill lands in the middle of a frame; it
    // starts first so that it is the one holding the first frame.
    Process& v = fleet.start(k.role, victim, {}, {{k.delay, "3000"}});
    for (const char* role : {"reader", "worker", "writer"}) {
        if (std::string(role) != k.role) fleet.start(role, std::string(role) + "-1");
    }
    ASSERT_EQ(fleet.submit(31), 0);
    std::string held;
    ASSERT_TRUE(eventually(
        30, [&] { return !(held = frame_held_by(fleet, 31, cams, k.state, victim)).empty(); }));
    v.signal(SIGKILL);
    EXPECT_EQ(v.wait(5), 128 + SIGKILL);
    fleet.start(k.role, std::string(k.role) + "-2");
    ASSERT_TRUE(fleet.wait_exposure(31, 60));
    if (std::string(k.role) == "writer") {
        // The victim's temporary file goes once its registration expires (ttl 3 s) and a
        // writer sweeps (every 0.5 s).
        EXPECT_TRUE(eventually(10, [&] {
            return fleet.redis({"HLEN", "ex2d:temporaries"}).integer == 0;
        }));
    }
    expect_clean(fleet.check({31}, cams), (std::string("kill -9 ") + k.role).c_str());
    EXPECT_GE(std::stoi(fleet.frame_field(31, held, "attempt")), 2) << held;
}

INSTANTIATE_TEST_SUITE_P(
    Roles, KillMidFrame,
    ::testing::Values(KillCase{"reader", "reading", "EX2D_TEST_DELAY_READ_MS"},
                      KillCase{"worker", "extracting", "EX2D_TEST_DELAY_EXTRACT_MS"},
                      KillCase{"writer", "writing", "EX2D_TEST_DELAY_WRITE_MS"}),
    [](const auto& info) { return std::string(info.param.role); });

TEST(FleetFaults, WorkerStoppedPastItsLeaseIsFenced)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("sigstop");
    fleet.make_exposure(32, {"r3"});
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    Process& a = fleet.start("worker", "worker-a", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "3000"}});
    ASSERT_EQ(fleet.submit(32), 0);
    ASSERT_TRUE(
        eventually(20, [&] { return fleet.frame_field(32, "r3", "state") == "extracting"; }));
    a.signal(SIGSTOP);
    fleet.start("worker", "worker-b");
    ASSERT_TRUE(fleet.wait_exposure(32, 30));
    EXPECT_EQ(fleet.frame_field(32, "r3", "attempt"), "2");
    EXPECT_EQ(fleet.frame_field(32, "r3", "process"), "writer-1");
    const std::string checksum = fleet.frame_field(32, "r3", "checksum");
    a.signal(SIGCONT);
    // A wakes, finds its lease gone and drops its result; nothing it does reaches the file.
    ASSERT_TRUE(eventually(20, [&] {
        return fleet.count_log_lines("lease was lost") +
                   fleet.count_log_lines("result refused: stale_epoch") >=
               1;
    }));
    EXPECT_EQ(*wire::file_checksum128(fleet.output_path(32, "r3")), checksum);
    expect_clean(fleet.check({32}, {"r3"}), "SIGSTOP worker past lease");
}

TEST(FleetFaults, RedisKilledAndRestartedLosesNothing)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("redis-restart");
    const auto cams = cameras(8);
    fleet.make_exposure(33, cams);
    fleet.start("reader", "reader-1");
    Process& w1 = fleet.start("worker", "worker-1", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "400"}});
    Process& w2 = fleet.start("worker", "worker-2", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "400"}});
    Process& wr = fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(33), 0);
    ASSERT_TRUE(eventually(30, [&] {
        return std::atoi(
                   fleet.redis({"HGET", "ex2d:exposure:nightly:00000033", "n_done"}).str.c_str()) >=
               2;
    }));
    fleet.kill_redis();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    fleet.restart_redis();
    ASSERT_TRUE(fleet.wait_exposure(33, 60));
    expect_clean(fleet.check({33}, cams), "redis kill -9 and restart");
    EXPECT_TRUE(w1.running() && w2.running() && wr.running())
        << "services must ride out a Redis restart";
    EXPECT_GE(
        fleet.count_log_lines("redis connection lost") + fleet.count_log_lines("redis unreachable"),
        1);
}

// Services started while Redis is down wait for it with backoff (and a log line) instead of
// exiting, then run an exposure once it is up; SIGTERM during the wait is a clean exit.
TEST(FleetFaults, ServicesStartedBeforeRedisWaitForIt)
{
    Fleet fleet("redis-late");
    fleet.make_exposure(35, {"r0", "r1"});
    fleet.kill_redis();
    std::vector<Process*> services;
    for (const char* role : {"reader", "worker", "writer"}) {
        services.push_back(&fleet.start(role, std::string(role) + "-1"));
    }
    Process& quitter = fleet.start("worker", "worker-quits");
    // Each of the four logs its wait; none exits however long the outage lasts.
    EXPECT_TRUE(
        eventually(30, [&] { return fleet.count_log_lines("redis unreachable, retrying") >= 4; }))
        << fleet.count_log_lines("redis unreachable, retrying") << " wait lines";
    std::this_thread::sleep_for(std::chrono::seconds(2));
    for (Process* p : services)
        EXPECT_TRUE(p->running()) << p->name() << " exited while Redis was down";
    quitter.signal(SIGTERM);
    EXPECT_EQ(quitter.wait(10), 0) << "SIGTERM while waiting for Redis";
    fleet.restart_redis();
    ASSERT_EQ(fleet.submit(35), 0);
    ASSERT_TRUE(fleet.wait_exposure(35, 60));
    expect_clean(fleet.check({35}, {"r0", "r1"}), "services started before Redis");
}

TEST(FleetFaults, PoisonFrameIsDeadLetteredAndTheRestCompletes)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("poison");
    const auto cams = cameras(4);
    fleet.make_exposure(34, cams);
    fleet.settings["queue.max_deliveries"] = "3";
    // A longer lease than the other tests: on a loaded machine a 2 s lease can lapse under a
    // live holder, and such extra deliveries must not be mistaken for poison here.
    fleet.settings["queue.lease_s"] = "4";
    fleet.env["EX2D_TEST_POISON_JOB"] = "nightly/00000034/b1";
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    // A supervisor restarts workers that die, as Slurm or Kubernetes would.
    std::vector<Process*> workers = {&fleet.start("worker", "worker-1"),
                                     &fleet.start("worker", "worker-2")};
    ASSERT_EQ(fleet.submit(34), 0);
    int restarts = 0;
    const bool finished = eventually(120, [&] {
        for (auto*& w : workers) {
            if (!w->running()) w = &fleet.start("worker", "worker-r" + std::to_string(++restarts));
        }
        const std::string state =
            fleet.redis({"HGET", "ex2d:exposure:nightly:00000034", "state"}).str;
        return state == "done_with_errors";
    });
    ASSERT_TRUE(finished);
    EXPECT_EQ(fleet.frame_field(34, "b1", "state"), "dead");
    EXPECT_EQ(restarts, 3) << "one worker death per delivery";
    const auto dead = fleet.redis({"XRANGE", "ex2d:dead", "-", "+"});
    ASSERT_EQ(dead.elements.size(), 1u);
    std::map<std::string, std::string> entry;
    for (const auto& [k, v] : dead.elements[0].elements[1].pairs()) entry[k] = v;
    EXPECT_EQ(entry["job"], "nightly/00000034/b1");
    EXPECT_EQ(entry["attempts"], "4");
    EXPECT_NE(
        entry["reason"].find("extraction started 3 times, delivered 4 times (max_deliveries 3)"),
        std::string::npos)
        << entry["reason"];
    std::string out;
    ASSERT_EQ(fleet.ctl({"status"}, &out), 0);
    EXPECT_NE(out.find("nightly/00000034/b1: extraction started 3 times"), std::string::npos)
        << out;
    const Outcome o = fleet.check({34}, cams);
    expect_clean(o, "poison frame");
    EXPECT_EQ(o.dead, 1);
    EXPECT_EQ(o.done, 3);
}

TEST(FleetFaults, WorkerJoinsAndAnotherDrainsMidRun)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("join-drain");
    const auto cams = cameras(10);
    fleet.make_exposure(35, cams);
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    Process& w1 = fleet.start("worker", "worker-1", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "500"}});
    ASSERT_EQ(fleet.submit(35), 0);
    auto n_done = [&] {
        return std::atoi(
            fleet.redis({"HGET", "ex2d:exposure:nightly:00000035", "n_done"}).str.c_str());
    };
    ASSERT_TRUE(eventually(30, [&] { return n_done() >= 2; }));
    fleet.start("worker", "worker-2", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "500"}});
    ASSERT_TRUE(eventually(30, [&] { return n_done() >= 4; }));
    ASSERT_EQ(fleet.ctl({"drain", "worker-1"}), 0);
    EXPECT_EQ(w1.wait(25), 0) << "a drained worker exits 0 within the drain timeout";
    ASSERT_TRUE(fleet.wait_exposure(35, 60));
    expect_clean(fleet.check({35}, cams), "worker added and drained");
    EXPECT_GE(fleet.count_log_lines("\"name\":\"worker-2\",\"host\""), 1);
    EXPECT_TRUE(eventually(10, [&] { return fleet.count_log_lines("worker=worker-2") >= 2; }))
        << "the new worker took frames";
}

TEST(FleetFaults, SigtermMidFrameFinishesTheFrameAndExitsZero)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("sigterm");
    fleet.make_exposure(36, {"z4"});
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    Process& w = fleet.start("worker", "worker-1", {}, {{"EX2D_TEST_DELAY_EXTRACT_MS", "2000"}});
    ASSERT_EQ(fleet.submit(36), 0);
    ASSERT_TRUE(
        eventually(20, [&] { return fleet.frame_field(36, "z4", "state") == "extracting"; }));
    const auto t0 = std::chrono::steady_clock::now();
    w.signal(SIGTERM);
    EXPECT_EQ(w.wait(25), 0);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 25.0);
    ASSERT_TRUE(fleet.wait_exposure(36, 20));
    EXPECT_EQ(fleet.frame_field(36, "z4", "attempt"), "1")
        << "finished by the draining worker itself";
    expect_clean(fleet.check({36}, {"z4"}), "SIGTERM mid-frame");
}

TEST(FleetFaults, SlowWorkerKeepsTheReaderBounded)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("slow-worker");
    const auto cams = cameras(8);
    fleet.make_exposure(37, cams);
    Process& r = fleet.start("reader", "reader-1", {{"reader.prefetch", "1"}});
    fleet.start("writer", "writer-1");
    fleet.start("worker", "worker-1", {{"worker.credit", "2"}},
                {{"EX2D_TEST_DELAY_EXTRACT_MS", "700"}});
    ASSERT_EQ(fleet.submit(37), 0);
    // A frame stays "reading" from the reader's take until a worker starts extracting it: the
    // reader's prefetch (1) plus the frames sent on the worker's credit (2) that wait in its
    // queue. The rest waits in Redis, and the reader's memory does not grow.
    int most_held = 0, samples = 0;
    long rss_start = r.rss_kib(), rss_max = rss_start;
    // One Lua call reads every frame's state at one instant; reading them one HGET at a time
    // could count a frame entering "reading" and another still in it a moment apart.
    std::vector<std::string> count_reading = {
        "EVAL",
        "local n = 0 for _, k in ipairs(KEYS) do "
        "if redis.call('HGET', k, 'state') == 'reading' then n = n + 1 end end return n",
        std::to_string(cams.size())};
    for (const auto& c : cams) count_reading.push_back("ex2d:frame:nightly:00000037:" + c);
    eventually(60, [&] {
        const int held = int(fleet.redis(count_reading).as_int(0));
        most_held = std::max(most_held, held);
        rss_max = std::max(rss_max, r.rss_kib());
        ++samples;
        return fleet.redis({"HGET", "ex2d:exposure:nightly:00000037", "state"}).str == "done";
    });
    std::printf(
        "slow worker: reader held at most %d frame(s) over %d samples, RSS %ld -> %ld KiB\n",
        most_held, samples, rss_start, rss_max);
    EXPECT_LE(most_held, 1 + 2) << "prefetch + worker credit";
    EXPECT_LT(rss_max - rss_start, 64 * 1024);
    expect_clean(fleet.check({37}, cams), "slow worker");
}

}  // namespace
}  // namespace ex2d::fleet_test
