// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file scratch_allocator.hpp
/// An allocator for large arrays that are always written before they are read, such as a
/// bundle's spot stamps (about 90 MB for 25 fibres over the r grid).

#include <cstddef>
#include <new>
#include <utility>

namespace ex2d {

namespace detail {
/// Blocks of 4 MiB or more are 2 MiB-aligned and advised as transparent huge pages, so the
/// first touch costs one page fault per 2 MiB instead of one per 4 KiB.
void* allocate_scratch(std::size_t bytes);
void free_scratch(void* p, std::size_t bytes);
}  // namespace detail

/// Elements are default-initialised (doubles are not zeroed on resize): one pass over the
/// memory is saved where every element is written anyway.
template <class T>
struct ScratchAllocator {
    using value_type = T;

    ScratchAllocator() = default;
    template <class U>
    ScratchAllocator(const ScratchAllocator<U>&) noexcept {}

    T* allocate(std::size_t n) { return static_cast<T*>(detail::allocate_scratch(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { detail::free_scratch(p, n * sizeof(T)); }

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

    template <class U>
    bool operator==(const ScratchAllocator<U>&) const noexcept
    {
        return true;
    }
    template <class U>
    bool operator!=(const ScratchAllocator<U>&) const noexcept
    {
        return false;
    }
};

}  // namespace ex2d
