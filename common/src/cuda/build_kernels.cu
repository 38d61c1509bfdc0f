// SPDX-License-Identifier: BSD-3-Clause
// iCov and y from spots and pixels (B&S eq. 4 with W diagonal), never through a dense
// projection matrix: each unknown's weighted spot is dotted only with the spots that overlap
// it inside the patch's pixel window. Same products, summed in the same order, as the CPU
// solver.

#include "cuda_check.hpp"
#include "device_helpers.cuh"
#include "ex2d/extraction_types.hpp"

namespace ex2d::cuda {

namespace {

constexpr int kThreads = 128;

// One thread per (patch, unknown): y, fluxweight and the fraction of the spot on pixels
// without data (masked or off the CCD), exactly 1 when no pixel is usable.
__global__ void gather_kernel(DeviceLayout layout, DeviceImage image, SpotBox box,
                              ChunkBuffers chunk)
{
    const int n = layout.nunknown();
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (long long)chunk.npatch * n) return;
    const int p = int(k / n), u = int(k % n);
    const int w = u / layout.nslot, slot = u % layout.nslot;
    const DevicePatch patch = chunk.patches[p];
    double fw = 0, y = 0, on_data = 0;
    if (slot < patch.nfiber) {
        const SpotRect r = spot_rect(box, patch, slot, w);
        for (int row = r.row0; row < r.row1; ++row) {
            const long long pix0 = (long long)row * image.nx;
            const double* a = r.stamp + (row - r.yc) * box.nx - r.xc;
            for (int col = r.col0; col < r.col1; ++col) {
                const double wpix = image.weights[pix0 + col];
                const double aw = a[col] * wpix;
                fw += aw;
                y += aw * double(image.pixels[pix0 + col]);
                if (wpix > 0) on_data += a[col];
            }
        }
    }
    chunk.fluxweight[k] = fw;
    chunk.rhs[k] = y;
    chunk.pixmask[k] = fw > 0 ? fmax(0.0, 1.0 - on_data) : 1.0;
}

// One block per (patch, unknown u): u's weighted stamp in shared memory, dotted with every
// v >= u whose spot overlaps it, as (w A_u) . A_v like the CPU's couple_spots. Writes both
// triangles, so the C blocks' GEMM and any reader see a full symmetric matrix.
__global__ void icov_kernel(DeviceLayout layout, DeviceImage image, SpotBox box, ChunkBuffers chunk)
{
    extern __shared__ double weighted[];
    const int n = layout.nunknown();
    const int p = blockIdx.x, u = blockIdx.y;
    const int wu = u / layout.nslot, slot_u = u % layout.nslot;
    const DevicePatch patch = chunk.patches[p];
    if (slot_u >= patch.nfiber) return;
    const SpotRect ru = spot_rect(box, patch, slot_u, wu);
    if (is_empty(ru)) return;
    const int stamp_size = box.ny * box.nx;
    for (int s = threadIdx.x; s < stamp_size; s += blockDim.x) {
        const int row = ru.yc + s / box.nx, col = ru.xc + s % box.nx;
        const bool inside = row >= ru.row0 && row < ru.row1 && col >= ru.col0 && col < ru.col1;
        weighted[s] =
            inside ? ru.stamp[s] * double(image.weights[(long long)row * image.nx + col]) : 0.0;
    }
    __syncthreads();
    double* icov = chunk.icov + (long long)p * n * n;
    for (int v = u + threadIdx.x; v < n; v += blockDim.x) {
        const int slot_v = v % layout.nslot;
        if (slot_v >= patch.nfiber) continue;
        const SpotRect rv = spot_rect(box, patch, slot_v, v / layout.nslot);
        if (is_empty(rv)) continue;
        const int r0 = max(ru.row0, rv.row0), r1 = min(ru.row1, rv.row1);
        const int c0 = max(ru.col0, rv.col0), c1 = min(ru.col1, rv.col1);
        if (r0 >= r1 || c0 >= c1) continue;
        double sum = 0;
        for (int row = r0; row < r1; ++row) {
            const double* a = rv.stamp + (row - rv.yc) * box.nx - rv.xc;
            const double* b = weighted + (row - ru.yc) * box.nx - ru.xc;
            for (int col = c0; col < c1; ++col) sum += b[col] * a[col];
        }
        icov[u + (long long)v * n] = sum;
        icov[v + (long long)u * n] = sum;
    }
}

// One block per patch. minweight = 1e-4 max(fluxweight); bins below it get the prior
// alpha = minweight - fluxweight, others alpha = regularize; iCov += diag(alpha^2 + 1e-15)
// (gpu_specter's convention, algorithm.md section 3).
__global__ void regularize_kernel(DeviceLayout layout, ChunkBuffers chunk, double regularize)
{
    __shared__ double scratch[kThreads];
    const int n = layout.nunknown();
    const int p = blockIdx.x;
    const DevicePatch patch = chunk.patches[p];
    const double* fw = chunk.fluxweight + (long long)p * n;
    double local_max = 0;
    for (int u = threadIdx.x; u < n; u += blockDim.x) {
        if (u % layout.nslot < patch.nfiber) local_max = fmax(local_max, fw[u]);
    }
    const double min_weight = SolverConstants::min_weight_frac * block_max(local_max, scratch);
    double* icov = chunk.icov + (long long)p * n * n;
    for (int u = threadIdx.x; u < n; u += blockDim.x) {
        double& diag = icov[u + (long long)u * n];
        if (u % layout.nslot >= patch.nfiber) {
            diag = 1.0;  // dummy slot: decoupled, solution 0
        } else {
            const double alpha = fw[u] < min_weight ? min_weight - fw[u] : regularize;
            diag += alpha * alpha + SolverConstants::diag_floor;
        }
        chunk.x[(long long)p * n + u] = chunk.rhs[(long long)p * n + u];
    }
}

// E: column c * nwave + w of patch p is the unit vector of unknown w * nslot + core_slot + c.
__global__ void unit_columns_kernel(DeviceLayout layout, ChunkBuffers chunk)
{
    const int n = layout.nunknown();
    const int ncol = layout.ncore * layout.nwave;
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (long long)chunk.npatch * ncol) return;
    const int p = int(k / ncol), col = int(k % ncol);
    const int c = col / layout.nwave, w = col % layout.nwave;
    const int u = w * layout.nslot + chunk.patches[p].core_slot + c;
    chunk.z[(long long)p * ncol * n + (long long)col * n + u] = 1.0;
}

__global__ void mark_factor_failures_kernel(ChunkBuffers chunk)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < chunk.npatch && chunk.factor_info[p] != 0) chunk.flags[p] |= kFlagFactor;
}

unsigned blocks_for(long long count)
{
    return unsigned((count + kThreads - 1) / kThreads);
}

}  // namespace

void launch_gather(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                   const ChunkBuffers& chunk, cudaStream_t stream)
{
    const long long count = (long long)chunk.npatch * layout.nunknown();
    EX2D_LAUNCH(gather_kernel, blocks_for(count), kThreads, 0, stream)(layout, image, box, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_icov(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                 const ChunkBuffers& chunk, cudaStream_t stream)
{
    const dim3 grid(unsigned(chunk.npatch), unsigned(layout.nunknown()));
    const size_t shared_bytes = size_t(box.ny) * box.nx * sizeof(double);
    allow_dynamic_shared(icov_kernel, shared_bytes, "iCov");
    EX2D_LAUNCH(icov_kernel, grid, kThreads, shared_bytes, stream)(layout, image, box, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_regularize(const DeviceLayout& layout, const ChunkBuffers& chunk, double regularize,
                       cudaStream_t stream)
{
    EX2D_LAUNCH(regularize_kernel, unsigned(chunk.npatch), kThreads, 0, stream)
    (layout, chunk, regularize);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_unit_columns(const DeviceLayout& layout, const ChunkBuffers& chunk, cudaStream_t stream)
{
    const long long count = (long long)chunk.npatch * layout.ncore * layout.nwave;
    EX2D_LAUNCH(unit_columns_kernel, blocks_for(count), kThreads, 0, stream)(layout, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_mark_factor_failures(const ChunkBuffers& chunk, cudaStream_t stream)
{
    EX2D_LAUNCH(mark_factor_failures_kernel, blocks_for(chunk.npatch), kThreads, 0, stream)(chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

}  // namespace ex2d::cuda
