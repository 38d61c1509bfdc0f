// SPDX-License-Identifier: BSD-3-Clause
// The test hooks as a build without them compiles them (the default, the container images;
// the ctest default_build_has_no_test_hooks checks that such a build compiles nothing else of
// them): with every EX2D_TEST_* variable set, nothing sleeps, no job is poisoned, no fsync
// fails, and the backends' patch seam names no patch.
#include <chrono>
#include <cstdlib>

#include <gtest/gtest.h>

#include "ex2d/extraction_types.hpp"
#include "ex2d/service/fault_injection.hpp"
#include "indefinite_patch.hpp"

#ifdef EX2D_TEST_HOOKS
#error "this test must be compiled as a build without test hooks is, without EX2D_TEST_HOOKS"
#endif

static_assert(!ex2d::test_hooks::is_forced_indefinite(ex2d::PatchGeometry{}),
              "without test hooks the backends' seam is constant false, compiled away");

TEST(ReleaseHooks, DelayPoisonAndFsyncVariablesAreIgnored)
{
    ::setenv("EX2D_TEST_DELAY_READ_MS", "2000", 1);
    ::setenv("EX2D_TEST_DELAY_EXTRACT_MS", "2000", 1);
    ::setenv("EX2D_TEST_DELAY_WRITE_MS", "2000", 1);
    ::setenv("EX2D_TEST_POISON_JOB", "nightly/00000001/r0", 1);
    // A flag file that exists: a build with hooks would fail every fsync.
    ::setenv("EX2D_TEST_FAIL_FSYNC_FILE", "/", 1);
    ::setenv("EX2D_TEST_FAIL_FSYNC_DIR", "/", 1);
    const auto start = std::chrono::steady_clock::now();
    for (const char* stage : {"READ", "EXTRACT", "WRITE"}) ex2d::service::test_delay(stage);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 0.1);
    EXPECT_FALSE(ex2d::service::test_poisoned("nightly/00000001/r0"));
    EXPECT_EQ(ex2d::service::test_fsync_errno("FILE"), 0);
    EXPECT_EQ(ex2d::service::test_fsync_errno("DIR"), 0);
}
