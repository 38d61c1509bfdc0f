// SPDX-License-Identifier: BSD-3-Clause
// The banded CPU solve against the textbook dense computation of B&S 2010 on one patch:
// A dense (pixels x unknowns), iCov = A^T W A (eq. 4), C = iCov^-1 by full inversion,
// Q = blockdiag(C_ss^-1/2) by eigen-decomposition, R = Q / rowsum, flux = R f, ivar = rowsum^2.
// Measured agreement is ~1e-12 relative; the assertions allow 1e-10.
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "reference_lapack.hpp"
#include "tiny_psf.hpp"

namespace ex2d {
namespace {

struct DenseResult {
    std::vector<double> flux, ivar, xflux;  // [ncore_fiber][ncore_wave]
    std::vector<double> rdiag;              // [ncore_fiber][ndiag][ncore_wave]
};

DenseResult dense_patch(const PatchGeometry& p, const GaussHermitePsf& psf,
                        const std::vector<double>& padded, const ImageView& image)
{
    const int nf = p.nfiber(), nw = p.nwave, m = nf * nw;
    const std::vector<double> waves(padded.begin() + p.wave_begin,
                                    padded.begin() + p.wave_begin + nw);
    const SpotGrid spots = evaluate_spots(psf, p.fiber_begin, nf, waves, 1);
    const int rows = p.row_end - p.row_begin, cols = p.col_end - p.col_begin, npix = rows * cols;
    // unknown order here is fibre-major (s * nw + w), unlike the solver's, on purpose
    std::vector<double> a(size_t(npix) * m, 0.0);
    for (int f = 0; f < nf; ++f) {
        for (int w = 0; w < nw; ++w) {
            const double* s = spots.stamp(f, w);
            for (int iy = 0; iy < spots.ny; ++iy) {
                const int r = spots.corner_y(f, w) + iy - p.row_begin;
                if (r < 0 || r >= rows) continue;
                for (int ix = 0; ix < spots.nx; ++ix) {
                    const int c = spots.corner_x(f, w) + ix - p.col_begin;
                    if (c < 0 || c >= cols) continue;
                    a[size_t(r * cols + c) * m + f * nw + w] = s[iy * spots.nx + ix];
                }
            }
        }
    }
    std::vector<double> wa(a), pix(npix), icov(size_t(m) * m), y(m, 0.0), fw(m, 0.0);
    for (int k = 0; k < npix; ++k) {
        const size_t g = size_t(k / cols + p.row_begin) * image.nx + k % cols + p.col_begin;
        pix[k] = image.pixels[g];
        for (int u = 0; u < m; ++u) wa[size_t(k) * m + u] *= image.weights[g];
    }
    // LAPACK is column-major: the row-major npix x m arrays A and WA are m x npix there, so
    // iCov = WA^T A (row-major) is A_cm WA_cm^T and y = WA^T pix is WA_cm pix.
    lapack::dgemm('N', 'T', m, m, npix, 1.0, a.data(), m, wa.data(), m, 0.0, icov.data(), m);
    lapack::dgemv('N', m, npix, 1.0, wa.data(), m, pix.data(), 0.0, y.data());
    for (int k = 0; k < npix; ++k) {
        for (int u = 0; u < m; ++u) fw[u] += wa[size_t(k) * m + u];
    }
    double max_fw = 0;
    for (double v : fw) max_fw = std::max(max_fw, v);
    for (int u = 0; u < m; ++u) {
        const double alpha = fw[u] < 1e-4 * max_fw ? 1e-4 * max_fw - fw[u] : 0.0;
        icov[size_t(u) * m + u] += alpha * alpha + 1e-15;
    }
    std::vector<double> cov(icov);
    // The row-major upper triangle is the column-major lower one.
    EXPECT_EQ(lapack::dpotrf('L', m, cov.data(), m), 0);
    EXPECT_EQ(lapack::dpotri('L', m, cov.data(), m), 0);
    for (int i = 0; i < m; ++i) {
        for (int j = 0; j < i; ++j) cov[size_t(i) * m + j] = cov[size_t(j) * m + i];
    }
    std::vector<double> f(m);
    lapack::dgemv('T', m, m, 1.0, cov.data(), m, y.data(), 0.0, f.data());

    DenseResult out;
    const int ncf = p.ncore_fiber(), ncw = p.ncore_wave, nd = psf.hsizey, ndiag = 2 * nd + 1;
    out.flux.resize(size_t(ncf) * ncw);
    out.ivar.resize(out.flux.size());
    out.xflux.resize(out.flux.size());
    out.rdiag.resize(out.flux.size() * ndiag);
    for (int cf = 0; cf < ncf; ++cf) {
        const int s = p.core_fiber_begin + cf - p.fiber_begin;
        std::vector<double> block(size_t(nw) * nw), eig(nw), q(size_t(nw) * nw, 0.0), norm(nw, 0.0);
        for (int i = 0; i < nw; ++i) {
            for (int j = 0; j < nw; ++j)
                block[size_t(i) * nw + j] = cov[size_t(s * nw + i) * m + s * nw + j];
        }
        // Column-major: eigenvector k is row k of the row-major block; transposed below so
        // that block[i * nw + k] is its component i.
        EXPECT_EQ(lapack::dsyev('V', 'L', nw, block.data(), nw, eig.data()), 0);
        for (int i = 0; i < nw; ++i) {
            for (int k = 0; k < i; ++k)
                std::swap(block[size_t(i) * nw + k], block[size_t(k) * nw + i]);
        }
        const double floor_eig = 1e-14 * eig[nw - 1];
        for (int i = 0; i < nw; ++i) {
            for (int j = 0; j < nw; ++j) {
                double sum = 0;
                for (int k = 0; k < nw; ++k) {
                    sum += block[size_t(i) * nw + k] * block[size_t(j) * nw + k] /
                           std::sqrt(std::max(eig[k], floor_eig));
                }
                q[size_t(i) * nw + j] = sum;
                norm[i] += sum;
            }
        }
        for (int jj = 0; jj < ncw; ++jj) {
            const int j = p.core_wave_offset + jj;
            double flux = 0;
            for (int k = 0; k < nw; ++k) flux += q[size_t(j) * nw + k] / norm[j] * f[s * nw + k];
            out.flux[size_t(cf) * ncw + jj] = flux;
            out.ivar[size_t(cf) * ncw + jj] = norm[j] * norm[j];
            out.xflux[size_t(cf) * ncw + jj] = f[s * nw + j];
            for (int d = 0; d < ndiag; ++d) {
                const int row = j - nd + d;
                out.rdiag[(size_t(cf) * ndiag + d) * ncw + jj] =
                    q[size_t(row) * nw + j] / norm[row];
            }
        }
    }
    return out;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b, double scale_floor)
{
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), scale_floor));
    }
    return worst;
}

TEST(DenseReference, BandedSolveMatchesDenseBoltonSchlegel)
{
    const GaussHermitePsf psf = test::tiny_psf(25, 270, 940);
    ExtractionOptions opt;
    opt.wmin = 5000;
    opt.wmax = 5300;
    opt.nspec = 25;
    const test::ForwardModel fm = test::forward_model(psf, wavelength_grid(4960, 5340, 0.8), 21);
    const ImageView image{psf.npix_y, psf.npix_x, fm.image.data(), fm.ivar.data()};
    const WaveGrids grids = make_wave_grids(psf, opt);
    std::vector<PatchGeometry> patches = plan_patches(psf, opt, grids, psf.npix_y, psf.npix_x);
    // an interior patch with two neighbours (7 fibres) and an edge one (6 fibres)
    for (const size_t index : {size_t(2 * 8 + 3), size_t(0 * 8 + 7)}) {
        PatchBatch batch;
        batch.psf = &psf;
        batch.image = image;
        batch.padded_wave = &grids.padded;
        batch.patches = {patches[index]};
        std::vector<PatchResult> results;
        StageTimes times;
        make_cpu_backend(1)->extract(batch, results, times);
        ASSERT_EQ(results[0].status, PatchStatus::ok);
        const DenseResult ref = dense_patch(patches[index], psf, grids.padded, image);
        EXPECT_LT(max_rel_diff(results[0].xflux, ref.xflux, 1.0), 1e-10) << "patch " << index;
        EXPECT_LT(max_rel_diff(results[0].flux, ref.flux, 1.0), 1e-10) << "patch " << index;
        EXPECT_LT(max_rel_diff(results[0].ivar, ref.ivar, 1e-12), 1e-10) << "patch " << index;
        EXPECT_LT(max_rel_diff(results[0].resolution, ref.rdiag, 1e-3), 1e-10) << "patch " << index;
    }
}

}  // namespace
}  // namespace ex2d
