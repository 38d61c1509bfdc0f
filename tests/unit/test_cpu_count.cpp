// SPDX-License-Identifier: BSD-3-Clause
// Default thread count of batch jobs: cgroup quota parsing and the affinity/quota minimum.
#include <sched.h>

#include <fstream>

#include <gtest/gtest.h>

#include "ex2d/cpu_count.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

TEST(CpuCount, CgroupV2CpuMax)
{
    EXPECT_FALSE(parse_cgroup_v2_cpu_max("max 100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cgroup_v2_cpu_max("200000 100000\n"), 2.0);
    EXPECT_DOUBLE_EQ(*parse_cgroup_v2_cpu_max("150000 100000"), 1.5);
    EXPECT_FALSE(parse_cgroup_v2_cpu_max(""));
    EXPECT_FALSE(parse_cgroup_v2_cpu_max("abc 100000"));
    EXPECT_FALSE(parse_cgroup_v2_cpu_max("100000 0"));
    EXPECT_FALSE(parse_cgroup_v2_cpu_max("100000 100000 7"));
}

TEST(CpuCount, CgroupV1Quota)
{
    EXPECT_FALSE(parse_cgroup_v1_quota("-1\n", "100000\n"));
    EXPECT_DOUBLE_EQ(*parse_cgroup_v1_quota("400000\n", "100000\n"), 4.0);
    EXPECT_FALSE(parse_cgroup_v1_quota("", ""));
    EXPECT_FALSE(parse_cgroup_v1_quota("50000", "x"));
}

TEST(CpuCount, MinimumOfAffinityAndQuota)
{
    EXPECT_EQ(threads_for(16, std::nullopt), 16);
    EXPECT_EQ(threads_for(16, 2.0), 2);
    EXPECT_EQ(threads_for(16, 1.5), 2);
    EXPECT_EQ(threads_for(4, 32.0), 4);
    EXPECT_EQ(threads_for(16, 0.1), 1);
    EXPECT_GE(threads_for(0, std::nullopt), 1);
}

TEST(CpuCount, ReadsQuotaFilesUnderACgroupRoot)
{
    test::TempDir dir;
    std::ofstream(dir.file("cpu.max")) << "300000 100000\n";
    EXPECT_LE(default_thread_count(dir.path().string()), 3);
    EXPECT_GE(default_thread_count(dir.path().string()), 1);

    test::TempDir v1;
    std::filesystem::create_directory(v1.path() / "cpu");
    std::ofstream(v1.file("cpu/cpu.cfs_quota_us")) << "100000\n";
    std::ofstream(v1.file("cpu/cpu.cfs_period_us")) << "100000\n";
    EXPECT_EQ(default_thread_count(v1.path().string()), 1);
}

TEST(CpuCount, ConfiguredThreadsWinAndZeroTakesTheDefault)
{
    EXPECT_EQ(resolve_thread_count(3), 3);
    EXPECT_EQ(resolve_thread_count(0), default_thread_count());
    EXPECT_EQ(resolve_thread_count(-1), default_thread_count());
}

// worker.threads 0 and --threads 0 under `taskset -c N`: one CPU in the affinity mask gives
// one thread, whatever the machine's core count.
TEST(CpuCount, ZeroFollowsTheAffinityMask)
{
    cpu_set_t saved;
    CPU_ZERO(&saved);
    ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
    int first = 0;
    while (!CPU_ISSET(first, &saved)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    const int resolved = resolve_thread_count(0);
    const int by_default = default_thread_count();
    ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
    EXPECT_EQ(resolved, 1);
    EXPECT_EQ(by_default, 1);
}

}  // namespace
}  // namespace ex2d
