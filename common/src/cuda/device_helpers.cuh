// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Small device functions shared by the backend's kernels: where a spot lands in a patch's
// pixel window (the same clipping as the CPU solver's SpotRect) and block reductions.

#include <string>

#include "cuda_check.hpp"
#include "ex2d/status.hpp"
#include "kernel_launch.hpp"
#include "kernels.hpp"

namespace ex2d::cuda {

/// Part of spot (slot, w) of a patch inside the patch's pixel window.
struct SpotRect {
    int row0, row1, col0, col1;  ///< empty when row0 >= row1
    int yc, xc;
    const double* stamp;
};

__device__ inline SpotRect spot_rect(const SpotBox& box, const DevicePatch& p, int slot, int w)
{
    const long long spot = (long long)(p.spot_fiber + slot) * box.nwave + p.spot_wave + w;
    SpotRect r;
    r.xc = box.xc[spot];
    r.yc = box.yc[spot];
    r.stamp = box.values + spot * box.ny * box.nx;
    r.row0 = max(r.yc, p.row_begin);
    r.row1 = min(r.yc + box.ny, p.row_end);
    r.col0 = max(r.xc, p.col_begin);
    r.col1 = min(r.xc + box.nx, p.col_end);
    if (r.row0 >= r.row1 || r.col0 >= r.col1) r.row1 = r.row0;
    return r;
}

/// Lets `kernel` use `bytes` of dynamic shared memory: above the default 48 KiB the kernel
/// must opt in, up to the device's limit; beyond it the input is too large for this backend.
template <class Kernel>
void allow_dynamic_shared(Kernel kernel, std::size_t bytes, const char* name)
{
    constexpr std::size_t kDefaultLimit = 48 * 1024;
    if (bytes <= kDefaultLimit) return;
    int device = 0, limit = 0;
    EX2D_CUDA_CHECK(cudaGetDevice(&device));
    EX2D_CUDA_CHECK(
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (bytes > std::size_t(limit)) {
        throw Error(std::string("CUDA backend: the ") + name + " kernel needs " +
                    std::to_string(bytes) +
                    " bytes of shared memory for this PSF and patch size; the device allows " +
                    std::to_string(limit));
    }
    EX2D_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

__device__ inline bool is_empty(const SpotRect& r)
{
    return r.row0 >= r.row1;
}

/// Sum over the block of one value per thread; every thread gets the result. `scratch`
/// holds blockDim.x doubles. Fixed tree order, so results are reproducible.
__device__ inline double block_sum(double value, double* scratch)
{
    scratch[threadIdx.x] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

/// Maximum over the block, as block_sum.
__device__ inline double block_max(double value, double* scratch)
{
    scratch[threadIdx.x] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride)
            scratch[threadIdx.x] = fmax(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
        __syncthreads();
    }
    const double total = scratch[0];
    __syncthreads();
    return total;
}

}  // namespace ex2d::cuda
