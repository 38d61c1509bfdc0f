// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The CUDA emulation's stand-in for cuSOLVER's dense API (cusolverDn.h): the functions the
// CUDA backend calls, with the library's names, values and signatures, built into the
// emulated libcusolver that cuda_libraries() opens (cusolver.cpp, on the host LAPACK).

#include <cstdint>

#include "cublas_v2.h"
#include "library_types.h"

enum cusolverStatus_t {
    CUSOLVER_STATUS_SUCCESS = 0,
    CUSOLVER_STATUS_NOT_INITIALIZED = 1,
    CUSOLVER_STATUS_ALLOC_FAILED = 2,
    CUSOLVER_STATUS_INVALID_VALUE = 3,
    CUSOLVER_STATUS_ARCH_MISMATCH = 4,
    CUSOLVER_STATUS_MAPPING_ERROR = 5,
    CUSOLVER_STATUS_EXECUTION_FAILED = 6,
    CUSOLVER_STATUS_INTERNAL_ERROR = 7,
    CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8,
    CUSOLVER_STATUS_NOT_SUPPORTED = 9,
    CUSOLVER_STATUS_INVALID_WORKSPACE = 31,
};
enum cusolverEigMode_t { CUSOLVER_EIG_MODE_NOVECTOR = 0, CUSOLVER_EIG_MODE_VECTOR = 1 };
enum cusolverAlgMode_t { CUSOLVER_ALG_0 = 0, CUSOLVER_ALG_1 = 1, CUSOLVER_ALG_2 = 2 };
enum cusolverDnFunction_t {
    CUSOLVERDN_GETRF = 0,
    CUSOLVERDN_POTRF = 1,
    CUSOLVERDN_SYEVBATCHED = 2,
};
enum cusolverDeterministicMode_t {
    CUSOLVER_DETERMINISTIC_RESULTS = 1,
    CUSOLVER_ALLOW_NON_DETERMINISTIC_RESULTS = 2,
};

struct cusolverDnContext;
struct cusolverDnParams;
using cusolverDnHandle_t = cusolverDnContext*;
using cusolverDnParams_t = cusolverDnParams*;

extern "C" {
cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* handle);
cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle);
cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t stream);
cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t* params);
cusolverStatus_t cusolverDnDestroyParams(cusolverDnParams_t params);
cusolverStatus_t cusolverDnSetAdvOptions(cusolverDnParams_t params, cusolverDnFunction_t function,
                                         cusolverAlgMode_t algo);
cusolverStatus_t cusolverDnSetDeterministicMode(cusolverDnHandle_t handle,
                                                cusolverDeterministicMode_t mode);
cusolverStatus_t cusolverDnDpotrfBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
                                         double* Aarray[], int lda, int* infoArray, int batchSize);
cusolverStatus_t cusolverDnDpotrsBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
                                         int nrhs, double* A[], int lda, double* B[], int ldb,
                                         int* d_info, int batchSize);
cusolverStatus_t cusolverDnDsyevd_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
                                             cublasFillMode_t uplo, int n, const double* A, int lda,
                                             const double* W, int* lwork);
cusolverStatus_t cusolverDnDsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
                                  cublasFillMode_t uplo, int n, double* A, int lda, double* W,
                                  double* work, int lwork, int* info);
cusolverStatus_t cusolverDnXsyevBatched_bufferSize(
    cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz,
    cublasFillMode_t uplo, std::int64_t n, cudaDataType dataTypeA, const void* A, std::int64_t lda,
    cudaDataType dataTypeW, const void* W, cudaDataType computeType,
    std::size_t* workspaceInBytesOnDevice, std::size_t* workspaceInBytesOnHost,
    std::int64_t batchSize);
cusolverStatus_t cusolverDnXsyevBatched(cusolverDnHandle_t handle, cusolverDnParams_t params,
                                        cusolverEigMode_t jobz, cublasFillMode_t uplo,
                                        std::int64_t n, cudaDataType dataTypeA, void* A,
                                        std::int64_t lda, cudaDataType dataTypeW, void* W,
                                        cudaDataType computeType, void* bufferOnDevice,
                                        std::size_t workspaceInBytesOnDevice, void* bufferOnHost,
                                        std::size_t workspaceInBytesOnHost, int* info,
                                        std::int64_t batchSize);
}
