// SPDX-License-Identifier: BSD-3-Clause
// The writer's write threads (docs/protocol.md, "Writer credit"): the next result travels
// while a frame is written, and a writer drained in the middle of a write hands its job back
// for another writer to write once, leaving no temporary file.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "fleet_expect.hpp"
#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// One structured log line: its time (ms since the epoch, UTC) and job.
struct Event {
    long long ms = -1;
    std::string job;
};

/// The string value of `"key":"..."` in a JSON log line (values here carry no escapes).
std::string json_field(const std::string& line, const std::string& key)
{
    const std::string tag = "\"" + key + "\":\"";
    const auto at = line.find(tag);
    if (at == std::string::npos) return {};
    const auto start = at + tag.size();
    return line.substr(start, line.find('"', start) - start);
}

/// "2026-11-23T10:00:00.123Z" -> ms since the epoch.
long long parse_ts(const std::string& ts)
{
    std::tm utc{};
    int millis = 0;
    if (std::sscanf(ts.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &utc.tm_year, &utc.tm_mon, &utc.tm_mday,
                    &utc.tm_hour, &utc.tm_min, &utc.tm_sec, &millis) != 7) {
        return -1;
    }
    utc.tm_year -= 1900;
    utc.tm_mon -= 1;
    return (long long)::timegm(&utc) * 1000 + millis;
}

/// The lines of `process`'s log whose message starts with `msg`, in log order.
std::vector<Event> events(const Process& process, const std::string& msg)
{
    std::vector<Event> out;
    std::istringstream in(process.log());
    for (std::string line; std::getline(in, line);) {
        if (line.find("\"msg\":\"" + msg) == std::string::npos) continue;
        out.push_back({parse_ts(json_field(line, "ts")), json_field(line, "job")});
    }
    return out;
}

long long time_of(const std::vector<Event>& list, const std::string& job)
{
    for (const Event& e : list) {
        if (e.job == job) return e.ms;
    }
    return -1;
}

// One worker and one writer (credit 1, one write thread) whose writes take 3 s each: while
// the first frame is written, the second frame's RESULT is granted and received, and the
// writer's /healthz answers at once. All three frames are written once, with their identity.
TEST(FleetWriter, KeepsReceivingWhileItWrites)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("writer-overlap");
    const std::vector<std::string> cams = {"b0", "r0", "z0"};
    const int expid = 70;
    const std::vector<std::string> inputs = fleet.make_exposure(expid, cams);
    fleet.start("reader", "reader-1");
    Process& worker = fleet.start("worker", "worker-1");
    Process& writer =
        fleet.start("writer", "writer-1", {{"writer.credit", "1"}, {"writer.write_threads", "1"}},
                    {{"EX2D_TEST_DELAY_WRITE_MS", "3000"}});
    ASSERT_EQ(fleet.submit(expid), 0);

    ASSERT_TRUE(eventually(60, [&] {
        return writer.log().find("EX2D_TEST_DELAY_WRITE_MS: sleeping") != std::string::npos;
    }));
    const std::string address = fleet.redis({"HGET", "ex2d:proc:writer-1", "http"}).str;
    ASSERT_FALSE(address.empty()) << "the writer registered no HTTP address";
    const auto asked = Clock::now();
    const std::string health = http_get(address, "/healthz");
    const double answered_s = std::chrono::duration<double>(Clock::now() - asked).count();
    std::printf("/healthz answered in %.3f s during a write\n", answered_s);
    EXPECT_NE(health.find(" 200"), std::string::npos) << health;
    EXPECT_LT(answered_s, 1.0);
    EXPECT_TRUE(events(writer, "frame written").empty()) << "the probe came after the first write";

    ASSERT_TRUE(fleet.wait_exposure(expid, 120));
    // The writer logs "frame written" after the Redis commit that ends the exposure.
    EXPECT_TRUE(
        eventually(10, [&] { return events(writer, "frame written output=").size() >= 3; }));
    const std::vector<Event> received = events(writer, "result received from worker=");
    const std::vector<Event> written = events(writer, "frame written output=");
    const std::vector<Event> sent = events(worker, "result sent");
    ASSERT_EQ(received.size(), 3u);
    ASSERT_EQ(written.size(), 3u);
    ASSERT_EQ(sent.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        SCOPED_TRACE(received[i].job);
        ASSERT_GT(received[i].ms, 0);
        // One write thread: frames are written in the order they were received.
        EXPECT_EQ(written[i].job, received[i].job);
        EXPECT_GE(written[i].ms - received[i].ms, 3000) << "the write did not take the delay";
    }
    for (std::size_t i = 1; i < 3; ++i) {
        // The result of frame i reached the writer before frame i-1 was written.
        const long long sent_ms = time_of(sent, received[i].job);
        std::printf("frame %zu: sent %lld ms and received %lld ms before frame %zu was written\n",
                    i + 1, written[i - 1].ms - sent_ms, written[i - 1].ms - received[i].ms, i);
        EXPECT_GT(sent_ms, 0);
        EXPECT_LT(sent_ms, written[i - 1].ms);
        EXPECT_LT(received[i].ms, written[i - 1].ms) << "the transfer did not overlap the write";
    }

    for (std::size_t i = 0; i < cams.size(); ++i) {
        SCOPED_TRACE(cams[i]);
        EXPECT_EQ(fleet.frame_field(expid, cams[i], "state"), "done");
        EXPECT_EQ(fleet.frame_field(expid, cams[i], "attempt"), "1") << "re-delivered";
        const std::string output = fleet.output_path(expid, cams[i]);
        EXPECT_EQ(fleet.count_log_lines("\"msg\":\"frame written output=" + output + " "), 1);
        EXPECT_EQ(identity_mismatch(inputs[i], output, cams[i], expid), "");
    }
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
    const Outcome o = fleet.check({expid}, cams);
    expect_clean(o, "writer receiving while it writes");
    EXPECT_EQ(o.done, 3);
}

// SIGTERM to a writer 1 s into a write of 8 s, with a drain deadline of 2 s: the writer exits
// 0 at its deadline, hands its job back and removes its temporary file itself (no sweep, no
// other writer running); a second writer started afterwards writes the frame once.
TEST(FleetWriter, DrainedMidWriteHandsItsJobBackToAnotherWriter)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("writer-drain");
    const int expid = 71;
    const std::vector<std::string> inputs = fleet.make_exposure(expid, {"r0"});
    const double drain_s = 2.0;
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    Process& first = fleet.start("writer", "writer-a", {{"service.drain_timeout_s", "2"}},
                                 {{"EX2D_TEST_DELAY_WRITE_MS", "8000"}});
    ASSERT_EQ(fleet.submit(expid), 0);
    ASSERT_TRUE(eventually(60, [&] {
        return first.log().find("EX2D_TEST_DELAY_WRITE_MS: sleeping") != std::string::npos;
    }));
    EXPECT_EQ(fleet.frame_field(expid, "r0", "state"), "writing");
    EXPECT_EQ(fleet.frame_field(expid, "r0", "process"), "writer-a");
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 1) << "the write is in progress";

    const auto term = Clock::now();
    first.signal(SIGTERM);
    const int code = first.wait(drain_s + 5.0);
    const double exit_s = std::chrono::duration<double>(Clock::now() - term).count();
    std::printf("writer drained mid-write exited %d after %.2f s (deadline %.1f s)\n", code, exit_s,
                drain_s);
    EXPECT_EQ(code, 0);
    EXPECT_GE(exit_s, drain_s - 0.1) << "it must wait for the write up to its deadline";
    EXPECT_LT(exit_s, drain_s + 3.0);
    EXPECT_NE(first.log().find("drain deadline reached during a write"), std::string::npos);
    EXPECT_NE(first.log().find("handed back job=nightly/00000071/r0 attempt=1 result=applied"),
              std::string::npos)
        << first.log();
    EXPECT_EQ(first.log().find("\"msg\":\"frame written"), std::string::npos);
    EXPECT_NE(first.log().find("removed 1 temporary file(s) of the unfinished write"),
              std::string::npos);
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0)
        << "the drained writer left its temporary file";
    EXPECT_EQ(fleet.redis({"HLEN", "ex2d:temporaries"}).integer, 0) << "nor a ledger entry";
    EXPECT_FALSE(fs::exists(fleet.output_path(expid, "r0")));

    Process& second = fleet.start("writer", "writer-b");
    ASSERT_TRUE(fleet.wait_exposure(expid, 60));
    const std::string output = fleet.output_path(expid, "r0");
    EXPECT_EQ(fleet.frame_field(expid, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(expid, "r0", "process"), "writer-b");
    EXPECT_EQ(fleet.frame_field(expid, "r0", "attempt"), "2");
    EXPECT_EQ(fleet.count_log_lines("\"msg\":\"frame written output=" + output + " "), 1);
    EXPECT_NE(second.log().find("\"msg\":\"frame written output=" + output + " "),
              std::string::npos);
    EXPECT_EQ(identity_mismatch(inputs[0], output, "r0", expid), "");
    EXPECT_EQ(fleet.redis({"HLEN", "ex2d:temporaries"}).integer, 0);
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
    const Outcome o = fleet.check({expid}, {"r0"});
    expect_clean(o, "writer drained mid-write");
    EXPECT_EQ(o.done, 1);
}

}  // namespace
}  // namespace ex2d::fleet_test
