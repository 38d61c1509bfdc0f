// SPDX-License-Identifier: BSD-3-Clause
#include "device_memory.hpp"

#include <algorithm>

#include <cuda_runtime_api.h>

#include "cuda_check.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/status.hpp"

namespace ex2d::cuda {

namespace {

std::string mib(std::size_t bytes)
{
    return std::to_string((bytes + (1u << 19)) >> 20) + " MiB";
}

}  // namespace

void MemoryLedger::add(std::size_t bytes)
{
    held += bytes;
    ++buffers;
    peak = std::max(peak, held);
}

void* allocate_device(std::size_t bytes, const char* what, const MemoryLedger& ledger)
{
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // clear the non-sticky error so the worker can go on
        std::size_t free_bytes = 0, total_bytes = 0;
        EX2D_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        throw Error("CUDA backend: out of device memory allocating " + std::string(what) + " (" +
                    mib(bytes) + "); this worker holds " + mib(ledger.held) + ", the device has " +
                    mib(free_bytes) + " free of " + mib(total_bytes) +
                    " (lower the memory budget or run fewer workers per GPU)");
    }
    EX2D_CUDA_CHECK(status);
    return ptr;
}

void free_device(void* ptr)
{
    if (!ptr) return;
    const cudaError_t status = cudaFree(ptr);
    if (status != cudaSuccess) logger()->error("cudaFree failed: {}", cudaGetErrorString(status));
}

void* allocate_pinned(std::size_t bytes, const char* what)
{
    void* ptr = nullptr;
    const cudaError_t status = cudaMallocHost(&ptr, bytes);
    if (status != cudaSuccess) {
        throw Error("CUDA backend: cannot allocate " + mib(bytes) + " of pinned host memory for " +
                    what + ": " + cudaGetErrorString(status));
    }
    return ptr;
}

void free_pinned(void* ptr)
{
    if (!ptr) return;
    const cudaError_t status = cudaFreeHost(ptr);
    if (status != cudaSuccess)
        logger()->error("cudaFreeHost failed: {}", cudaGetErrorString(status));
}

}  // namespace ex2d::cuda
