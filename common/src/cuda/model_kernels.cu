// SPDX-License-Identifier: BSD-3-Clause
// The model image A . xflux on the device, as a gather: each pixel finds, per fibre, the
// wavelengths whose stamp rows cover it by binary search on the (non-decreasing) stamp rows,
// and adds their terms in the host's order. No atomics, so the image is bit-reproducible.

#include "cuda_check.hpp"
#include "device_helpers.cuh"

namespace ex2d::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void model_bounds_kernel(SpotBox box, int* out)
{
    __shared__ double scratch[kThreads];
    const long long nspot = (long long)box.nfiber * box.nwave;
    double lo = 1e300, hi = -1e300, unordered = 0;
    for (long long k = threadIdx.x; k < nspot; k += blockDim.x) {
        lo = fmin(lo, double(box.xc[k]));
        hi = fmax(hi, double(box.xc[k] + box.nx));
        if (k % box.nwave != 0 && box.yc[k] < box.yc[k - 1]) unordered = 1;
    }
    lo = -block_max(-lo, scratch);
    hi = block_max(hi, scratch);
    unordered = block_max(unordered, scratch);
    if (threadIdx.x == 0) {
        out[0] = int(lo);
        out[1] = int(hi);
        out[2] = int(unordered);
    }
}

__global__ void model_image_kernel(SpotBox box, const double* xflux, double* model, int ny, int nx,
                                   int col_begin, int ncols)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (long long)ny * ncols) return;
    const int row = int(k / ncols), col = col_begin + int(k % ncols);
    const long long pix = (long long)row * nx + col;
    double m = model[pix];
    for (int f = 0; f < box.nfiber; ++f) {
        const int* yc = box.yc + (long long)f * box.nwave;
        const int* xc = box.xc + (long long)f * box.nwave;
        // first wavelength whose stamp can reach this row: yc > row - ny_stamp
        int lo = 0, hi = box.nwave;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (yc[mid] > row - box.ny)
                hi = mid;
            else
                lo = mid + 1;
        }
        for (int w = lo; w < box.nwave && yc[w] <= row; ++w) {
            if (col < xc[w] || col >= xc[w] + box.nx) continue;
            const double x = xflux[(long long)f * box.nwave + w];
            if (x == 0) continue;
            const double* stamp = box.values + ((long long)f * box.nwave + w) * box.ny * box.nx;
            m += stamp[(row - yc[w]) * box.nx + (col - xc[w])] * x;
        }
    }
    model[pix] = m;
}

}  // namespace

void launch_model_bounds(const SpotBox& box, int* out, cudaStream_t stream)
{
    EX2D_LAUNCH(model_bounds_kernel, 1, kThreads, 0, stream)(box, out);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_model_image(const SpotBox& box, const double* xflux, double* model, int ny, int nx,
                        int col_begin, int col_end, cudaStream_t stream)
{
    col_begin = max(col_begin, 0);
    col_end = min(col_end, nx);
    if (col_end <= col_begin || ny <= 0) return;
    const long long count = (long long)ny * (col_end - col_begin);
    EX2D_LAUNCH(model_image_kernel, unsigned((count + kThreads - 1) / kThreads), kThreads, 0,
                stream)
    (box, xflux, model, ny, nx, col_begin, col_end - col_begin);
    EX2D_CUDA_CHECK_LAUNCH();
}

}  // namespace ex2d::cuda
