// SPDX-License-Identifier: BSD-3-Clause
// chi2_kernels.cu, unchanged, compiled by the host compiler for the CUDA emulation, and the storage of
// its dynamic shared memory (`extern __shared__ unsigned char shared_bytes[]`).
#include "ex2d_emulation/device_builtins.hpp"

#include "chi2_kernels.cu"

namespace ex2d::cuda {
namespace {
EX2D_EMULATED_DYNAMIC_SHARED(unsigned char, shared_bytes);
}  // namespace
}  // namespace ex2d::cuda
