// SPDX-License-Identifier: BSD-3-Clause
#include "cuda_resources.hpp"

#include "cuda_check.hpp"
#include "ex2d/logging.hpp"

namespace ex2d::cuda {

CudaResources::CudaResources(int device) : device_(device)
{
    // A constructor that throws runs no destructor: release what was made before rethrowing.
    try {
        create();
    } catch (...) {
        release();
        throw;
    }
}

void CudaResources::create()
{
    EX2D_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp props{};
    EX2D_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    device_name_ = props.name;
    EX2D_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    EX2D_CUDA_CHECK(cuda_libraries().cublasCreate(&blas_));
    EX2D_CUDA_CHECK(cuda_libraries().cublasSetStream(blas_, stream_));
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnCreate(&solver_));
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnSetStream(solver_, stream_));
    // Bit-identical results for identical inputs, as the CPU backend gives.
    EX2D_CUDA_CHECK(
        cuda_libraries().cusolverDnSetDeterministicMode(solver_, CUSOLVER_DETERMINISTIC_RESULTS));
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnCreateParams(&solver_params_));
    // One algorithm for the batched eigen-solver, so that its results do not depend on a
    // choice cuSOLVER could make differently from run to run. cuSOLVER 12.0 (CUDA 13.0)
    // answers INVALID_VALUE for every algorithm of this function (seen on the build machine,
    // without a device): its default is kept, and determinism rests on the mode set above.
    const cusolverStatus_t algorithm = cuda_libraries().cusolverDnSetAdvOptions(
        solver_params_, CUSOLVERDN_SYEVBATCHED, CUSOLVER_ALG_1);
    if (algorithm == CUSOLVER_STATUS_INVALID_VALUE) {
        logger()->info(
            "cuSOLVER takes no algorithm for the batched eigen-solver; its default is used");
    } else {
        EX2D_CUDA_CHECK(algorithm);
    }
}

CudaResources::~CudaResources()
{
    release();
}

void CudaResources::release() noexcept
{
    // Failures here are logged, not raised: this runs in the destructor.
    if (solver_params_ &&
        cuda_libraries().cusolverDnDestroyParams(solver_params_) != CUSOLVER_STATUS_SUCCESS) {
        logger()->error("cusolverDnDestroyParams failed");
    }
    if (solver_ && cuda_libraries().cusolverDnDestroy(solver_) != CUSOLVER_STATUS_SUCCESS) {
        logger()->error("cusolverDnDestroy failed");
    }
    if (blas_ && cuda_libraries().cublasDestroy(blas_) != CUBLAS_STATUS_SUCCESS)
        logger()->error("cublasDestroy failed");
    if (stream_) {
        const cudaError_t status = cudaStreamDestroy(stream_);
        if (status != cudaSuccess)
            logger()->error("cudaStreamDestroy failed: {}", cudaGetErrorString(status));
    }
    solver_params_ = nullptr;
    solver_ = nullptr;
    blas_ = nullptr;
    stream_ = nullptr;
}

void CudaResources::activate() const
{
    EX2D_CUDA_CHECK(cudaSetDevice(device_));
}

StageEvents::StageEvents()
{
    try {
        for (cudaEvent_t& e : events_) EX2D_CUDA_CHECK(cudaEventCreate(&e));
    } catch (...) {
        release();
        throw;
    }
}

StageEvents::~StageEvents()
{
    release();
}

void StageEvents::release() noexcept
{
    for (cudaEvent_t& e : events_) {
        if (e && cudaEventDestroy(e) != cudaSuccess) logger()->error("cudaEventDestroy failed");
        e = nullptr;
    }
}

void StageEvents::mark(int index, cudaStream_t stream)
{
    EX2D_CUDA_CHECK(cudaEventRecord(events_[index], stream));
}

double StageEvents::seconds(int from, int to) const
{
    float ms = 0;
    EX2D_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
    return ms * 1e-3;
}

}  // namespace ex2d::cuda
