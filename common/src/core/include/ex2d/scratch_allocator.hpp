// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file scratch_allocator.hpp
/// Allocators for large arrays: pixel planes of a frame (17 MB to 136 MB each) and a bundle's
/// spot stamps. Fresh memory costs one page fault per page on first touch; on virtual
/// machines a 4 KiB fault costs about 13 microseconds (measured on the project's machine), so
/// a whole frame's planes cost seconds in 4 KiB pages and milliseconds in 2 MiB pages.

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace ex2d {

namespace detail {
/// Blocks of 2 MiB or more are 2 MiB-aligned and advised as transparent huge pages, so the
/// first touch costs one page fault per 2 MiB instead of one per 4 KiB.
void* allocate_scratch(std::size_t bytes);
void free_scratch(void* p, std::size_t bytes);
}  // namespace detail

/// Huge-page memory with std::allocator's initialisation (resize and the count constructor
/// zero doubles): a drop-in for std::allocator in long-lived large arrays.
template <class T>
struct LargeArrayAllocator {
    using value_type = T;

    LargeArrayAllocator() = default;
    template <class U>
    LargeArrayAllocator(const LargeArrayAllocator<U>&) noexcept
    {
    }

    T* allocate(std::size_t n) { return static_cast<T*>(detail::allocate_scratch(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { detail::free_scratch(p, n * sizeof(T)); }

    template <class U>
    bool operator==(const LargeArrayAllocator<U>&) const noexcept
    {
        return true;
    }
    template <class U>
    bool operator!=(const LargeArrayAllocator<U>&) const noexcept
    {
        return false;
    }
};

/// A large array of T in huge pages where the system allows them.
template <class T>
using LargeArray = std::vector<T, LargeArrayAllocator<T>>;

/// The same memory with elements default-initialised (doubles are not zeroed on resize): one
/// pass over the memory is saved where every element is written anyway.
template <class T>
struct ScratchAllocator : LargeArrayAllocator<T> {
    using value_type = T;
    template <class U>
    struct rebind {
        using other = ScratchAllocator<U>;
    };

    ScratchAllocator() = default;
    template <class U>
    ScratchAllocator(const ScratchAllocator<U>&) noexcept
    {
    }

    template <class U>
    void construct(U* p) noexcept
    {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args)
    {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};

}  // namespace ex2d
