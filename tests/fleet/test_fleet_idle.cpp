// SPDX-License-Identifier: BSD-3-Clause
// An idle fleet sleeps: no process (Redis included) spends 1% of a core while there is no
// work, and a job submitted to it is taken within 50 ms (a reader waits in XREADGROUP BLOCK,
// a worker in poll(); docs/fleet.md, "Idle").
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>

#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

/// CPU seconds (user + system) a process has used, from /proc/PID/stat.
double cpu_seconds(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    // Fields after the command name, which is in parentheses and may hold spaces.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return double(utime + stime) / double(::sysconf(_SC_CLK_TCK));
}

long long field_ms(Fleet& fleet, int expid, const std::string& camera, const std::string& field)
{
    return std::atoll(fleet.frame_field(expid, camera, field).c_str());
}

TEST(FleetIdle, AnIdleFleetSleepsAndTakesAJobWithin50Ms)
{
    Fleet fleet("idle");
    // The shipped timers, not the fault tests' short ones: this measures the product.
    for (const char* key :
         {"queue.lease_s", "queue.reaper_interval_s", "service.heartbeat_interval_s",
          "service.heartbeat_ttl_s", "zmq.discovery_interval_s", "zmq.peer_timeout_s",
          "reader.credit_hold_ms", "writer.sweep_interval_s"}) {
        fleet.settings.erase(key);
    }
    fleet.make_exposure(61, {"r0"});
    std::map<std::string, pid_t> pids = {{"redis-server", fleet.redis_pid()}};
    for (const char* role : {"reader", "worker", "writer"}) {
        pids[role] = fleet.start(role, std::string(role) + "-1").pid();
    }
    ASSERT_TRUE(eventually(30, [&] {
        return fleet.redis({"HGET", "ex2d:proc:worker-1", "state"}).str == "ready" &&
               fleet.redis({"HGET", "ex2d:proc:reader-1", "state"}).str == "ready" &&
               fleet.redis({"HGET", "ex2d:proc:writer-1", "state"}).str == "ready";
    }));
    std::this_thread::sleep_for(std::chrono::seconds(3));  // past start-up and first discovery
    constexpr double kWindow = 60.0;
    std::map<std::string, double> before;
    for (const auto& [name, pid] : pids) before[name] = cpu_seconds(pid);
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindow));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& [name, pid] : pids) {
        const double share = (cpu_seconds(pid) - before[name]) / elapsed;
        std::printf("idle %-12s %.3f%% of a core over %.0f s\n", name.c_str(), 100.0 * share,
                    elapsed);
        EXPECT_LT(share, 0.01) << name << " is busy while the fleet is idle";
    }

    ASSERT_EQ(fleet.submit(61), 0);
    ASSERT_TRUE(fleet.wait_exposure(61, 60));
    const long long queued = field_ms(fleet, 61, "r0", "queued_at");
    const long long taken = field_ms(fleet, 61, "r0", "reading_at") - queued;
    const long long extracting = field_ms(fleet, 61, "r0", "extracting_at") - queued;
    std::printf(
        "job taken by the reader %lld ms after it was queued, extraction started after %lld ms\n",
        taken, extracting);
    EXPECT_GE(taken, 0);
    EXPECT_LT(taken, 50) << "the idle reader did not take the job at once";
    EXPECT_EQ(fleet.frame_field(61, "r0", "state"), "done");
}

}  // namespace
}  // namespace ex2d::fleet_test
