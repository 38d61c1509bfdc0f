// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Every kernel launch is written EX2D_LAUNCH(kernel, grid, block, shared_bytes, stream)(args):
// with nvcc it is the launch itself; in the CUDA emulation build (EX2D_CUDA_EMULATION,
// docs/gpu.md) the same kernel files are compiled by the host compiler and the launch runs
// the blocks on the host (common/src/cuda_emulation).

#if defined(EX2D_CUDA_EMULATION)
#include "ex2d_emulation/launch.hpp"
#define EX2D_LAUNCH(kernel, grid, block, shared_bytes, stream) \
    ::ex2d::emulation::launch_kernel(kernel, grid, block, shared_bytes, stream)
#else
#define EX2D_LAUNCH(kernel, grid, block, shared_bytes, stream) \
    kernel<<<grid, block, shared_bytes, stream>>>
#endif
