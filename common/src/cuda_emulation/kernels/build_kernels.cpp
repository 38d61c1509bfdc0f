// SPDX-License-Identifier: BSD-3-Clause
// build_kernels.cu, unchanged, compiled by the host compiler for the CUDA emulation, and the storage of
// its dynamic shared memory (`extern __shared__ double weighted[]`).
#include "ex2d_emulation/device_builtins.hpp"

#include "build_kernels.cu"

namespace ex2d::cuda {
namespace {
EX2D_EMULATED_DYNAMIC_SHARED(double, weighted);
}  // namespace
}  // namespace ex2d::cuda
