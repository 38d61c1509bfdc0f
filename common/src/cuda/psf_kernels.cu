// SPDX-License-Identifier: BSD-3-Clause
// Spots on the device: one block per (fibre, wavelength). The arithmetic follows the CPU's
// evaluate_spots step by step: Legendre series of every PSF row (the host's
// own code, legendre_series.hpp), pixel integrals of the Gauss-Hermite basis along each axis,
// their outer product weighted by the GH coefficients, clipped at 0 and normalised.

#include "cuda_check.hpp"
#include "ex2d/legendre_series.hpp"
#include "device_helpers.cuh"
#include "ex2d/status.hpp"

namespace ex2d::cuda {

namespace {

constexpr int kSpotThreads = 128;

// Shared-memory plan of one spot block, in doubles.
struct SpotShared {
    int nrow, nx, ny, degx, degy;
    __host__ __device__ int par() const { return 0; }
    __host__ __device__ int edge_x() const { return par() + nrow; }  // [degx + 1][nx + 1]
    __host__ __device__ int edge_y() const
    {
        return edge_x() + (degx + 1) * (nx + 1);
    }  // [degy + 1][ny + 1]
    __host__ __device__ int px() const
    {
        return edge_y() + (degy + 1) * (ny + 1);
    }                                                                            // [degx + 1][nx]
    __host__ __device__ int py() const { return px() + (degx + 1) * nx; }        // [degy + 1][ny]
    __host__ __device__ int row_coef() const { return py() + (degy + 1) * ny; }  // [ny][degx + 1]
    __host__ __device__ int stamp() const { return row_coef() + ny * (degx + 1); }  // [ny][nx]
    __host__ __device__ int scratch() const { return stamp() + ny * nx; }           // [blockDim]
    __host__ __device__ int total() const { return scratch() + kSpotThreads; }
};

// Values at the n + 1 pixel edges of one axis: erf(t / sqrt 2) in row 0 and
// He_k(t) phi(t) in row k + 1, k < degree (the integrands' antiderivatives).
__device__ void edge_values(int i, double center, double sigma, int n, int degree, double* edges)
{
    constexpr double inv_sqrt2 = 0.70710678118654752440;
    constexpr double inv_sqrt_2pi = 0.39894228040143267794;
    const double offset = center - floor(center + 0.5);
    const int half = n / 2;
    const double t = ((i - half - 0.5) - offset) / sigma;
    const double phi = exp(-0.5 * t * t) * inv_sqrt_2pi;
    edges[i] = erf(t * inv_sqrt2);
    double he_prev = 1.0, he = t;
    for (int k = 0; k < degree; ++k) {
        double he_k;
        if (k == 0) {
            he_k = 1.0;
        } else if (k == 1) {
            he_k = t;
        } else {
            const double next = t * he - (k - 1) * he_prev;
            he_prev = he;
            he = next;
            he_k = next;
        }
        edges[(k + 1) * (n + 1) + i] = he_k * phi;
    }
}

// Pixel integral of basis order k over pixel m from the edge values.
__device__ double pixel_integral(const double* edges, int n, int k, int m)
{
    if (k == 0) return 0.5 * (edges[m + 1] - edges[m]);
    const double* row = edges + k * (n + 1);
    return row[m] - row[m + 1];
}

__global__ void spot_kernel(DevicePsf psf, const double* waves, SpotBox box)
{
    extern __shared__ double shared[];
    const int nx = box.nx, ny = box.ny, degx = psf.ghdegx, degy = psf.ghdegy;
    const SpotShared plan{psf.nrow, nx, ny, degx, degy};
    const int f = blockIdx.x / box.nwave, w = blockIdx.x % box.nwave;
    const int fiber = box.fiber_begin + f;
    const double wave = waves[w];
    double* par = shared + plan.par();

    for (int r = threadIdx.x; r < psf.nrow; r += blockDim.x) {
        const double u = detail::reduced_wavelength(wave, psf.wavemin[r], psf.wavemax[r]);
        par[r] = detail::legendre_sum(
            psf.coef + ((long long)r * psf.nfiber + fiber) * psf.max_ncoef, psf.ncoef[r], u);
    }
    __syncthreads();
    const double x = par[kRowX], y = par[kRowY], sigx = par[kRowSigX], sigy = par[kRowSigY];
    for (int i = threadIdx.x; i < (nx + 1) + (ny + 1); i += blockDim.x) {
        if (i <= nx) {
            edge_values(i, x, sigx, nx, degx, shared + plan.edge_x());
        } else {
            edge_values(i - (nx + 1), y, sigy, ny, degy, shared + plan.edge_y());
        }
    }
    __syncthreads();
    const int nint_x = (degx + 1) * nx, nint_y = (degy + 1) * ny;
    for (int i = threadIdx.x; i < nint_x + nint_y; i += blockDim.x) {
        if (i < nint_x) {
            shared[plan.px() + i] = pixel_integral(shared + plan.edge_x(), nx, i / nx, i % nx);
        } else {
            const int j = i - nint_x;
            shared[plan.py() + j] = pixel_integral(shared + plan.edge_y(), ny, j / ny, j % ny);
        }
    }
    __syncthreads();
    // row_coef[iy][i] = sum_j GH-i-j * pGHy_j[iy]
    const int dx = degx + 1, dy = degy + 1;
    for (int k = threadIdx.x; k < ny * dx; k += blockDim.x) {
        const int iy = k / dx, i = k % dx;
        double s = 0;
        for (int j = 0; j < dy; ++j)
            s += par[kRowFirstGh + i * dy + j] * shared[plan.py() + j * ny + iy];
        shared[plan.row_coef() + k] = s;
    }
    __syncthreads();
    double partial = 0;
    for (int k = threadIdx.x; k < ny * nx; k += blockDim.x) {
        const int iy = k / nx, ix = k % nx;
        double v = 0;
        for (int i = 0; i < dx; ++i)
            v += shared[plan.row_coef() + iy * dx + i] * shared[plan.px() + i * nx + ix];
        v = v > 0 ? v : 0.0;
        shared[plan.stamp() + k] = v;
        partial += v;
    }
    const double total = block_sum(partial, shared + plan.scratch());
    const double norm = total > 0 ? 1.0 / total : 0.0;
    double* out = box.values + (long long)blockIdx.x * ny * nx;
    for (int k = threadIdx.x; k < ny * nx; k += blockDim.x)
        out[k] = shared[plan.stamp() + k] * norm;
    if (threadIdx.x == 0) {
        box.xc[blockIdx.x] = int(floor(x - psf.hsizex + 0.5));
        box.yc[blockIdx.x] = int(floor(y - psf.hsizey + 0.5));
    }
}

}  // namespace

void launch_spots(const DevicePsf& psf, const double* box_waves, const SpotBox& box,
                  cudaStream_t stream)
{
    const SpotShared plan{psf.nrow, box.nx, box.ny, psf.ghdegx, psf.ghdegy};
    const size_t shared_bytes = size_t(plan.total()) * sizeof(double);
    allow_dynamic_shared(spot_kernel, shared_bytes, "spot");
    const long long nspot = (long long)box.nfiber * box.nwave;
    if (nspot == 0) return;
    EX2D_LAUNCH(spot_kernel, unsigned(nspot), kSpotThreads, shared_bytes, stream)
    (psf, box_waves, box);
    EX2D_CUDA_CHECK_LAUNCH();
}

}  // namespace ex2d::cuda
