// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The CUDA emulation's stand-in for library_types.h: the data types cuSOLVER's 64-bit API
// takes (only double is emulated).

enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
};
using cudaDataType = cudaDataType_t;
