// SPDX-License-Identifier: BSD-3-Clause
// The stand-in backend in a fleet (test builds): a worker answers every frame with one frame
// extracted beforehand, after its delay, the writer writes it under each job's identity, and
// a job of another shape fails with both shapes named instead of being written.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

#if EX2D_TEST_HOOKS

constexpr double kDelay = 1.5;
// Above the delay: the PSF parse, stitching and mask rules, on a machine other tests share.
constexpr double kOverhead = 2.0;

/// extract_s of every "extracted" line in a service's log.
std::vector<double> extract_seconds(const std::string& log_path)
{
    std::vector<double> out;
    std::ifstream in(log_path);
    const std::regex pattern("\"msg\":\"extracted [^\"]*extract_s=([0-9.]+)");
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
        if (std::regex_search(line, m, pattern)) out.push_back(std::stod(m[1].str()));
    }
    return out;
}

TEST(FleetStandin, WorkerReturnsTheFrameAfterItsDelayAndRefusesAnotherGrid)
{
    Fleet fleet("standin");
    const std::vector<std::string> cameras = {"b0", "r0", "z0"};
    const auto preprocs = fleet.make_exposure(21, cameras);
    fleet.make_exposure(22, {"r0"});
    const std::string frame = fleet.dir() + "/standin-r0.fits";
    Process tool("extract",
                 {EX2D_TOOL_PATH, "extract", "-i", preprocs[1], "-p", fleet.psf_path("r0"), "-o",
                  frame, "-w", "6000,6100,0.8", "-n", "25", "--threads", "1", "--backend", "cpu"},
                 {}, fleet.dir() + "/logs/extract.log");
    ASSERT_EQ(tool.wait(60), 0);
    auto expected = read_frame(frame);
    ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();

    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1",
                {{"worker.backend", "standin"},
                 {"worker.standin_frame", frame},
                 {"worker.standin_delay_s", std::to_string(kDelay)}});
    fleet.start("writer", "writer-1");
    ASSERT_EQ(fleet.submit(21), 0);
    ASSERT_TRUE(fleet.wait_exposure(21, 90));
    const Outcome o = fleet.check({21}, cameras);
    expect_clean(o, "fleet standin");
    EXPECT_EQ(o.done, 3);
    for (const std::string& camera : cameras) {
        auto got = read_frame(fleet.output_path(21, camera));
        ASSERT_TRUE(got.is_ok()) << got.status().to_string();
        EXPECT_EQ(got.value().header.get_string("CAMERA").value_or(""), camera);
        EXPECT_EQ(got.value().wave, expected.value().wave);
        EXPECT_EQ(got.value().mask, expected.value().mask) << camera;
        ASSERT_EQ(got.value().flux.size(), expected.value().flux.size());
        for (std::size_t k = 0; k < got.value().flux.size(); ++k) {
            const double want = expected.value().flux[k];
            ASSERT_NEAR(got.value().flux[k], want, 1e-12 * std::max(1.0, std::abs(want)))
                << camera << " " << k;
        }
    }
    const std::vector<double> seconds = extract_seconds(fleet.dir() + "/logs/worker-1.log");
    ASSERT_EQ(seconds.size(), 3u);
    for (double s : seconds) {
        EXPECT_GE(s, kDelay - 0.01);  // the log rounds to 10 ms
        EXPECT_LT(s, kDelay + kOverhead);
    }

    ASSERT_EQ(fleet.ctl({"submit", "--exposure-dir", fleet.dir() + "/preproc/20261122/00000022",
                         "--psf", fleet.psf_template(), "--output-root", fleet.dir() + "/out", "-w",
                         "6000,6080,0.8", "-n", "25", "--compression", "none"}),
              0);
    ASSERT_TRUE(fleet.wait_exposure(22, 60));
    EXPECT_EQ(fleet.frame_field(22, "r0", "state"), "failed");
    const std::string error = fleet.frame_field(22, "r0", "error");
    EXPECT_NE(error.find("stand-in frame " + frame + " holds fibres 0-24 on 126 wavelengths"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("but the job asks for fibres 0-24 on 101 wavelengths"), std::string::npos)
        << error;
    EXPECT_FALSE(std::filesystem::exists(fleet.output_path(22, "r0")));
}

#endif

}  // namespace
}  // namespace ex2d::fleet_test
