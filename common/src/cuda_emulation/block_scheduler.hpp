// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Runs a kernel's grid on the host. Each CUDA thread of a block is a context of its own (a
// stack and saved registers, context_switch.hpp), so that a thread can stop at __syncthreads
// and let the others of its block reach it: the barrier is real, a kernel that reads shared
// memory before its block has written it reads what a device would not promise. One host
// thread runs a block's contexts, one block at a time, and the blocks are shared among a few
// host threads (EX2D_EMULATION_THREADS, by default one per core).
//
// Contexts rather than a host thread per CUDA thread: a two-bundle chunk launches about
// 6 x 10^7 CUDA threads, and a switch between contexts costs nanoseconds where waking a host
// thread costs microseconds. ThreadSanitizer and AddressSanitizer are told of every switch (their fiber
// interfaces); under ThreadSanitizer a switch carries no ordering, only the barrier and the
// start and end of a block do, so races between the threads of a block are reported.

#include <cstddef>

#include "cuda_runtime_api.h"
#include "ex2d_emulation/launch.hpp"

namespace ex2d::emulation {

/// Runs `body(launch)` for every thread of every block; returns once all have finished.
/// Returns cudaErrorLaunchFailure where the threads of a block disagreed on a barrier (some
/// finished while others waited in __syncthreads), which a device does not define.
cudaError_t run_grid(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, ThreadBody body,
                     const void* launch);

}  // namespace ex2d::emulation
