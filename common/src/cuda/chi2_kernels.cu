// SPDX-License-Identifier: BSD-3-Clause
// chi2pix on the device (desispec's CHI2PIX): the model A . xflux over each patch's window with
// every solved spot, the pixel chi2 with variance 1/ivar + (psferr * model)^2, and its
// spot-weighted mean per kept bin. Gathers rather than scatters, so every pixel sums its
// spots in the CPU's order and repeated runs are bit-identical.

#include "cuda_check.hpp"
#include "device_helpers.cuh"
#include "ex2d/status.hpp"

namespace ex2d::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 8;

struct CachedRect {
    int row0, row1, col0, col1, yc, xc;
};

// One block per (tile of kTileRows window rows, patch). The spots that reach the tile are
// marked first, so each pixel only tests those.
__global__ void window_chi2_kernel(DeviceLayout layout, DeviceImage image, SpotBox box,
                                   ChunkBuffers chunk, double psferr)
{
    extern __shared__ unsigned char shared_bytes[];
    const int n = layout.nunknown();
    CachedRect* rects = reinterpret_cast<CachedRect*>(shared_bytes);
    unsigned char* reaches = shared_bytes + sizeof(CachedRect) * n;
    const int p = blockIdx.x;
    const DevicePatch patch = chunk.patches[p];
    const int rows = patch.row_end - patch.row_begin, cols = patch.col_end - patch.col_begin;
    const int tile0 = blockIdx.y * kTileRows;
    if (tile0 >= rows) return;
    const int tile1 = min(rows, tile0 + kTileRows);
    for (int u = threadIdx.x; u < n; u += blockDim.x) {
        const int slot = u % layout.nslot;
        bool hit = false;
        if (slot < patch.nfiber) {
            const SpotRect r = spot_rect(box, patch, slot, u / layout.nslot);
            rects[u] = CachedRect{r.row0, r.row1, r.col0, r.col1, r.yc, r.xc};
            hit = !is_empty(r) && r.row0 < patch.row_begin + tile1 &&
                  r.row1 > patch.row_begin + tile0;
        }
        reaches[u] = hit ? 1 : 0;
    }
    __syncthreads();
    const double* x = chunk.x + (long long)p * n;
    for (int k = threadIdx.x; k < (tile1 - tile0) * cols; k += blockDim.x) {
        const int wr = tile0 + k / cols, wc = k % cols;
        const int row = patch.row_begin + wr, col = patch.col_begin + wc;
        double model = 0;
        for (int u = 0; u < n; ++u) {
            if (!reaches[u]) continue;
            const CachedRect& r = rects[u];
            if (row < r.row0 || row >= r.row1 || col < r.col0 || col >= r.col1) continue;
            const int slot = u % layout.nslot, w = u / layout.nslot;
            const long long spot =
                (long long)(patch.spot_fiber + slot) * box.nwave + patch.spot_wave + w;
            model +=
                box.values[spot * box.ny * box.nx + (row - r.yc) * box.nx + (col - r.xc)] * x[u];
        }
        const long long pix = (long long)row * image.nx + col;
        const double ivar = image.weights[pix];
        double chi2 = 0, weight = 0;
        if (ivar > 0) {
            const double model_sigma = psferr * model + 1e-32;
            const double v = 1.0 / (1.0 / ivar + model_sigma * model_sigma);
            const double resid = double(image.pixels[pix]) - model;
            chi2 = resid * resid * v;
            weight = v > 0 ? 1.0 : 0.0;
        }
        const long long out = patch.window_offset + (long long)wr * cols + wc;
        chunk.window_chi2[out] = chi2;
        chunk.window_weight[out] = weight;
    }
}

// One thread per kept bin (patch, kept fibre, kept wavelength).
__global__ void chi2pix_kernel(DeviceLayout layout, SpotBox box, ChunkBuffers chunk)
{
    const int ncw = layout.ncore_wave;
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (long long)chunk.npatch * layout.ncore * ncw) return;
    const int jj = int(k % ncw);
    const long long b = k / ncw;
    const int p = int(b / layout.ncore), c = int(b % layout.ncore);
    const DevicePatch patch = chunk.patches[p];
    if (jj >= patch.ncore_wave) {
        chunk.out_chi2pix[k] = 0;
        return;
    }
    const int w = layout.core_wave_offset + jj;
    const SpotRect r = spot_rect(box, patch, patch.core_slot + c, w);
    const int cols = patch.col_end - patch.col_begin;
    double num = 0, den = 0;
    for (int row = r.row0; row < r.row1; ++row) {
        const long long k0 =
            patch.window_offset + (long long)(row - patch.row_begin) * cols - patch.col_begin;
        const double* a = r.stamp + (row - r.yc) * box.nx - r.xc;
        for (int col = r.col0; col < r.col1; ++col) {
            num += a[col] * chunk.window_chi2[k0 + col];
            den += a[col] * chunk.window_weight[k0 + col];
        }
    }
    chunk.out_chi2pix[k] = den > 0 ? num / den : 0.0;
}

}  // namespace

void launch_window_chi2(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                        const ChunkBuffers& chunk, double psferr, int max_window_rows,
                        cudaStream_t stream)
{
    const size_t shared = size_t(layout.nunknown()) * (sizeof(CachedRect) + 1);
    allow_dynamic_shared(window_chi2_kernel, shared, "window chi2");
    if (max_window_rows <= 0 || chunk.npatch == 0) return;
    const dim3 grid(unsigned(chunk.npatch),
                    unsigned((max_window_rows + kTileRows - 1) / kTileRows));
    EX2D_LAUNCH(window_chi2_kernel, grid, kThreads, shared, stream)
    (layout, image, box, chunk, psferr);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_chi2pix(const DeviceLayout& layout, const SpotBox& box, const ChunkBuffers& chunk,
                    cudaStream_t stream)
{
    const long long count = (long long)chunk.npatch * layout.ncore * layout.ncore_wave;
    if (count == 0) return;
    EX2D_LAUNCH(chi2pix_kernel, unsigned((count + kThreads - 1) / kThreads), kThreads, 0, stream)
    (layout, box, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

}  // namespace ex2d::cuda
