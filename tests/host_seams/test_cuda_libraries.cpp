// SPDX-License-Identifier: BSD-3-Clause
// cuBLAS and cuSOLVER are opened when a CUDA backend first needs them, not when the program
// starts (cuda_libraries.hpp): before the first call neither is mapped into the process, after
// it every function the backend calls resolves, and the ones that need no device answer. Runs
// without a GPU: loading a library does not touch the device.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "cuda_libraries.hpp"

namespace ex2d::cuda {
namespace {

bool mapped(const std::string& library)
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find(library) != std::string::npos) return true;
    }
    return false;
}

TEST(CudaLibraries, AreOpenedOnFirstUseAndEveryFunctionResolves)
{
    EXPECT_FALSE(mapped("libcublas.so")) << "cuBLAS was loaded before any backend asked";
    EXPECT_FALSE(mapped("libcusolver.so")) << "cuSOLVER was loaded before any backend asked";

    const CudaLibraries& libs = cuda_libraries();
    EXPECT_TRUE(mapped("libcublas.so"));
    EXPECT_TRUE(mapped("libcusolver.so"));
    const void* functions[] = {
        reinterpret_cast<const void*>(libs.cublasCreate),
        reinterpret_cast<const void*>(libs.cublasDestroy),
        reinterpret_cast<const void*>(libs.cublasSetStream),
        reinterpret_cast<const void*>(libs.cublasSetWorkspace),
        reinterpret_cast<const void*>(libs.cublasGetStatusString),
        reinterpret_cast<const void*>(libs.cublasDgemmStridedBatched),
        reinterpret_cast<const void*>(libs.cublasDtrsmBatched),
        reinterpret_cast<const void*>(libs.cusolverDnCreate),
        reinterpret_cast<const void*>(libs.cusolverDnDestroy),
        reinterpret_cast<const void*>(libs.cusolverDnSetStream),
        reinterpret_cast<const void*>(libs.cusolverDnCreateParams),
        reinterpret_cast<const void*>(libs.cusolverDnDestroyParams),
        reinterpret_cast<const void*>(libs.cusolverDnSetAdvOptions),
        reinterpret_cast<const void*>(libs.cusolverDnSetDeterministicMode),
        reinterpret_cast<const void*>(libs.cusolverDnDpotrfBatched),
        reinterpret_cast<const void*>(libs.cusolverDnDpotrsBatched),
        reinterpret_cast<const void*>(libs.cusolverDnDsyevd_bufferSize),
        reinterpret_cast<const void*>(libs.cusolverDnDsyevd),
        reinterpret_cast<const void*>(libs.cusolverDnXsyevBatched_bufferSize),
        reinterpret_cast<const void*>(libs.cusolverDnXsyevBatched)};
    for (const void* function : functions) EXPECT_NE(function, nullptr);

    // Host-only calls answer as linked ones would.
    EXPECT_EQ(std::string(libs.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)),
              "the library was not initialized");
    cusolverDnParams_t params = nullptr;
    ASSERT_EQ(libs.cusolverDnCreateParams(&params), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(libs.cusolverDnSetAdvOptions(params, CUSOLVERDN_GETRF, CUSOLVER_ALG_1),
              CUSOLVER_STATUS_SUCCESS);
    // What CudaResources copes with: this cuSOLVER takes no algorithm for the batched
    // eigen-solver (INVALID_VALUE), or a later one takes ALG_1.
    const cusolverStatus_t batched =
        libs.cusolverDnSetAdvOptions(params, CUSOLVERDN_SYEVBATCHED, CUSOLVER_ALG_1);
    EXPECT_TRUE(batched == CUSOLVER_STATUS_SUCCESS || batched == CUSOLVER_STATUS_INVALID_VALUE)
        << batched;
    EXPECT_EQ(libs.cusolverDnDestroyParams(params), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(&cuda_libraries(), &libs) << "loaded once";
}

}  // namespace
}  // namespace ex2d::cuda
