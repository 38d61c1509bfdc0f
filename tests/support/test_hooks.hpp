// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What tests need of the test hooks, which only builds configured with EX2D_TEST_HOOKS=ON
// contain (.ci/build, tools/cuda-emulation): a skip elsewhere, and one patch made to fail in
// every backend through their seam (common/src/test_hooks/indefinite_patch.hpp).

#include <gtest/gtest.h>

#include "ex2d/extraction_types.hpp"
#include "indefinite_patch.hpp"

/// Skips the test, saying why, in a build without test hooks: the fault-injection variables
/// (EX2D_TEST_*), the stand-in backend and the patch seam are not there.
#if EX2D_TEST_HOOKS
#define EX2D_REQUIRE_TEST_HOOKS() static_cast<void>(0)
#else
#define EX2D_REQUIRE_TEST_HOOKS() \
    GTEST_SKIP() << "needs a build with test hooks (cmake -DEX2D_TEST_HOOKS=ON, as .ci/build)"
#endif

namespace ex2d::test {

/// The iCov of `patch` made indefinite in every extraction of every backend, first solve
/// and retry, while this object lives. Does nothing in a build without test hooks, whose
/// tests skip first (EX2D_REQUIRE_TEST_HOOKS).
class IndefinitePatch {
public:
    explicit IndefinitePatch([[maybe_unused]] const PatchGeometry& patch)
    {
#if EX2D_TEST_HOOKS
        test_hooks::force_indefinite_patch(patch);
#endif
    }
    ~IndefinitePatch()
    {
#if EX2D_TEST_HOOKS
        test_hooks::clear_indefinite_patch();
#endif
    }
    IndefinitePatch(const IndefinitePatch&) = delete;
    IndefinitePatch& operator=(const IndefinitePatch&) = delete;
};

}  // namespace ex2d::test
