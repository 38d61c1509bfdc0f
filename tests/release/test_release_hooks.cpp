// SPDX-License-Identifier: BSD-3-Clause
// The fault-test hooks as a release build compiles them (without EX2D_TEST_HOOKS, as the
// container images are built): with every variable set, nothing sleeps and no job is poisoned.
#include <chrono>
#include <cstdlib>

#include <gtest/gtest.h>

#include "ex2d/service/fault_injection.hpp"

#ifdef EX2D_TEST_HOOKS
#error "this test must be compiled as a release build is, without EX2D_TEST_HOOKS"
#endif

TEST(ReleaseHooks, DelayAndPoisonVariablesAreIgnored)
{
    ::setenv("EX2D_TEST_DELAY_READ_MS", "2000", 1);
    ::setenv("EX2D_TEST_DELAY_EXTRACT_MS", "2000", 1);
    ::setenv("EX2D_TEST_DELAY_WRITE_MS", "2000", 1);
    ::setenv("EX2D_TEST_POISON_JOB", "nightly/00000001/r0", 1);
    const auto start = std::chrono::steady_clock::now();
    for (const char* stage : {"READ", "EXTRACT", "WRITE"}) ex2d::service::test_delay(stage);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 0.1);
    EXPECT_FALSE(ex2d::service::test_poisoned("nightly/00000001/r0"));
}
