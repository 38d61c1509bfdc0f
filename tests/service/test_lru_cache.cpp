// SPDX-License-Identifier: BSD-3-Clause
// The worker's PSF cache: the least recently used entry goes first, whatever its key.
#include <string>

#include <gtest/gtest.h>

#include "ex2d/service/lru_cache.hpp"

namespace ex2d::service {
namespace {

TEST(LruCache, ForgetsTheLeastRecentlyUsedNotTheSmallestKey)
{
    LruCache<std::string, int> cache(3);
    cache.put("c", 3);
    cache.put("a", 1);
    cache.put("b", 2);
    ASSERT_NE(cache.find("c"), nullptr);  // "a" is now the least recently used
    cache.put("d", 4);
    EXPECT_EQ(cache.size(), 3u);
    EXPECT_EQ(cache.find("a"), nullptr);
    ASSERT_NE(cache.find("c"), nullptr);
    EXPECT_EQ(*cache.find("c"), 3);
    EXPECT_EQ(*cache.find("b"), 2);
    EXPECT_EQ(*cache.find("d"), 4);
}

TEST(LruCache, ThirtyCamerasInTurnAllHitOnTheSecondRound)
{
    LruCache<std::string, int> cache(32);
    long misses = 0;
    for (int round = 0; round < 3; ++round) {
        for (int camera = 0; camera < 30; ++camera) {
            const std::string key = "psf-" + std::to_string(camera);
            if (!cache.find(key)) {
                ++misses;
                cache.put(key, camera);
            }
        }
    }
    EXPECT_EQ(misses, 30);
}

TEST(LruCache, PutReplacesAndRefreshes)
{
    LruCache<int, int> cache(2);
    cache.put(1, 10);
    cache.put(2, 20);
    cache.put(1, 11);  // 2 is now the least recently used
    cache.put(3, 30);
    EXPECT_EQ(cache.find(2), nullptr);
    ASSERT_NE(cache.find(1), nullptr);
    EXPECT_EQ(*cache.find(1), 11);
    EXPECT_THROW((LruCache<int, int>(0)), std::invalid_argument);
}

}  // namespace
}  // namespace ex2d::service
