// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Device-side views and the launchers of the CUDA backend's own kernels. Plain structs of
// device pointers, so the host orchestration (cuda_backend.cpp) compiles with the host
// compiler; kernels live in the .cu files beside this header.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace ex2d::cuda {

/// PSF rows as Legendre tables on the device: row 0 X, 1 Y, 2 GHSIGX, 3 GHSIGY, then GH-i-j
/// at 4 + i * (ghdegy + 1) + j.
struct DevicePsf {
    const double* coef = nullptr;     ///< [nrow][nfiber][max_ncoef]
    const int* ncoef = nullptr;       ///< [nrow]
    const double* wavemin = nullptr;  ///< [nrow]
    const double* wavemax = nullptr;  ///< [nrow]
    int nrow = 0;
    int nfiber = 0;
    int max_ncoef = 0;
    int hsizex = 0;
    int hsizey = 0;
    int ghdegx = 0;
    int ghdegy = 0;
};
constexpr int kRowX = 0, kRowY = 1, kRowSigX = 2, kRowSigY = 3, kRowFirstGh = 4;

/// Spots of a chunk: fibres [fiber_begin, fiber_begin + nfiber) of the PSF on `nwave`
/// consecutive wavelengths of the padded grid.
struct SpotBox {
    double* values = nullptr;  ///< [nfiber][nwave][ny * nx]
    int* xc = nullptr;         ///< [nfiber][nwave] CCD column of stamp pixel [., 0]
    int* yc = nullptr;         ///< [nfiber][nwave] CCD row of stamp pixel [0, .]
    int fiber_begin = 0;
    int nfiber = 0;
    int nwave = 0;
    int ny = 0;
    int nx = 0;
};

/// The frame's pixels on the device (float32 on the wire and in memory).
struct DeviceImage {
    const float* pixels = nullptr;
    const float* weights = nullptr;  ///< 0 at masked pixels
    int ny = 0;
    int nx = 0;
};

/// The shape every patch is padded to (ex2d::PaddedLayout).
struct DeviceLayout {
    int nslot = 0;
    int nwave = 0;
    int ncore = 0;
    int core_wave_offset = 0;
    int ncore_wave = 0;
    int ndiag = 0;
    __host__ __device__ int nunknown() const { return nslot * nwave; }
};

/// One patch of a chunk, relative to the chunk's spot box.
struct DevicePatch {
    int spot_fiber = 0;  ///< box fibre of slot 0
    int spot_wave = 0;   ///< box wavelength of padded wavelength 0
    int nfiber = 0;      ///< real slots; slots >= nfiber are dummies
    int core_slot = 0;   ///< slot of the first kept fibre
    int ncore_wave = 0;  ///< kept wavelengths of this patch (<= layout.ncore_wave)
    int row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
    long long window_offset = 0;  ///< first pixel of its window in the window buffers
};

/// Per-patch failure bits, OR-ed on the device and read back once per chunk.
constexpr int kFlagFactor = 1;     ///< Cholesky factorisation failed (iCov not positive definite)
constexpr int kFlagEigen = 2;      ///< eigen-decomposition failed or had no positive eigenvalue
constexpr int kFlagNonFinite = 4;  ///< non-finite xflux, flux, ivar or resolution

/// The chunk's working buffers, patch p at slot p (b = p * ncore + c for per-fibre blocks).
struct ChunkBuffers {
    int npatch = 0;
    const DevicePatch* patches = nullptr;
    double* icov = nullptr;        ///< [P][n][n] column-major; the Cholesky factor in place
    double* z = nullptr;           ///< [P][ncore * nwave][n] column-major, L^-1 E
    double* cblock = nullptr;      ///< [P * ncore][nwave][nwave]: C_ss, then eigenvectors
    double* qblock = nullptr;      ///< [P * ncore][nwave][nwave]: C_ss^-1/2
    double* eigval = nullptr;      ///< [P * ncore][nwave]
    double* frob2 = nullptr;       ///< [P * ncore] squared Frobenius norm of C_ss
    int* eig_info = nullptr;       ///< [P * ncore]
    int* factor_info = nullptr;    ///< [P]
    int* flags = nullptr;          ///< [P]
    double* rhs = nullptr;         ///< [P][n] y = A^T W p
    double* x = nullptr;           ///< [P][n] deconvolved flux
    double* fluxweight = nullptr;  ///< [P][n]
    double* pixmask = nullptr;     ///< [P][n]
    double* out_flux = nullptr;    ///< [P][ncore][ncore_wave], likewise the four below
    double* out_ivar = nullptr;
    double* out_xflux = nullptr;
    double* out_chi2pix = nullptr;
    double* out_pixmask = nullptr;
    double* out_resolution = nullptr;  ///< [P][ncore][ndiag][ncore_wave]
    double* window_chi2 = nullptr;     ///< per window pixel
    double* window_weight = nullptr;
};

/// Spots of every (fibre, wavelength) of `box` (B&S eq. 1 ingredients).
void launch_spots(const DevicePsf& psf, const double* box_waves, const SpotBox& box,
                  cudaStream_t stream);
/// y = A^T W p, fluxweight = A^T w and pixmask_fraction per unknown (B&S eq. 4).
void launch_gather(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                   const ChunkBuffers& chunk, cudaStream_t stream);
/// iCov = A^T W A from overlapping spot pairs, both triangles; icov must be zeroed first.
void launch_icov(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                 const ChunkBuffers& chunk, cudaStream_t stream);
/// Adds alpha^2 + 1e-15 to the diagonal (alpha from minweight or `regularize`), puts 1 on
/// the diagonal of dummy slots, and copies y into x for the solve.
void launch_regularize(const DeviceLayout& layout, const ChunkBuffers& chunk, double regularize,
                       cudaStream_t stream);
/// Unit columns E for the kept fibres into z (z must be zeroed first).
void launch_unit_columns(const DeviceLayout& layout, const ChunkBuffers& chunk,
                         cudaStream_t stream);
/// Sets kFlagFactor where the batched Cholesky reported a non-zero info.
void launch_mark_factor_failures(const ChunkBuffers& chunk, cudaStream_t stream);
/// Squared Frobenius norms of the C blocks (a check on the eigenvalues); blocks of patches
/// already failed become the identity so the eigen-solver never sees garbage.
void launch_frobenius(const DeviceLayout& layout, const ChunkBuffers& chunk, cudaStream_t stream);
/// Checks the eigen-decomposition and scales eigenvectors by max(w, 1e-14 max w)^-1/4, so
/// that Q = B B^T is C_ss^-1/2 (B&S eqs. 10-14).
void launch_scale_eigenvectors(const DeviceLayout& layout, const ChunkBuffers& chunk,
                               cudaStream_t stream);
/// Row sums of Q, then flux = R f, ivar = s^2 and the resolution diagonals (B&S eqs. 13-16)
/// of the kept block, with the finiteness check.
void launch_finalize(const DeviceLayout& layout, const ChunkBuffers& chunk, cudaStream_t stream);
/// Model A . xflux over each window and the per-pixel chi2 with the psferr term.
void launch_window_chi2(const DeviceLayout& layout, const DeviceImage& image, const SpotBox& box,
                        const ChunkBuffers& chunk, double psferr, int max_window_rows,
                        cudaStream_t stream);
/// chi2pix of each kept bin: spot-weighted mean of the window chi2.
void launch_chi2pix(const DeviceLayout& layout, const SpotBox& box, const ChunkBuffers& chunk,
                    cudaStream_t stream);

/// Column range of `box`'s stamps and whether every fibre's stamp rows are non-decreasing in
/// wavelength: out[0] = min column, out[1] = max column + 1, out[2] = 1 if not monotonic.
void launch_model_bounds(const SpotBox& box, int* out, cudaStream_t stream);
/// Adds A . xflux of `box`'s spots to the model over columns [col_begin, col_end) of every
/// row; xflux[f * box.nwave + w] is the flux of box fibre f at wavelength w. Each pixel is
/// one thread adding its spots in (fibre, wavelength) order, so the sum order is the host's.
void launch_model_image(const SpotBox& box, const double* xflux, double* model, int ny, int nx,
                        int col_begin, int col_end, cudaStream_t stream);

}  // namespace ex2d::cuda
