// SPDX-License-Identifier: BSD-3-Clause
// decorrelate_kernels.cu, unchanged, compiled by the host compiler for the CUDA emulation, and the storage of
// its dynamic shared memory (`extern __shared__ double row_sums[]`).
#include "ex2d_emulation/device_builtins.hpp"

#include "decorrelate_kernels.cu"

namespace ex2d::cuda {
namespace {
EX2D_EMULATED_DYNAMIC_SHARED(double, row_sums);
}  // namespace
}  // namespace ex2d::cuda
