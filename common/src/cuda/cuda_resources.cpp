// SPDX-License-Identifier: BSD-3-Clause
#include "cuda_resources.hpp"

#include "cuda_check.hpp"
#include "ex2d/logging.hpp"

namespace ex2d::cuda {

CudaResources::CudaResources(int device) : device_(device)
{
    EX2D_CUDA_CHECK(cudaSetDevice(device_));
    cudaDeviceProp props{};
    EX2D_CUDA_CHECK(cudaGetDeviceProperties(&props, device_));
    device_name_ = props.name;
    EX2D_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    EX2D_CUDA_CHECK(cublasCreate(&blas_));
    EX2D_CUDA_CHECK(cublasSetStream(blas_, stream_));
    EX2D_CUDA_CHECK(cusolverDnCreate(&solver_));
    EX2D_CUDA_CHECK(cusolverDnSetStream(solver_, stream_));
    // Bit-identical results for identical inputs, as the CPU backend gives.
    EX2D_CUDA_CHECK(cusolverDnSetDeterministicMode(solver_, CUSOLVER_DETERMINISTIC_RESULTS));
    EX2D_CUDA_CHECK(cusolverDnCreateParams(&solver_params_));
}

CudaResources::~CudaResources()
{
    // Destructors must not throw: failures here are logged, not raised.
    if (solver_params_ && cusolverDnDestroyParams(solver_params_) != CUSOLVER_STATUS_SUCCESS) {
        logger()->error("cusolverDnDestroyParams failed");
    }
    if (solver_ && cusolverDnDestroy(solver_) != CUSOLVER_STATUS_SUCCESS) {
        logger()->error("cusolverDnDestroy failed");
    }
    if (blas_ && cublasDestroy(blas_) != CUBLAS_STATUS_SUCCESS) logger()->error("cublasDestroy failed");
    if (stream_) {
        const cudaError_t status = cudaStreamDestroy(stream_);
        if (status != cudaSuccess) logger()->error("cudaStreamDestroy failed: {}", cudaGetErrorString(status));
    }
}

void CudaResources::activate() const { EX2D_CUDA_CHECK(cudaSetDevice(device_)); }

StageEvents::StageEvents()
{
    for (cudaEvent_t& e : events_) EX2D_CUDA_CHECK(cudaEventCreate(&e));
}

StageEvents::~StageEvents()
{
    for (cudaEvent_t e : events_) {
        if (e && cudaEventDestroy(e) != cudaSuccess) logger()->error("cudaEventDestroy failed");
    }
}

void StageEvents::mark(int index, cudaStream_t stream) { EX2D_CUDA_CHECK(cudaEventRecord(events_[index], stream)); }

double StageEvents::seconds(int from, int to) const
{
    float ms = 0;
    EX2D_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[from], events_[to]));
    return ms * 1e-3;
}

}  // namespace ex2d::cuda
