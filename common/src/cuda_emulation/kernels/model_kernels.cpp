// SPDX-License-Identifier: BSD-3-Clause
// model_kernels.cu, unchanged, compiled by the host compiler for the CUDA emulation.
#include "ex2d_emulation/device_builtins.hpp"

#include "model_kernels.cu"
