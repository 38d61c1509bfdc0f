// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl's command line against a real redis-server: options that `ex2d extract` refuses are
// refused with its message before anything is queued, --exposure takes exposure ids only,
// parse errors exit with the usage code, Redis unreachable and wait's outcomes with theirs (the
// one table, ex2d/exit_codes.hpp), a process whose heartbeat is overdue is shown as stale, and
// an exposure's timings come out in desi_proc's --timingfile form.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ex2d/exit_codes.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

std::vector<std::string> submit_args(Fleet& fleet, const std::vector<std::string>& options)
{
    std::vector<std::string> args = {"submit",
                                     "--exposure-dir",
                                     fleet.dir() + "/preproc/20261122/00000021",
                                     "--psf",
                                     fleet.psf_template(),
                                     "--output-root",
                                     fleet.dir() + "/out",
                                     "--compression",
                                     "none"};
    args.insert(args.end(), options.begin(), options.end());
    return args;
}

long long now_ms()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

TEST(FleetCtl, SubmitRefusesWhatExtractRefusesAndQueuesNothing)
{
    Fleet fleet("ctl-submit");
    const auto preprocs = fleet.make_exposure(21, {"r0"});
    struct Refused {
        std::vector<std::string> options;
        std::string message;  ///< `ex2d extract`'s, from the same function
    };
    const std::vector<Refused> cases = {
        {{"-n", "-5"}, "nspec -5 is not a positive multiple of bundlesize 25"},
        {{"-n", "30"}, "nspec 30 is not a positive multiple of bundlesize 25"},
        {{"-s", "3", "-n", "25"}, "specmin 3 is not on a bundle boundary (bundlesize 25)"},
        {{"-w", "7000,6000,0.8"},
         "-w/--wavelength must be 'wmin,wmax,dw' with wmax > wmin and dw > 0, got '7000,6000,0.8'"},
        {{"-w", "6000,7000,0"},
         "-w/--wavelength must be 'wmin,wmax,dw' with wmax > wmin and dw > 0, got '6000,7000,0'"},
        {{"--psferr", "-0.5"}, "--psferr must be >= 0, got -0.5"},
    };
    for (const Refused& c : cases) {
        std::string out;
        EXPECT_EQ(fleet.ctl(submit_args(fleet, c.options), &out), kExitUsage) << c.message;
        EXPECT_EQ(out.rfind("ex2dctl: " + c.message, 0), 0u) << out;
        EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
        std::vector<std::string> extract = {EX2D_TOOL_PATH, "extract",
                                            "-i",           preprocs[0],
                                            "-p",           fleet.psf_path("r0"),
                                            "-o",           fleet.dir() + "/frame.fits"};
        extract.insert(extract.end(), c.options.begin(), c.options.end());
        Process tool("extract", extract, {}, fleet.dir() + "/logs/extract.log");
        EXPECT_EQ(tool.wait(60), kExitUsage) << c.message;
        EXPECT_NE(tool.log().find(c.message), std::string::npos) << tool.log();
    }
    EXPECT_EQ(fleet.redis({"DBSIZE"}).integer, 0);
    // The same command line with valid options queues the frame.
    ASSERT_EQ(fleet.ctl(submit_args(fleet, {"-w", "6000,6100,0.8", "-n", "25"})), 0);
    EXPECT_EQ(fleet.redis({"XLEN", "ex2d:jobs:nightly"}).integer, 1);
}

TEST(FleetCtl, ExposureMustBeAnExposureId)
{
    Fleet fleet("ctl-expid");
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"status", "--exposure", "notanumber"}, "notanumber"},
        {{"requeue", "--exposure", "abc"}, "abc"},
        {{"wait", "--exposure", "12x"}, "12x"},
        {{"status", "--exposure", "123456789"}, "123456789"},
    };
    for (const auto& [args, text] : cases) {
        std::string out;
        EXPECT_EQ(fleet.ctl(args, &out), kExitUsage) << args[0];
        EXPECT_NE(
            out.find("ex2dctl: --exposure: an exposure id is 1 to 8 digits, got '" + text + "'"),
            std::string::npos)
            << out;
    }
    std::string out;
    EXPECT_EQ(fleet.ctl({"--json", "status", "--exposure", "00000021"}, &out), 0) << out;
}

TEST(FleetCtl, ParseErrorsExitWithTheUsageCode)
{
    Fleet fleet("ctl-parse");
    const std::vector<std::vector<std::string>> cases = {
        {},                               // no subcommand
        {"status", "--no-such-option"},   // unknown option
        {"status", "--night"},            // option without its value
        {"campaign", "explode", "jura"},  // not one of pause/resume/cancel
        {"submit", "--psf", "p", "--output-root", "o", "-n", "many"},  // not a number
    };
    for (const auto& args : cases) {
        std::string out;
        EXPECT_EQ(fleet.ctl(args, &out), kExitUsage) << out;
        EXPECT_EQ(out.rfind("ex2dctl: ", 0), 0u) << out;
        EXPECT_NE(out.find("(run with --help for more information)"), std::string::npos) << out;
    }
    std::string out;
    EXPECT_EQ(fleet.ctl({"--help"}, &out), 0) << out;
}

// The codes only ex2dctl has: wait on an exposure still open when --timeout passes, and any
// command with its Redis gone. (An exposure that ended with errors: FleetPipeline.)
TEST(FleetCtl, WaitTimeoutAndRedisUnreachableHaveTheirCodes)
{
    Fleet fleet("ctl-codes");
    fleet.make_exposure(24, {"r0"});
    ASSERT_EQ(fleet.submit(24), 0);  // no service runs: the frame stays queued
    std::string out;
    EXPECT_EQ(fleet.ctl({"wait", "--exposure", "24", "--timeout", "0.3"}, &out), kExitTimeout)
        << out;
    EXPECT_NE(out.find("ex2dctl: timed out after 0.3 s"), std::string::npos) << out;
    fleet.kill_redis();
    EXPECT_EQ(fleet.ctl({"status"}, &out), kExitRedis) << out;
    // wait waits for Redis as for the exposure, up to its --timeout.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(fleet.ctl({"wait", "--exposure", "24", "--timeout", "1.5"}, &out), kExitRedis) << out;
    EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.5);
}

// Redis restarted (or cut off) while a night's script waits: the wait goes on, says so once,
// and ends with the exposure.
TEST(FleetCtl, WaitRidesOutRedisBeingAway)
{
    Fleet fleet("ctl-wait-redis");
    const std::vector<std::string> cams = {"r0", "r1"};
    fleet.make_exposure(25, cams);
    ASSERT_EQ(fleet.submit(25), 0);
    fleet.kill_redis();
    Process& wait = fleet.start_ctl("ctl-wait", {"wait", "--exposure", "25", "--timeout", "120"});
    std::this_thread::sleep_for(std::chrono::seconds(2));
    EXPECT_TRUE(wait.running()) << wait.log();
    fleet.restart_redis();
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1");
    EXPECT_EQ(wait.wait(60), kExitOk) << wait.log();
    const std::string log = wait.log();
    EXPECT_NE(log.find("Connection refused; still waiting"), std::string::npos) << log;
    EXPECT_NE(log.find("Redis reachable again"), std::string::npos) << log;
    EXPECT_NE(log.find("exposure 00000025 (nightly): 2/2 done, 0 failed, 0 dead"),
              std::string::npos)
        << log;
    expect_clean(fleet.check({25}, cams), "ex2dctl wait across a Redis restart");
}

TEST(FleetCtl, OverdueHeartbeatIsShownAsStale)
{
    Fleet fleet("ctl-stale");
    // Process hashes as a keeper writes them; ex2dctl's heartbeat_ttl_s is the default 15 s,
    // so one that beat 60 s ago is overdue even though its hash is still there.
    const long long now = now_ms();
    for (const auto& [name, age_ms] :
         {std::pair<std::string, long long>{"worker-old", 60000}, {"worker-new", 0}}) {
        const std::string beat = std::to_string(now - age_ms);
        fleet.redis({"HSET", "ex2d:proc:" + name, "role", "worker", "host", "h", "pid", "1",
                     "heartbeat_at", beat, "state", "ready"});
        fleet.redis({"ZADD", "ex2d:procs", beat, name});
    }
    std::string out;
    ASSERT_EQ(fleet.ctl({"--json", "workers"}, &out), 0) << out;
    std::map<std::string, std::string> state;
    for (const auto& p : nlohmann::json::parse(out)) state[p["name"]] = p["state"];
    EXPECT_EQ(state["worker-old"], "stale");
    EXPECT_EQ(state["worker-new"], "ready");

    ASSERT_EQ(fleet.ctl({"workers"}, &out), 0) << out;
    const auto old_line = out.substr(out.find("worker-old"));
    EXPECT_NE(old_line.substr(0, old_line.find('\n')).find(" stale "), std::string::npos) << out;

    ASSERT_EQ(fleet.ctl({"--json", "status"}, &out), 0) << out;
    state.clear();
    const auto status = nlohmann::json::parse(out);
    for (const auto& p : status["processes"]) state[p["name"]] = p["state"];
    EXPECT_EQ(state["worker-old"], "stale");
    EXPECT_EQ(state["worker-new"], "ready");

    // The global options also after the subcommand, as an operator types them.
    ASSERT_EQ(fleet.ctl({"status", "--json"}, &out), 0) << out;
    const auto status_after = nlohmann::json::parse(out);
    std::map<std::string, std::string> state_after;
    for (const auto& p : status_after["processes"]) state_after[p["name"]] = p["state"];
    EXPECT_EQ(state_after, state);
}

}  // namespace
}  // namespace ex2d::fleet_test

namespace ex2d::fleet_test {
namespace {

nlohmann::json read_json_file(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str(), nullptr, false);
}

// An exposure's timings in desi_proc's --timingfile form, from the frames' transition times:
// one timer per written frame, the steps in order, an existing file augmented.
TEST(FleetCtl, TimingOfAnExposureInDesiProcForm)
{
    const std::vector<std::string> cameras = {"b0", "r0", "z0"};
    Fleet fleet("ctl-timing");
    fleet.make_exposure(23, cameras);
    const std::string timing = fleet.dir() + "/timing-00000023.json";
    std::ofstream(timing) << R"({"preproc": {"n": 3}})";
    std::string out;
    EXPECT_EQ(fleet.ctl({"timing", "--exposure", "23", "--timingfile", timing}, &out), kExitUsage)
        << out;  // nothing submitted yet: no written frame
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1");
    const long long submitted = now_ms();
    ASSERT_EQ(fleet.submit(23), 0);
    ASSERT_EQ(
        fleet.ctl({"wait", "--exposure", "23", "--timeout", "60", "--timingfile", timing}, &out), 0)
        << out;
    const long long ended = now_ms();
    const nlohmann::json doc = read_json_file(timing);
    ASSERT_TRUE(doc.is_object()) << out;
    EXPECT_EQ(doc.at("preproc").at("n"), 3);  // kept
    double summed = 0;
    for (const char* step : {"read", "extract", "write"}) {
        ASSERT_TRUE(doc.contains(step)) << doc.dump();
        EXPECT_EQ(doc.at(step).at("n"), 3) << step;
        EXPECT_GE(doc.at(step).at("duration.min").get<double>(), 0.0) << step;
        summed += doc.at(step).at("duration.max").get<double>();
    }
    EXPECT_GT(doc.at("extract").at("duration.min").get<double>(), 0.0);
    EXPECT_LT(summed, (ended - submitted) / 1000.0 * 3 + 1);
    EXPECT_LE(doc.at("read").at("start.min").get<std::string>(),
              doc.at("extract").at("start.min").get<std::string>());
    EXPECT_LE(doc.at("extract").at("stop.max").get<std::string>(),
              doc.at("write").at("stop.max").get<std::string>());
}

}  // namespace
}  // namespace ex2d::fleet_test
