// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The per-worker CUDA resources: the device, one stream that every kernel, copy and library
// call of a frame runs on (so no two libraries race on a buffer), and the cuBLAS and
// cuSOLVER handles bound to that stream.

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

namespace ex2d::cuda {

class CudaResources {
public:
    explicit CudaResources(int device);
    ~CudaResources();
    CudaResources(const CudaResources&) = delete;
    CudaResources& operator=(const CudaResources&) = delete;

    /// Makes this worker's device current on the calling thread.
    void activate() const;

    int device() const { return device_; }
    const std::string& device_name() const { return device_name_; }
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t blas() const { return blas_; }
    cusolverDnHandle_t solver() const { return solver_; }
    cusolverDnParams_t solver_params() const { return solver_params_; }

private:
    void create();
    void release() noexcept;
    int device_ = 0;
    std::string device_name_;
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    cusolverDnHandle_t solver_ = nullptr;
    cusolverDnParams_t solver_params_ = nullptr;
};

/// Events around the stages of a chunk; elapsed device time per stage once synchronised.
class StageEvents {
public:
    // ChunkSolver::solve marks the stages and, within them, each library call (kCall* marks).
    static constexpr int kMarks = 10;
    StageEvents();
    ~StageEvents();
    StageEvents(const StageEvents&) = delete;
    StageEvents& operator=(const StageEvents&) = delete;
    void mark(int index, cudaStream_t stream);
    /// Seconds between marks `from` and `to` (both recorded, stream synchronised).
    double seconds(int from, int to) const;

private:
    void release() noexcept;
    cudaEvent_t events_[kMarks] = {};
};

}  // namespace ex2d::cuda
