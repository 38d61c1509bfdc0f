// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Assertions the fleet tests share (GoogleTest; the chaos soak uses the harness without it).

#include <cstdio>

#include <gtest/gtest.h>

#include "fleet_harness.hpp"

namespace ex2d::fleet_test {

/// Expects no lost, duplicated or partial frame in `o`, printing its report under `what`.
inline void expect_clean(const Outcome& o, const char* what)
{
    std::printf("%s: %s\n", what, o.report().c_str());
    EXPECT_EQ(o.lost, 0) << what;
    EXPECT_EQ(o.duplicates, 0) << what;
    EXPECT_EQ(o.partial, 0) << what;
}

}  // namespace ex2d::fleet_test
