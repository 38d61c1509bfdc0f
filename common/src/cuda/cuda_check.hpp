// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Every CUDA runtime, cuBLAS and cuSOLVER call goes through EX2D_CUDA_CHECK. A failing call
// is a device fault or a programming error, not a property of the data, so it throws
// ex2d::DeviceFailure naming the call, the error and the place: a worker hands its frame back
// and exits for its supervisor to restart it with a fresh context, since a CUDA error can
// leave the context unusable. Per-patch numerical failures are reported through the batched
// info arrays instead.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include "cuda_libraries.hpp"

namespace ex2d::cuda {

[[noreturn]] void throw_call_error(const char* call, const char* error, const char* file, int line);

const char* cusolver_status_name(cusolverStatus_t status);

inline void check_call(cudaError_t status, const char* call, const char* file, int line)
{
    if (status != cudaSuccess) throw_call_error(call, cudaGetErrorString(status), file, line);
}

inline void check_call(cublasStatus_t status, const char* call, const char* file, int line)
{
    if (status != CUBLAS_STATUS_SUCCESS)
        throw_call_error(call, cuda_libraries().cublasGetStatusString(status), file, line);
}

inline void check_call(cusolverStatus_t status, const char* call, const char* file, int line)
{
    if (status != CUSOLVER_STATUS_SUCCESS)
        throw_call_error(call, cusolver_status_name(status), file, line);
}

}  // namespace ex2d::cuda

#define EX2D_CUDA_CHECK(call) ::ex2d::cuda::check_call((call), #call, __FILE__, __LINE__)
/// After a kernel launch: catches bad launch configurations at once.
#define EX2D_CUDA_CHECK_LAUNCH() EX2D_CUDA_CHECK(cudaGetLastError())
