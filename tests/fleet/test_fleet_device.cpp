// SPDX-License-Identifier: BSD-3-Clause
// A failing GPU (docs/operations.md, "A failing GPU"): the stand-in backend fails in the middle
// of a frame as a device would (an Xid, an uncorrectable ECC error). The frame goes back to the
// queue at once and another worker finishes it; the failing worker exits with kExitDevice for
// its supervisor to restart; once its host's device has failed worker.max_device_failures times
// within the window, a restarted worker takes no work, shows as retired and stays up.
#include <csignal>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

#if EX2D_TEST_HOOKS

std::string this_host()
{
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

std::string make_standin_frame(Fleet& fleet, const std::string& preproc)
{
    std::string frame = fleet.dir() + "/standin-r0.fits";
    Process tool("extract",
                 {EX2D_TOOL_PATH, "extract", "-i", preproc, "-p", fleet.psf_path("r0"), "-o", frame,
                  "-w", "6000,6100,0.8", "-n", "25", "--threads", "1", "--backend", "cpu"},
                 {}, fleet.dir() + "/logs/extract.log");
    EXPECT_EQ(tool.wait(60), 0);
    return frame;
}

TEST(FleetDevice, FailingDeviceHandsTheFrameBackExitsAndIsRetiredAfterThreeFailures)
{
    Fleet fleet("device-failure");
    const std::vector<std::string> cameras = {"r0", "r1", "r2", "r3"};
    const auto preprocs = fleet.make_exposure(41, cameras);
    fleet.make_exposure(42, cameras);
    const std::string frame = make_standin_frame(fleet, preprocs[0]);
    const std::map<std::string, std::string> standin = {{"worker.backend", "standin"},
                                                        {"worker.standin_frame", frame},
                                                        {"worker.standin_delay_s", "1"}};
    std::map<std::string, std::string> failing = standin;
    failing["worker.standin_device_failure_at_batch"] = "1";

    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    // Three lives of the failing worker (its supervisor restarting it), alone in the fleet,
    // each failing its first frame; then a healthy worker finishes the exposure.
    ASSERT_EQ(fleet.submit(41), 0);
    for (int life = 1; life <= 3; ++life) {
        Process& bad = fleet.start("worker", "gpu-worker-" + std::to_string(life), failing);
        EXPECT_EQ(bad.wait(30), kExitDevice) << "life " << life << "\n" << bad.log();
        const std::string log = bad.log();
        EXPECT_NE(log.find("failed mid-frame: stand-in backend: device failure injected at "
                           "batch 1"),
                  std::string::npos)
            << log;
        EXPECT_NE(log.find("the frame goes back to the queue and this worker exits with code 8"),
                  std::string::npos)
            << log;
        EXPECT_NE(log.find("handed back job=nightly/00000041/"), std::string::npos) << log;
    }
    // Device 1 of the host: device 0's failures are not its own.
    std::map<std::string, std::string> healthy = standin;
    healthy["worker.device"] = "1";
    fleet.start("worker", "gpu1-worker", healthy);
    ASSERT_TRUE(fleet.wait_exposure(41, 60));
    const Outcome first = fleet.check({41}, cameras);
    expect_clean(first, "device failures x3");
    EXPECT_EQ(first.done, 4);
    EXPECT_EQ(first.dead, 0);
    EXPECT_EQ(fleet.redis({"ZCARD", "ex2d:device_failures:" + this_host() + ":standin0"}).as_int(),
              3);

    // The fourth life is retired: up, not ready, state retired, no frame taken.
    Process& retired = fleet.start("worker", "gpu-worker-4", failing);
    ASSERT_TRUE(eventually(20, [&] {
        return fleet.redis({"HGET", "ex2d:proc:gpu-worker-4", "state"}).str == "retired";
    })) << retired.log();
    EXPECT_NE(retired.log().find("failed 3 times within 3600 s (worker.max_device_failures 3): "
                                 "this worker takes no work"),
              std::string::npos)
        << retired.log();
    ASSERT_EQ(fleet.submit(42), 0);
    ASSERT_TRUE(fleet.wait_exposure(42, 60));
    const Outcome second = fleet.check({41, 42}, cameras);
    expect_clean(second, "retired worker beside a healthy one");
    EXPECT_EQ(second.done, 8);
    EXPECT_TRUE(retired.running());
    EXPECT_EQ(retired.log().find("extraction started"), std::string::npos) << retired.log();
    std::string workers;
    EXPECT_EQ(fleet.ctl({"workers"}, &workers), kExitOk);
    EXPECT_NE(workers.find("retired"), std::string::npos) << workers;
    retired.signal(SIGTERM);
    EXPECT_EQ(retired.wait(30), kExitOk) << retired.log();
}

#endif

}  // namespace
}  // namespace ex2d::fleet_test
