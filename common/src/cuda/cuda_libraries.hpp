// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// cuBLAS and cuSOLVER are opened with dlopen when the first CUDA backend is made, not linked
// into the program: loading them (and cuBLASLt, cuSPARSE and nvJitLink, which they need) cost
// every process of a CUDA-enabled build 0.05-0.2 CPU-seconds and about 250 MB of resident
// memory before main(), CPU runs and `ex2d --version` included (docs/benchmarks-log.md). The
// members carry the libraries' own names (after their headers' _v2 macros), so that a call
// reads as the direct call would: cuda_libraries().cublasCreate(&handle).

#include <cublas_v2.h>
#include <cusolverDn.h>

namespace ex2d::cuda {

struct CudaLibraries {
    decltype(&::cublasCreate) cublasCreate;
    decltype(&::cublasDestroy) cublasDestroy;
    decltype(&::cublasSetStream) cublasSetStream;
    decltype(&::cublasSetWorkspace) cublasSetWorkspace;
    decltype(&::cublasGetStatusString) cublasGetStatusString;
    decltype(&::cublasDgemmStridedBatched) cublasDgemmStridedBatched;
    decltype(&::cublasDtrsmBatched) cublasDtrsmBatched;
    decltype(&::cusolverDnCreate) cusolverDnCreate;
    decltype(&::cusolverDnDestroy) cusolverDnDestroy;
    decltype(&::cusolverDnSetStream) cusolverDnSetStream;
    decltype(&::cusolverDnCreateParams) cusolverDnCreateParams;
    decltype(&::cusolverDnDestroyParams) cusolverDnDestroyParams;
    decltype(&::cusolverDnSetAdvOptions) cusolverDnSetAdvOptions;
    decltype(&::cusolverDnSetDeterministicMode) cusolverDnSetDeterministicMode;
    decltype(&::cusolverDnDpotrfBatched) cusolverDnDpotrfBatched;
    decltype(&::cusolverDnDpotrsBatched) cusolverDnDpotrsBatched;
    decltype(&::cusolverDnDsyevd_bufferSize) cusolverDnDsyevd_bufferSize;
    decltype(&::cusolverDnDsyevd) cusolverDnDsyevd;
    decltype(&::cusolverDnXsyevBatched_bufferSize) cusolverDnXsyevBatched_bufferSize;
    decltype(&::cusolverDnXsyevBatched) cusolverDnXsyevBatched;
};

/// Opens the libraries on the first call (from the toolkit folder CMake found, else by soname
/// through the loader's search path) and resolves every member. Throws ex2d::Error naming the
/// library or symbol and the loader's reason when one is missing; a later call tries again.
const CudaLibraries& cuda_libraries();

}  // namespace ex2d::cuda
