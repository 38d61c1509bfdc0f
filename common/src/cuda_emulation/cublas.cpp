// SPDX-License-Identifier: BSD-3-Clause
// The emulated cuBLAS (libcublas of the emulation build, opened by cuda_libraries()): the
// calls the CUDA backend makes, on the host BLAS, column-major, with cuBLAS's argument checks.

#include <algorithm>
#include <cstring>

#include "cublas_v2.h"
#include "emulated_lapack.hpp"

struct cublasContext {
    cudaStream_t stream = nullptr;
};

namespace {

char op_char(cublasOperation_t op)
{
    return op == CUBLAS_OP_N ? 'N' : 'T';
}

bool valid_op(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle)
{
    if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     std::size_t workspace_bytes)
{
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (workspace == nullptr && workspace_bytes > 0) return CUBLAS_STATUS_INVALID_VALUE;
    // The library may use all of it: a smaller buffer than announced is an overflow here.
    if (workspace_bytes > 0) std::memset(workspace, 0, workspace_bytes);
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
        case CUBLAS_STATUS_SUCCESS:
            return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED:
            return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED:
            return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE:
            return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_ARCH_MISMATCH:
            return "an absent device architectural feature is required";
        case CUBLAS_STATUS_MAPPING_ERROR:
            return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED:
            return "the GPU program failed to execute";
        case CUBLAS_STATUS_INTERNAL_ERROR:
            return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED:
            return "the functionality requested is not supported";
    }
    return "unknown error";
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long strideA, const double* B, int ldb,
                                         long long strideB, const double* beta, double* C, int ldc,
                                         long long strideC, int batchCount)
{
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
    if (!valid_op(transa) || !valid_op(transb) || m < 0 || n < 0 || k < 0 || batchCount < 0 ||
        lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m) ||
        alpha == nullptr || beta == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    const char transa_c = op_char(transa), transb_c = op_char(transb);
    for (int i = 0; i < batchCount; ++i) {
        dgemm_(&transa_c, &transb_c, &m, &n, &k, alpha, A + i * strideA, &lda, B + i * strideB,
               &ldb, beta, C + i * strideC, &ldc, 1, 1);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDtrsmBatched(cublasHandle_t handle, cublasSideMode_t side,
                                  cublasFillMode_t uplo, cublasOperation_t trans,
                                  cublasDiagType_t diag, int m, int n, const double* alpha,
                                  const double* const A[], int lda, double* const B[], int ldb,
                                  int batchCount)
{
    if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int a_order = side == CUBLAS_SIDE_LEFT ? m : n;
    if ((side != CUBLAS_SIDE_LEFT && side != CUBLAS_SIDE_RIGHT) ||
        (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) || !valid_op(trans) ||
        (diag != CUBLAS_DIAG_NON_UNIT && diag != CUBLAS_DIAG_UNIT) || m < 0 || n < 0 ||
        batchCount < 0 || lda < std::max(1, a_order) || ldb < std::max(1, m) || alpha == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const char side_c = side == CUBLAS_SIDE_LEFT ? 'L' : 'R';
    const char uplo_c = uplo == CUBLAS_FILL_MODE_LOWER ? 'L' : 'U';
    const char trans_c = op_char(trans), diag_c = diag == CUBLAS_DIAG_UNIT ? 'U' : 'N';
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < batchCount; ++i) {
        dtrsm_(&side_c, &uplo_c, &trans_c, &diag_c, &m, &n, alpha, A[i], &lda, B[i], &ldb, 1, 1, 1,
               1);
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
