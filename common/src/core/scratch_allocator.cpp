// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/scratch_allocator.hpp"

#include <cstdlib>

#include <sys/mman.h>

namespace ex2d::detail {

namespace {
constexpr std::size_t kHugePage = std::size_t(2) << 20;
constexpr std::size_t kHugeThreshold = std::size_t(2) << 20;

std::size_t rounded_to_huge_pages(std::size_t bytes)
{
    return (bytes + kHugePage - 1) / kHugePage * kHugePage;
}
}  // namespace

void* allocate_scratch(std::size_t bytes)
{
    if (bytes < kHugeThreshold) return ::operator new(bytes);
    const std::size_t size = rounded_to_huge_pages(bytes);
    void* p = std::aligned_alloc(kHugePage, size);
    if (!p) throw std::bad_alloc();
    // Advice only: where transparent huge pages are off this changes nothing.
    ::madvise(p, size, MADV_HUGEPAGE);
    return p;
}

void free_scratch(void* p, std::size_t bytes)
{
    if (bytes < kHugeThreshold) {
        ::operator delete(p);
    } else {
        std::free(p);
    }
}

}  // namespace ex2d::detail
