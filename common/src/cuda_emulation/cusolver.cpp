// SPDX-License-Identifier: BSD-3-Clause
// The emulated cuSOLVER (libcusolver of the emulation build, opened by cuda_libraries()): the
// calls the CUDA backend makes, on the host LAPACK, with cuSOLVER's conventions: column-major,
// one info per matrix of a batch written for every matrix, potrsBatched's single info only
// for a wrong argument, workspaces sized by the _bufferSize calls and used in full, and the
// refusals of the CUDA 13.0 toolkit (no algorithm choice for the batched eigen-solver).

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cusolverDn.h"
#include "emulated_lapack.hpp"

struct cusolverDnContext {
    cudaStream_t stream = nullptr;
    cusolverDeterministicMode_t mode = CUSOLVER_DETERMINISTIC_RESULTS;
};
struct cusolverDnParams {
    cusolverAlgMode_t getrf = CUSOLVER_ALG_0, potrf = CUSOLVER_ALG_0;
};

namespace {

bool valid_fill(cublasFillMode_t uplo)
{
    return uplo == CUBLAS_FILL_MODE_LOWER || uplo == CUBLAS_FILL_MODE_UPPER;
}

char fill_char(cublasFillMode_t uplo)
{
    return uplo == CUBLAS_FILL_MODE_LOWER ? 'L' : 'U';
}

// dsyevd's workspace for order n: doubles and ints.
void syevd_workspace(cusolverEigMode_t jobz, int n, int& lwork, int& liwork)
{
    const char jobz_c = jobz == CUSOLVER_EIG_MODE_VECTOR ? 'V' : 'N', uplo_c = 'L';
    const int query = -1;
    int info = 0, iwork_size = 0;
    double work_size = 0, a = 0, w = 0;
    const int lda = std::max(1, n);
    dsyevd_(&jobz_c, &uplo_c, &n, &a, &lda, &w, &work_size, &query, &iwork_size, &query, &info, 1,
            1);
    lwork = std::max(1, int(work_size));
    liwork = std::max(1, iwork_size);
}

int syevd(cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, double* a, int lda, double* w,
          double* work, int lwork, std::vector<int>& iwork)
{
    const char jobz_c = jobz == CUSOLVER_EIG_MODE_VECTOR ? 'V' : 'N', uplo_c = fill_char(uplo);
    const int liwork = int(iwork.size());
    int info = 0;
    dsyevd_(&jobz_c, &uplo_c, &n, a, &lda, w, work, &lwork, iwork.data(), &liwork, &info, 1, 1);
    return info;
}

// The batched eigen-solver's device workspace: a fixed part and one order-n syevd workspace
// per matrix, so that it grows with the batch as the planner expects.
std::size_t batched_eigen_device_bytes(int n, std::int64_t batch)
{
    int lwork = 0, liwork = 0;
    syevd_workspace(CUSOLVER_EIG_MODE_VECTOR, n, lwork, liwork);
    return (std::size_t(1) << 20) + std::size_t(batch) * std::size_t(lwork) * sizeof(double);
}

// The largest order the emulated batched eigen-solver takes: unlimited unless
// EX2D_EMULATION_SYEVBATCHED_MAX_N says otherwise, so that tests can reach the backend's
// fallback to one syevd per block, as a toolkit that refuses the size would.
std::int64_t batched_eigen_max_order()
{
    const char* env = std::getenv("EX2D_EMULATION_SYEVBATCHED_MAX_N");
    return env ? std::atoll(env) : INT32_MAX;
}

}  // namespace

extern "C" {

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* handle)
{
    if (handle == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
    *handle = new cusolverDnContext;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t stream)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t* params)
{
    if (params == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
    *params = new cusolverDnParams;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDestroyParams(cusolverDnParams_t params)
{
    if (params == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
    delete params;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSetAdvOptions(cusolverDnParams_t params, cusolverDnFunction_t function,
                                         cusolverAlgMode_t algo)
{
    if (params == nullptr) return CUSOLVER_STATUS_INVALID_VALUE;
    switch (function) {
        case CUSOLVERDN_GETRF:
            if (algo != CUSOLVER_ALG_0 && algo != CUSOLVER_ALG_1) break;
            params->getrf = algo;
            return CUSOLVER_STATUS_SUCCESS;
        case CUSOLVERDN_POTRF:
            if (algo != CUSOLVER_ALG_0) break;
            params->potrf = algo;
            return CUSOLVER_STATUS_SUCCESS;
        case CUSOLVERDN_SYEVBATCHED:
            // cuSOLVER 12.0 (CUDA 13.0) refuses every algorithm here (docs/gpu.md).
            break;
    }
    return CUSOLVER_STATUS_INVALID_VALUE;
}

cusolverStatus_t cusolverDnSetDeterministicMode(cusolverDnHandle_t handle,
                                                cusolverDeterministicMode_t mode)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (mode != CUSOLVER_DETERMINISTIC_RESULTS && mode != CUSOLVER_ALLOW_NON_DETERMINISTIC_RESULTS)
        return CUSOLVER_STATUS_INVALID_VALUE;
    handle->mode = mode;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDpotrfBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
                                         double* Aarray[], int lda, int* infoArray, int batchSize)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!valid_fill(uplo) || n < 0 || lda < std::max(1, n) || batchSize < 0)
        return CUSOLVER_STATUS_INVALID_VALUE;
    const char uplo_c = fill_char(uplo);
    for (int i = 0; i < batchSize; ++i) {
        int info = 0;
        if (n > 0) dpotrf_(&uplo_c, &n, Aarray[i], &lda, &info, 1);
        infoArray[i] = info;
    }
    return CUSOLVER_STATUS_SUCCESS;
}

// cuSOLVER's signature: its d_info is an output, which this emulation never needs to write
// (the arguments are checked here, and dpotrs fails on nothing else).
// NOLINTBEGIN(readability-non-const-parameter)
cusolverStatus_t cusolverDnDpotrsBatched(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n,
                                         int nrhs, double* A[], int lda, double* B[], int ldb,
                                         int* d_info, int batchSize)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    // Only one right-hand side per matrix, as the header says.
    if (!valid_fill(uplo) || n < 0 || nrhs != 1 || lda < std::max(1, n) || ldb < std::max(1, n) ||
        batchSize < 0 || d_info == nullptr) {
        return CUSOLVER_STATUS_INVALID_VALUE;
    }
    const char uplo_c = fill_char(uplo);
    for (int i = 0; i < batchSize && n > 0; ++i) {
        int info = 0;
        dpotrs_(&uplo_c, &n, &nrhs, A[i], &lda, B[i], &ldb, &info, 1);
    }
    return CUSOLVER_STATUS_SUCCESS;
}
// NOLINTEND(readability-non-const-parameter)

cusolverStatus_t cusolverDnDsyevd_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
                                             cublasFillMode_t uplo, int n, const double* /*A*/,
                                             int lda, const double* /*W*/, int* lwork)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!valid_fill(uplo) || n < 0 || lda < std::max(1, n) || lwork == nullptr)
        return CUSOLVER_STATUS_INVALID_VALUE;
    int liwork = 0;
    syevd_workspace(jobz, n, *lwork, liwork);
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnDsyevd(cusolverDnHandle_t handle, cusolverEigMode_t jobz,
                                  cublasFillMode_t uplo, int n, double* A, int lda, double* W,
                                  double* work, int lwork, int* info)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    int needed = 0, liwork = 0;
    syevd_workspace(jobz, n, needed, liwork);
    if (!valid_fill(uplo) || n < 0 || lda < std::max(1, n) || lwork < needed)
        return CUSOLVER_STATUS_INVALID_VALUE;
    std::vector<int> iwork(liwork);
    *info = n > 0 ? syevd(jobz, uplo, n, A, lda, W, work, lwork, iwork) : 0;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXsyevBatched_bufferSize(
    cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t /*jobz*/,
    cublasFillMode_t uplo, std::int64_t n, cudaDataType dataTypeA, const void* /*A*/,
    std::int64_t lda, cudaDataType dataTypeW, const void* /*W*/, cudaDataType computeType,
    std::size_t* workspaceInBytesOnDevice, std::size_t* workspaceInBytesOnHost,
    std::int64_t batchSize)
{
    if (handle == nullptr) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (params == nullptr || !valid_fill(uplo) || n < 0 || n > batched_eigen_max_order() ||
        lda < std::max<std::int64_t>(1, n) || batchSize < 0 || dataTypeA != CUDA_R_64F ||
        dataTypeW != CUDA_R_64F || computeType != CUDA_R_64F) {
        return CUSOLVER_STATUS_INVALID_VALUE;
    }
    *workspaceInBytesOnDevice = batched_eigen_device_bytes(int(n), batchSize);
    *workspaceInBytesOnHost = 0;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXsyevBatched(
    cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz,
    cublasFillMode_t uplo, std::int64_t n, cudaDataType dataTypeA, void* A, std::int64_t lda,
    cudaDataType dataTypeW, void* W, cudaDataType computeType, void* bufferOnDevice,
    std::size_t workspaceInBytesOnDevice, void* /*bufferOnHost*/,
    std::size_t /*workspaceInBytesOnHost*/, int* info, std::int64_t batchSize)
{
    std::size_t device_bytes = 0, host_bytes = 0;
    const cusolverStatus_t sized = cusolverDnXsyevBatched_bufferSize(
        handle, params, jobz, uplo, n, dataTypeA, A, lda, dataTypeW, W, computeType, &device_bytes,
        &host_bytes, batchSize);
    if (sized != CUSOLVER_STATUS_SUCCESS) return sized;
    if (workspaceInBytesOnDevice < device_bytes || bufferOnDevice == nullptr)
        return CUSOLVER_STATUS_INVALID_VALUE;
    // Each matrix's syevd works in its own slice of the caller's workspace, so a buffer
    // smaller than announced is an overflow here, as on the device.
    int lwork = 0, liwork = 0;
    syevd_workspace(jobz, int(n), lwork, liwork);
    std::vector<int> iwork(liwork);
    auto* a = static_cast<double*>(A);
    auto* w = static_cast<double*>(W);
    auto* work = reinterpret_cast<double*>(static_cast<char*>(bufferOnDevice) + (1 << 20));
    for (std::int64_t k = 0; k < batchSize; ++k) {
        info[k] = n > 0 ? syevd(jobz, uplo, int(n), a + k * lda * n, int(lda), w + k * n,
                                work + k * lwork, lwork, iwork)
                        : 0;
    }
    return CUSOLVER_STATUS_SUCCESS;
}

}  // extern "C"
