// SPDX-License-Identifier: BSD-3-Clause
// PinnedArray's bookkeeping without a GPU: this test defines the two pinned-memory functions
// the class calls (the CUDA backend's call cudaMallocHost and cudaFreeHost), with a limit
// above which allocation throws as the backend's does.
#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "device_memory.hpp"

namespace ex2d::cuda {
namespace {
std::size_t g_limit_bytes = 0;
int g_blocks_held = 0;
}  // namespace

void* allocate_pinned(std::size_t bytes, const char* what)
{
    if (bytes > g_limit_bytes) {
        throw std::runtime_error("cannot allocate " + std::to_string(bytes) +
                                 " bytes of pinned host memory for " + what);
    }
    ++g_blocks_held;
    return ::operator new(bytes);
}

void free_pinned(void* ptr)
{
    if (!ptr) return;
    --g_blocks_held;
    ::operator delete(ptr);
}

namespace {

TEST(PinnedArray, AFailedGrowthLeavesTheArrayAsItWas)
{
    g_limit_bytes = 1024;
    {
        PinnedArray<double> array("kept outputs");
        EXPECT_EQ(array.data(), nullptr);
        EXPECT_EQ(array.capacity(), 0u);
        array.reserve(10);
        ASSERT_NE(array.data(), nullptr);
        EXPECT_EQ(array.capacity(), 10u);
        array[9] = 2.5;
        double* const before = array.data();

        try {
            array.reserve(1000);
            FAIL() << "8000 bytes over a limit of 1024 did not throw";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(),
                         "cannot allocate 8000 bytes of pinned host memory for kept outputs");
        }
        EXPECT_EQ(array.data(), before);
        EXPECT_EQ(array.capacity(), 10u);
        EXPECT_EQ(array[9], 2.5);
        EXPECT_EQ(g_blocks_held, 1);

        array.reserve(4);  // fits: nothing allocated
        EXPECT_EQ(array.data(), before);
        array.reserve(100);
        EXPECT_NE(array.data(), nullptr);
        EXPECT_EQ(array.capacity(), 100u);
        EXPECT_EQ(g_blocks_held, 1);  // the old block freed once the new one was had
    }
    EXPECT_EQ(g_blocks_held, 0);
}

TEST(PinnedArray, AFailedFirstAllocationLeavesItEmpty)
{
    g_limit_bytes = 0;
    PinnedArray<int> array("info arrays");
    EXPECT_THROW(array.reserve(1), std::runtime_error);
    EXPECT_EQ(array.data(), nullptr);
    EXPECT_EQ(array.capacity(), 0u);
    EXPECT_EQ(g_blocks_held, 0);
}

}  // namespace
}  // namespace ex2d::cuda
