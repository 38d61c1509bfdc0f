// SPDX-License-Identifier: BSD-3-Clause
// The per-fibre covariance blocks C_ss to the kept outputs: checks around the batched
// eigen-decomposition, Q = C_ss^-1/2 with clipped eigenvalues, and R, flux and ivar
// (B&S eqs. 10-16), in the CPU solver's order of operations.

#include "cuda_check.hpp"
#include "device_helpers.cuh"
#include "ex2d/extraction_types.hpp"

namespace ex2d::cuda {

namespace {

constexpr int kThreads = 128;

// One block per (patch, kept fibre) block b = p * ncore + c.
__global__ void frobenius_kernel(DeviceLayout layout, ChunkBuffers chunk)
{
    __shared__ double scratch[kThreads];
    const int nw = layout.nwave;
    const int b = blockIdx.x, p = b / layout.ncore;
    double* block = chunk.cblock + (long long)b * nw * nw;
    double partial = 0;
    for (int k = threadIdx.x; k < nw * nw; k += blockDim.x) partial += block[k] * block[k];
    double frob2 = block_sum(partial, scratch);
    // A failed factorisation leaves garbage in L, hence in C: hand the eigen-solver the
    // identity instead, so no NaN ever enters it. The patch is already flagged.
    // From factor_info, not flags: other blocks of this patch set bits in flags with atomicOr
    // meanwhile, and a plain read of that word beside them is a data race.
    const bool failed = chunk.factor_info[p] != 0;
    if (failed || !isfinite(frob2)) {
        for (int k = threadIdx.x; k < nw * nw; k += blockDim.x)
            block[k] = (k % (nw + 1) == 0) ? 1.0 : 0.0;
        if (threadIdx.x == 0 && !failed) atomicOr(chunk.flags + p, kFlagNonFinite);
        frob2 = nw;
    }
    if (threadIdx.x == 0) chunk.frob2[b] = frob2;
}

// Eigenvalues ascending in eigval, eigenvectors as columns of cblock (cuSOLVER, column
// major). The decomposition is accepted if info is 0, the largest eigenvalue is positive and
// sum(w^2) equals ||C||_F^2, which catches solvers that return the diagonal unconverged.
// Then column k is scaled by max(w_k, 1e-14 max w)^-1/4 so that B B^T = V diag(w^-1/2) V^T.
__global__ void scale_eigenvectors_kernel(DeviceLayout layout, ChunkBuffers chunk)
{
    __shared__ double scratch[kThreads];
    const int nw = layout.nwave;
    const int b = blockIdx.x, p = b / layout.ncore;
    const double* w = chunk.eigval + (long long)b * nw;
    double local_max = -INFINITY, local_sq = 0;
    for (int k = threadIdx.x; k < nw; k += blockDim.x) {
        local_max = fmax(local_max, w[k]);
        local_sq += w[k] * w[k];
    }
    const double max_eig = block_max(local_max, scratch);
    const double sum_sq = block_sum(local_sq, scratch);
    const double frob2 = chunk.frob2[b];
    const bool ok = chunk.eig_info[b] == 0 && max_eig > 0 && isfinite(sum_sq) &&
                    fabs(sum_sq - frob2) <= 1e-8 * frob2;
    if (!ok) {
        if (threadIdx.x == 0) atomicOr(chunk.flags + p, kFlagEigen);
        return;
    }
    const double floor_eig = SolverConstants::eig_clip * max_eig;
    double* v = chunk.cblock + (long long)b * nw * nw;
    for (int k = threadIdx.x; k < nw * nw; k += blockDim.x) {
        const double wk = fmax(w[k / nw], floor_eig);
        v[k] /= sqrt(sqrt(wk));
    }
}

__global__ void finalize_kernel(DeviceLayout layout, ChunkBuffers chunk)
{
    extern __shared__ double row_sums[];
    const int nw = layout.nwave, n = layout.nunknown(), ncw = layout.ncore_wave;
    const int nd = layout.ndiag / 2;
    const int b = blockIdx.x, p = b / layout.ncore, c = b % layout.ncore;
    const DevicePatch patch = chunk.patches[p];
    const int slot = patch.core_slot + c;
    const double* q = chunk.qblock + (long long)b * nw * nw;
    for (int i = threadIdx.x; i < nw; i += blockDim.x) {
        double s = 0;
        for (int j = 0; j < nw; ++j) s += q[i + (long long)j * nw];
        row_sums[i] = s;
    }
    __syncthreads();
    const double* x = chunk.x + (long long)p * n;
    const double* fw = chunk.fluxweight + (long long)p * n;
    bool bad = false;
    for (int jj = threadIdx.x; jj < ncw; jj += blockDim.x) {
        const long long out = (long long)b * ncw + jj;
        if (jj >= patch.ncore_wave) {
            chunk.out_flux[out] = chunk.out_ivar[out] = chunk.out_xflux[out] = 0;
            chunk.out_pixmask[out] = 0;
            for (int d = 0; d < layout.ndiag; ++d)
                chunk.out_resolution[((long long)b * layout.ndiag + d) * ncw + jj] = 0;
            continue;
        }
        const int j = layout.core_wave_offset + jj;
        const int u = j * layout.nslot + slot;
        const double s = row_sums[j];
        double flux = 0;
        for (int k = 0; k < nw; ++k) flux += q[j + (long long)k * nw] * x[k * layout.nslot + slot];
        flux /= s;
        const bool usable = fw[u] > 0;
        chunk.out_flux[out] = usable ? flux : 0.0;
        chunk.out_ivar[out] = usable ? s * s : 0.0;
        chunk.out_xflux[out] = usable ? x[u] : 0.0;
        chunk.out_pixmask[out] = chunk.pixmask[(long long)p * n + u];
        bad = bad || (usable && (!isfinite(flux) || !isfinite(s * s)));
        for (int d = 0; d < layout.ndiag; ++d) {
            const int row = j - nd + d;
            const double r =
                (row >= 0 && row < nw) ? q[row + (long long)j * nw] / row_sums[row] : 0.0;
            chunk.out_resolution[((long long)b * layout.ndiag + d) * ncw + jj] = r;
            bad = bad || !isfinite(r);
        }
    }
    if (c == 0) {
        for (int u = threadIdx.x; u < n; u += blockDim.x) {
            if (u % layout.nslot < patch.nfiber) bad = bad || !isfinite(x[u]);
        }
    }
    // After a failed factorisation x is garbage; the patch is already flagged for that.
    if (bad && chunk.factor_info[p] == 0) atomicOr(chunk.flags + p, kFlagNonFinite);
}

}  // namespace

void launch_frobenius(const DeviceLayout& layout, const ChunkBuffers& chunk, cudaStream_t stream)
{
    EX2D_LAUNCH(frobenius_kernel, unsigned(chunk.npatch * layout.ncore), kThreads, 0, stream)
    (layout, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_scale_eigenvectors(const DeviceLayout& layout, const ChunkBuffers& chunk,
                               cudaStream_t stream)
{
    EX2D_LAUNCH(scale_eigenvectors_kernel, unsigned(chunk.npatch * layout.ncore), kThreads, 0,
                stream)
    (layout, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

void launch_finalize(const DeviceLayout& layout, const ChunkBuffers& chunk, cudaStream_t stream)
{
    const size_t shared_bytes = size_t(layout.nwave) * sizeof(double);
    EX2D_LAUNCH(finalize_kernel, unsigned(chunk.npatch * layout.ncore), kThreads, shared_bytes,
                stream)
    (layout, chunk);
    EX2D_CUDA_CHECK_LAUNCH();
}

}  // namespace ex2d::cuda
