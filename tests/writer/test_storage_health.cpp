// SPDX-License-Identifier: BSD-3-Clause
// The writer's view of its output storage: the metric label of a failed write, the back-off
// between tries, and when an outage starts and ends.
#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "storage_health.hpp"

namespace ex2d::writer {
namespace {

TEST(StorageHealth, KindIsTheErrnoOfTheMessage)
{
    const std::string path = "/out/exposures/20261122/00000001/frame-b0-00000001.fits: ";
    EXPECT_EQ(storage_error_kind(path + "cannot write the file: " + std::strerror(ENOSPC)),
              "enospc");
    EXPECT_EQ(storage_error_kind(path + "fsync failed: " + std::strerror(EDQUOT)), "edquot");
    EXPECT_EQ(storage_error_kind(path + "cannot create the file: " + std::strerror(EROFS)),
              "erofs");
    EXPECT_EQ(storage_error_kind(path + "fsync failed: " + std::strerror(EIO)), "eio");
    EXPECT_EQ(storage_error_kind(path + "cannot rename: " + std::strerror(ENOENT)), "enoent");
    EXPECT_EQ(
        storage_error_kind(path + "cannot create the output folder: " + std::strerror(ENOTDIR)),
        "enotdir");
    EXPECT_EQ(storage_error_kind(path + "cannot create the file: " + std::strerror(EACCES)),
              "eacces");
    EXPECT_EQ(storage_error_kind(path + "cannot read back for its checksum"), "other");
}

TEST(StorageHealth, RetryDelayDoublesUpToItsCap)
{
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(1, 1, 30), 1);
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(2, 1, 30), 2);
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(5, 1, 30), 16);
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(6, 1, 30), 30);
    // An hour of failures at the cap does not overflow.
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(200, 1, 30), 30);
    EXPECT_DOUBLE_EQ(storage_retry_delay_s(3, 0.2, 1), 0.8);
}

TEST(StorageHealth, AnOutageRunsFromTheFirstFailureToTheFirstSuccess)
{
    StorageHealth health;
    EXPECT_TRUE(health.ok());
    EXPECT_FALSE(health.recovered().has_value());
    EXPECT_TRUE(health.failed("first", 1000));
    EXPECT_FALSE(health.failed("second", 2000));
    EXPECT_FALSE(health.ok());
    const auto outage = health.recovered();
    ASSERT_TRUE(outage.has_value());
    EXPECT_EQ(outage->since_ms, 1000);
    EXPECT_EQ(outage->error, "second");
    EXPECT_TRUE(health.ok());
    EXPECT_FALSE(health.recovered().has_value());
}

}  // namespace
}  // namespace ex2d::writer
