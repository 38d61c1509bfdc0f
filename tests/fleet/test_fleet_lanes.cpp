// SPDX-License-Identifier: BSD-3-Clause
// Two lanes: nightly frames before reprocessing campaigns; a campaign paused, resumed and
// cancelled through ex2dctl.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

long long field_ms(Fleet& fleet, int expid, const std::string& camera, const std::string& campaign)
{
    return std::atoll(fleet.frame_field(expid, camera, "done_at", campaign).c_str());
}

TEST(FleetLanes, NightlyFramesGoBeforeTheCampaign)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("lanes");
    const std::vector<std::string> campaign_cams = {"b0", "b1", "b2", "b3", "b4", "b5"};
    fleet.make_exposure(51, campaign_cams, "20250101");
    fleet.make_exposure(52, {"r0", "r1"});
    // The campaign is queued first; the nightly exposure arrives later but is served first.
    ASSERT_EQ(fleet.submit(51, "20250101", {"--lane", "campaign", "--campaign", "jura"}), 0);
    ASSERT_EQ(fleet.submit(52), 0);
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    fleet.start("worker", "worker-1", {{"worker.credit", "1"}},
                {{"EX2D_TEST_DELAY_EXTRACT_MS", "200"}});
    ASSERT_TRUE(fleet.wait_exposure(52, 60));
    ASSERT_TRUE(fleet.wait_exposure(51, 60, "jura"));
    const long long nightly_last =
        std::max(field_ms(fleet, 52, "r0", "nightly"), field_ms(fleet, 52, "r1", "nightly"));
    long long campaign_first = 0;
    for (const auto& c : campaign_cams) {
        const long long t = field_ms(fleet, 51, c, "jura");
        campaign_first = campaign_first == 0 ? t : std::min(campaign_first, t);
    }
    EXPECT_LT(nightly_last, campaign_first) << "nightly frames finish before any campaign frame";
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:jura:00000051", "state"}).str, "done");
    for (const auto& c : campaign_cams) {
        EXPECT_TRUE(std::filesystem::exists(fleet.output_path(51, c, "20250101") + ".gz") ||
                    std::filesystem::exists(fleet.output_path(51, c, "20250101")))
            << c;
    }
}

TEST(FleetLanes, CampaignPauseResumeAndCancel)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("campaign-control");
    const std::vector<std::string> cams = {"z0", "z1", "z2", "z3", "z4", "z5"};
    fleet.make_exposure(53, cams, "20250102");
    fleet.make_exposure(54, {"z6", "z7", "z8"}, "20250103");
    ASSERT_EQ(fleet.submit(53, "20250102", {"--lane", "campaign", "--campaign", "iron"}), 0);
    ASSERT_EQ(fleet.submit(54, "20250103", {"--lane", "campaign", "--campaign", "fuji"}), 0);
    ASSERT_EQ(fleet.ctl({"campaign", "pause", "fuji"}), 0);
    fleet.start("reader", "reader-1");
    fleet.start("writer", "writer-1");
    fleet.start("worker", "worker-1", {{"worker.credit", "1"}},
                {{"EX2D_TEST_DELAY_EXTRACT_MS", "300"}});
    auto n_done = [&](const char* campaign, int expid) {
        return std::atoi(fleet
                             .redis({"HGET",
                                     "ex2d:exposure:" + std::string(campaign) + ":0000005" +
                                         std::to_string(expid - 50),
                                     "n_done"})
                             .str.c_str());
    };
    ASSERT_TRUE(eventually(30, [&] { return n_done("iron", 53) >= 2; }));
    ASSERT_EQ(fleet.ctl({"campaign", "pause", "iron"}), 0);
    // Frames in flight finish (no frame of the exposure reading, extracting or writing);
    // then nothing moves while paused.
    auto in_flight = [&] {
        int n = 0;
        for (const char* state : {"n_reading", "n_extracting", "n_writing"}) {
            n += std::atoi(fleet.redis({"HGET", "ex2d:exposure:iron:00000053", state}).str.c_str());
        }
        return n;
    };
    ASSERT_TRUE(eventually(30, [&] { return in_flight() == 0; }));
    const int paused_at = n_done("iron", 53);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    EXPECT_EQ(n_done("iron", 53), paused_at);
    EXPECT_EQ(in_flight(), 0);
    EXPECT_LT(paused_at, 6);
    EXPECT_EQ(n_done("fuji", 54), 0);
    ASSERT_EQ(fleet.ctl({"campaign", "resume", "iron"}), 0);
    ASSERT_TRUE(fleet.wait_exposure(53, 60, "iron"));
    EXPECT_EQ(n_done("iron", 53), 6);
    std::string out;
    ASSERT_EQ(fleet.ctl({"campaign", "cancel", "fuji"}, &out), 0);
    EXPECT_NE(out.find("cancelled 3 queued frame(s)"), std::string::npos) << out;
    EXPECT_EQ(fleet.frame_field(54, "z7", "state", "fuji"), "cancelled");
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:fuji:00000054", "state"}).str, "cancelled");
    EXPECT_NE(fleet.ctl({"campaign", "resume", "fuji"}), 0)
        << "a cancelled campaign stays cancelled";
    EXPECT_FALSE(std::filesystem::exists(fleet.dir() + "/out/exposures/20250103"));
}

}  // namespace
}  // namespace ex2d::fleet_test
