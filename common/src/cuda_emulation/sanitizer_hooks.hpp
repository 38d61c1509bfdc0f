// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What the emulation tells AddressSanitizer and ThreadSanitizer about its contexts; nothing
// in builds without them.

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define EX2D_EMULATION_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define EX2D_EMULATION_TSAN 1
#endif

namespace ex2d::emulation::sanitizer {

#if defined(EX2D_EMULATION_TSAN)
inline void* current_fiber()
{
    return __tsan_get_current_fiber();
}
inline void* create_fiber()
{
    return __tsan_create_fiber(0);
}
inline void destroy_fiber(void* fiber)
{
    __tsan_destroy_fiber(fiber);
}
/// No ordering comes with a switch: only release/acquire pairs order the CUDA threads.
inline void switch_to_fiber(void* fiber)
{
    __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
}
inline void release(const void* token)
{
    __tsan_release(const_cast<void*>(token));
}
inline void acquire(const void* token)
{
    __tsan_acquire(const_cast<void*>(token));
}
#else
inline void* current_fiber()
{
    return nullptr;
}
inline void* create_fiber()
{
    return nullptr;
}
inline void destroy_fiber(void*) {}
inline void switch_to_fiber(void*) {}
inline void release(const void*) {}
inline void acquire(const void*) {}
#endif

#if defined(EX2D_EMULATION_ASAN)
inline void start_switch(void** fake_stack_save, const void* bottom, std::size_t size)
{
    __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
}
inline void finish_switch(void* fake_stack_save, const void** old_bottom, std::size_t* old_size)
{
    __sanitizer_finish_switch_fiber(fake_stack_save, old_bottom, old_size);
}
inline void poison(const void* address, std::size_t bytes)
{
    ASAN_POISON_MEMORY_REGION(address, bytes);
}
inline void unpoison(const void* address, std::size_t bytes)
{
    ASAN_UNPOISON_MEMORY_REGION(address, bytes);
}
#else
inline void start_switch(void**, const void*, std::size_t) {}
inline void finish_switch(void*, const void**, std::size_t*) {}
inline void poison(const void*, std::size_t) {}
inline void unpoison(const void*, std::size_t) {}
#endif

}  // namespace ex2d::emulation::sanitizer
