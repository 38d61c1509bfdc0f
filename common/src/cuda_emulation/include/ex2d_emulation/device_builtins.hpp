// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What nvcc gives device code without an include, for the kernel files compiled by the host
// compiler in the CUDA emulation: the thread and block indices of the calling CUDA thread,
// __syncthreads, shared memory, atomics and the device math the kernels call.
//
// __shared__ is thread_local: a block's threads all run on one host thread of the emulation
// (block_scheduler.hpp) and that host thread runs one block at a time, so a thread_local
// array is exactly one block's shared array. A kernel file's `extern __shared__` array (the
// dynamic shared memory) is defined beside the kernels by EX2D_EMULATED_DYNAMIC_SHARED.

#include <math.h>

#include <atomic>
#include <cstddef>

#include "cuda_runtime_api.h"

#define __shared__ thread_local

namespace ex2d::emulation {

/// The indices and shape seen by the CUDA thread that runs on the calling host context.
struct ThreadIndices {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};

/// The calling CUDA thread's indices, set by each context when it starts or resumes. A
/// function-local thread_local rather than an extern one: GCC's UndefinedBehaviorSanitizer
/// misreads an extern thread_local in the kernel files, which need -fno-extern-tls-init
/// for their extern __shared__ arrays. Under ThreadSanitizer, where each context counts as a
/// thread, the contexts of a host thread share it without ordering: there it is an atomic.
#if defined(__SANITIZE_THREAD__)
inline std::atomic<const ThreadIndices*>& thread_indices_slot()
{
    static thread_local std::atomic<const ThreadIndices*> slot{nullptr};
    return slot;
}
inline const ThreadIndices& thread_indices()
{
    return *thread_indices_slot().load(std::memory_order_relaxed);
}
inline void set_thread_indices(const ThreadIndices* indices)
{
    thread_indices_slot().store(indices, std::memory_order_relaxed);
}
#else
inline const ThreadIndices*& thread_indices_slot()
{
    static thread_local const ThreadIndices* slot = nullptr;
    return slot;
}
inline const ThreadIndices& thread_indices()
{
    return *thread_indices_slot();
}
inline void set_thread_indices(const ThreadIndices* indices)
{
    thread_indices_slot() = indices;
}
#endif

/// The barrier of the calling thread's block (block_scheduler.cpp).
void sync_block_threads();

/// The largest dynamic shared memory a kernel may ask for (an H100's opt-in limit).
constexpr std::size_t kMaxDynamicSharedBytes = 227 * 1024;

/// Registers a kernel file's dynamic shared array so that, under AddressSanitizer, the bytes
/// past what a launch asked for are poisoned while its blocks run.
struct DynamicSharedArray {
    DynamicSharedArray(void* (*address_on_this_thread)());
};

}  // namespace ex2d::emulation

#define threadIdx (::ex2d::emulation::thread_indices().thread_idx)
#define blockIdx (::ex2d::emulation::thread_indices().block_idx)
#define blockDim (::ex2d::emulation::thread_indices().block_dim)
#define gridDim (::ex2d::emulation::thread_indices().grid_dim)
#define __syncthreads() ::ex2d::emulation::sync_block_threads()

/// Defines the storage of `extern __shared__ type name[]` of the kernel file included just
/// before, in the kernels' namespace.
#define EX2D_EMULATED_DYNAMIC_SHARED(type, name)                                                  \
    alignas(16) thread_local type name[::ex2d::emulation::kMaxDynamicSharedBytes / sizeof(type)]; \
    const ::ex2d::emulation::DynamicSharedArray name##_registration(                              \
        []() -> void* { return static_cast<void*>(name); })

// Device atomics are relaxed read-modify-writes on the address, as on the device.
// They take CUDA's non-const address; the writes go through __atomic builtins, which
// clang-tidy does not count as writes.
// NOLINTBEGIN(readability-non-const-parameter)
inline int atomicOr(int* address, int value)
{
    return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}
inline int atomicAdd(int* address, int value)
{
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
inline unsigned atomicAdd(unsigned* address, unsigned value)
{
    return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
inline double atomicAdd(double* address, double value)
{
    double old;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    double sum = old + value;
    while (
        !__atomic_compare_exchange(address, &old, &sum, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        sum = old + value;
    }
    return old;
}
inline int atomicMax(int* address, int value)
{
    int old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (old < value && !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED)) {
    }
    return old;
}
// NOLINTEND(readability-non-const-parameter)

// The integer min and max that CUDA declares for host and device code alike.
inline int min(int a, int b)
{
    return a < b ? a : b;
}
inline int max(int a, int b)
{
    return a > b ? a : b;
}
inline long long min(long long a, long long b)
{
    return a < b ? a : b;
}
inline long long max(long long a, long long b)
{
    return a > b ? a : b;
}
inline unsigned min(unsigned a, unsigned b)
{
    return a < b ? a : b;
}
inline unsigned max(unsigned a, unsigned b)
{
    return a > b ? a : b;
}
