// SPDX-License-Identifier: BSD-3-Clause
// The CUDA backend's kernels one at a time against dense references written from the
// definitions (kernel_fixture.hpp): y = A^T W p, A^T w and the masked fraction, iCov = A^T W A
// and its regularisation, the windows' chi2 and chi2pix, and the decorrelation R = S^-1 Q with
// Q = C^-1/2 (B&S eqs. 4, 10-16). Runs on a device or in the CUDA emulation.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "cuda_resources.hpp"
#include "device_frame.hpp"
#include "ex2d/extraction_backend.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "kernel_fixture.hpp"
#include "reference_lapack.hpp"

namespace ex2d::cuda::test {
namespace {

#define EX2D_REQUIRE_CUDA_DEVICE()                                               \
    if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) { \
        GTEST_SKIP() << "no usable CUDA device (" << reason << "): skipped";     \
    }

constexpr double kTolerance = 1e-12;

void expect_close(const std::vector<double>& expected, const std::vector<double>& actual,
                  const char* what)
{
    ASSERT_EQ(expected.size(), actual.size()) << what;
    double scale = 0;
    for (double v : expected) scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < expected.size(); ++k) {
        ASSERT_NEAR(expected[k], actual[k], kTolerance * std::max(scale, 1.0))
            << what << " [" << k << "]";
    }
}

TEST(CudaKernels, GatherIcovAndRegularizeMatchTheDenseProjection)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const TinyProblem t(11);
    DeviceProblem d(t);
    const int n = t.n();
    launch_gather(t.layout, d.device_image, d.box, d.chunk, nullptr);
    launch_icov(t.layout, d.device_image, d.box, d.chunk, nullptr);
    const std::vector<double> icov_device = d.icov.read();
    const double regularize = 0.25;
    launch_regularize(t.layout, d.chunk, regularize, nullptr);

    std::vector<double> rhs, fw, pixmask, icov, regularized, x;
    for (int p = 0; p < int(t.patches.size()); ++p) {
        const std::vector<double> a = t.projection(p);
        const int npix = t.window_rows(p) * t.window_cols(p);
        std::vector<double> y(n, 0.0), f(n, 0.0), on_data(n, 0.0), c(std::size_t(n) * n, 0.0);
        for (int k = 0; k < npix; ++k) {
            const std::size_t pix = t.image_pixel(p, k);
            const double w = t.weights[pix], value = t.pixels[pix];
            for (int u = 0; u < n; ++u) {
                const double au = a[std::size_t(k) * n + u];
                y[u] += au * w * value;
                f[u] += au * w;
                if (w > 0) on_data[u] += au;
                for (int v = 0; v < n; ++v) c[u + std::size_t(v) * n] += au * w * a[k * n + v];
            }
        }
        double max_fw = 0;
        for (int u = 0; u < n; ++u) {
            if (u % t.layout.nslot < t.patches[p].nfiber) max_fw = std::max(max_fw, f[u]);
        }
        const double min_weight = SolverConstants::min_weight_frac * max_fw;
        std::vector<double> reg = c;
        for (int u = 0; u < n; ++u) {
            rhs.push_back(y[u]);
            fw.push_back(f[u]);
            pixmask.push_back(f[u] > 0 ? std::max(0.0, 1.0 - on_data[u]) : 1.0);
            double& diag = reg[u + std::size_t(u) * n];
            if (u % t.layout.nslot >= t.patches[p].nfiber) {
                diag = 1.0;
            } else {
                const double alpha = f[u] < min_weight ? min_weight - f[u] : regularize;
                diag += alpha * alpha + SolverConstants::diag_floor;
            }
        }
        icov.insert(icov.end(), c.begin(), c.end());
        regularized.insert(regularized.end(), reg.begin(), reg.end());
        x.insert(x.end(), y.begin(), y.end());
    }
    expect_close(rhs, d.rhs.read(), "y = A^T W p");
    expect_close(fw, d.fluxweight.read(), "A^T w");
    expect_close(pixmask, d.pixmask.read(), "pixmask fraction");
    expect_close(icov, icov_device, "iCov = A^T W A");
    expect_close(regularized, d.icov.read(), "regularised iCov");
    expect_close(x, d.x.read(), "x = y before the solve");
}

TEST(CudaKernels, WindowChi2AndChi2pixMatchTheDenseModel)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const TinyProblem t(12);
    const int n = t.n();
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> flux(-20.0, 300.0);
    std::vector<double> x(t.patches.size() * n);
    for (double& v : x) v = flux(rng);
    DeviceProblem d(t);
    Buffer<double> device_x(x, d.ledger);
    d.chunk.x = device_x.data();
    const double psferr = 0.05;
    int max_rows = 0;
    for (int p = 0; p < int(t.patches.size()); ++p) max_rows = std::max(max_rows, t.window_rows(p));
    launch_window_chi2(t.layout, d.device_image, d.box, d.chunk, psferr, max_rows, nullptr);
    launch_chi2pix(t.layout, d.box, d.chunk, nullptr);

    std::vector<double> chi2, weight, chi2pix;
    for (int p = 0; p < int(t.patches.size()); ++p) {
        const std::vector<double> a = t.projection(p);
        const int npix = t.window_rows(p) * t.window_cols(p);
        std::vector<double> pixel_chi2(npix), pixel_weight(npix);
        for (int k = 0; k < npix; ++k) {
            double model = 0;
            for (int u = 0; u < n; ++u) model += a[std::size_t(k) * n + u] * x[p * n + u];
            const std::size_t pix = t.image_pixel(p, k);
            const double ivar = t.weights[pix];
            double c = 0, w = 0;
            if (ivar > 0) {
                const double sigma = psferr * model + 1e-32;
                const double v = 1.0 / (1.0 / ivar + sigma * sigma);
                c = (t.pixels[pix] - model) * (t.pixels[pix] - model) * v;
                w = 1.0;
            }
            pixel_chi2[k] = c;
            pixel_weight[k] = w;
        }
        chi2.insert(chi2.end(), pixel_chi2.begin(), pixel_chi2.end());
        weight.insert(weight.end(), pixel_weight.begin(), pixel_weight.end());
        for (int c = 0; c < t.layout.ncore; ++c) {
            for (int jj = 0; jj < t.layout.ncore_wave; ++jj) {
                if (jj >= t.patches[p].ncore_wave) {
                    chi2pix.push_back(0.0);
                    continue;
                }
                const int u =
                    (t.layout.core_wave_offset + jj) * t.layout.nslot + t.patches[p].core_slot + c;
                double num = 0, den = 0;
                for (int k = 0; k < npix; ++k) {
                    num += a[std::size_t(k) * n + u] * pixel_chi2[k];
                    den += a[std::size_t(k) * n + u] * pixel_weight[k];
                }
                chi2pix.push_back(den > 0 ? num / den : 0.0);
            }
        }
    }
    std::vector<double> window = d.window.read();
    const std::vector<double> window_chi2(window.begin(), window.begin() + t.window_pixels());
    const std::vector<double> window_weight(window.begin() + t.window_pixels(), window.end());
    expect_close(chi2, window_chi2, "window chi2");
    expect_close(weight, window_weight, "window weight");
    const std::vector<double> outputs = d.outputs.read();
    const std::size_t kept = DeviceProblem::kept(t);
    expect_close(chi2pix, {outputs.begin() + 3 * kept, outputs.begin() + 4 * kept}, "chi2pix");
}

// Random symmetric positive definite blocks through the decorrelation kernels, the
// eigen-decomposition between them done here by LAPACK as cuSOLVER would; patch 1's block
// reports a failed decomposition and must be flagged, not used.
TEST(CudaKernels, DecorrelationGivesRFluxIvarAndResolutionOfTheInverseSquareRoot)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const TinyProblem t(13);
    const int n = t.n(), nw = t.layout.nwave, nslot = t.layout.nslot;
    const int nd = t.layout.ndiag / 2, ncw = t.layout.ncore_wave;
    const std::size_t nblock = DeviceProblem::nblock(t);
    std::mt19937_64 rng(17);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::vector<double> c(nblock * nw * nw), x(t.patches.size() * n), fw(x.size()), pm(x.size());
    for (std::size_t b = 0; b < nblock; ++b) {
        std::vector<double> m(nw * nw);
        for (double& v : m) v = unit(rng);
        for (int i = 0; i < nw; ++i) {
            for (int j = 0; j < nw; ++j) {
                double s = i == j ? nw : 0.0;
                for (int k = 0; k < nw; ++k) s += m[i + k * nw] * m[j + k * nw];
                c[b * nw * nw + i + j * nw] = s;
            }
        }
    }
    for (std::size_t k = 0; k < x.size(); ++k) {
        x[k] = 100 * unit(rng);
        fw[k] = k == 4 ? 0.0 : 1 + unit(rng);
        pm[k] = 0.5 + 0.5 * unit(rng);
    }
    DeviceProblem d(t);
    Buffer<double> cblock(c, d.ledger), dx(x, d.ledger), dfw(fw, d.ledger), dpm(pm, d.ledger);
    Buffer<int> eig_info(std::vector<int>{0, 3}, d.ledger);
    d.chunk.cblock = cblock.data();
    d.chunk.x = dx.data();
    d.chunk.fluxweight = dfw.data();
    d.chunk.pixmask = dpm.data();
    d.chunk.eig_info = eig_info.data();
    launch_frobenius(t.layout, d.chunk, nullptr);
    const std::vector<double> frob2 = d.frob2.read();

    // Eigenvectors (columns) and ascending eigenvalues, as cuSOLVER returns them.
    std::vector<double> vectors = c, values(nblock * nw);
    std::vector<double> q_expected(nblock * nw * nw, 0.0);
    for (std::size_t b = 0; b < nblock; ++b) {
        double f2 = 0;
        for (int k = 0; k < nw * nw; ++k) f2 += c[b * nw * nw + k] * c[b * nw * nw + k];
        EXPECT_NEAR(frob2[b], f2, kTolerance * f2);
        ASSERT_EQ(
            lapack::dsyev('V', 'L', nw, vectors.data() + b * nw * nw, nw, values.data() + b * nw),
            0);
        const double clip = SolverConstants::eig_clip * values[b * nw + nw - 1];
        for (int i = 0; i < nw; ++i) {
            for (int j = 0; j < nw; ++j) {
                double s = 0;
                for (int k = 0; k < nw; ++k) {
                    s += vectors[b * nw * nw + i + k * nw] * vectors[b * nw * nw + j + k * nw] /
                         std::sqrt(std::max(values[b * nw + k], clip));
                }
                q_expected[b * nw * nw + i + j * nw] = s;
            }
        }
    }
    Buffer<double> eigvec(vectors, d.ledger), eigval(values, d.ledger);
    d.chunk.cblock = eigvec.data();
    d.chunk.eigval = eigval.data();
    launch_scale_eigenvectors(t.layout, d.chunk, nullptr);
    const std::vector<double> scaled = eigvec.read();
    // Q = B B^T from the scaled vectors of block 0 (block 1 is left alone: flagged).
    std::vector<double> q(nblock * nw * nw, 0.0);
    for (int i = 0; i < nw; ++i) {
        for (int j = 0; j < nw; ++j) {
            double s = 0;
            for (int k = 0; k < nw; ++k) s += scaled[i + k * nw] * scaled[j + k * nw];
            q[i + j * nw] = s;
        }
    }
    expect_close({q_expected.begin(), q_expected.begin() + nw * nw},
                 {q.begin(), q.begin() + nw * nw}, "Q = C^-1/2");
    const std::vector<int> flags = d.flags.read();
    EXPECT_EQ(flags[0], 0);
    EXPECT_EQ(flags[1], kFlagEigen);

    Buffer<double> qblock(q_expected, d.ledger);
    d.chunk.qblock = qblock.data();
    launch_finalize(t.layout, d.chunk, nullptr);
    const std::vector<double> out = d.outputs.read();
    const std::size_t kept = DeviceProblem::kept(t);
    for (std::size_t b = 0; b < nblock; ++b) {
        const int p = int(b) / t.layout.ncore,
                  slot = t.patches[p].core_slot + int(b) % t.layout.ncore;
        const double* qb = q_expected.data() + b * nw * nw;
        std::vector<double> s(nw, 0.0);
        for (int i = 0; i < nw; ++i) {
            for (int j = 0; j < nw; ++j) s[i] += qb[i + j * nw];
        }
        for (int jj = 0; jj < ncw; ++jj) {
            const std::size_t k = b * ncw + jj;
            if (jj >= t.patches[p].ncore_wave) {
                EXPECT_EQ(out[k], 0.0);
                continue;
            }
            const int j = t.layout.core_wave_offset + jj, u = j * nslot + slot;
            const bool usable = fw[p * n + u] > 0;
            double flux = 0;
            for (int i = 0; i < nw; ++i) flux += qb[j + i * nw] * x[p * n + i * nslot + slot];
            EXPECT_NEAR(out[k], usable ? flux / s[j] : 0.0, kTolerance * 1e3) << "flux " << k;
            EXPECT_NEAR(out[kept + k], usable ? s[j] * s[j] : 0.0, kTolerance * s[j] * s[j])
                << "ivar " << k;
            EXPECT_EQ(out[2 * kept + k], usable ? x[p * n + u] : 0.0) << "xflux " << k;
            EXPECT_EQ(out[4 * kept + k], pm[p * n + u]) << "pixmask " << k;
            for (int dd = 0; dd < t.layout.ndiag; ++dd) {
                const int row = j - nd + dd;
                const double r = row >= 0 && row < nw ? qb[row + j * nw] / s[row] : 0.0;
                EXPECT_NEAR(out[5 * kept + (b * t.layout.ndiag + dd) * ncw + jj], r, kTolerance)
                    << "resolution " << k << " diagonal " << dd;
            }
        }
    }
}

// A block whose patch failed its factorisation, or whose norm is not finite, reaches the
// eigen-solver as the identity; the second case is flagged here, the first already was.
TEST(CudaKernels, FailedBlocksReachTheEigenSolverAsTheIdentity)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const TinyProblem t(14);
    const int nw = t.layout.nwave;
    std::vector<double> c(DeviceProblem::nblock(t) * nw * nw, 2.0);
    c[nw * nw + 3] = NAN;
    DeviceProblem d(t);
    Buffer<double> cblock(c, d.ledger);
    // Patch 0 failed its factorisation: cuSOLVER's info, which the kernel reads, and the flag
    // that launch_mark_factor_failures set from it.
    Buffer<int> factor_info(std::vector<int>{2, 0}, d.ledger);
    Buffer<int> flags(std::vector<int>{kFlagFactor, 0}, d.ledger);
    d.chunk.cblock = cblock.data();
    d.chunk.factor_info = factor_info.data();
    d.chunk.flags = flags.data();
    launch_frobenius(t.layout, d.chunk, nullptr);
    const std::vector<double> blocks = cblock.read();
    for (int b = 0; b < 2; ++b) {
        for (int k = 0; k < nw * nw; ++k)
            EXPECT_EQ(blocks[b * nw * nw + k], k % (nw + 1) == 0 ? 1.0 : 0.0) << b << " " << k;
    }
    EXPECT_EQ(d.frob2.read(), std::vector<double>(2, double(nw)));
    EXPECT_EQ(flags.read(), (std::vector<int>{kFlagFactor, kFlagNonFinite}));
}

TEST(CudaKernels, UnitColumnsAndFactorFailuresAreMarkedPerPatch)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const TinyProblem t(15);
    DeviceProblem d(t);
    Buffer<int> factor_info(std::vector<int>{0, 2}, d.ledger);
    d.chunk.factor_info = factor_info.data();
    launch_unit_columns(t.layout, d.chunk, nullptr);
    launch_mark_factor_failures(d.chunk, nullptr);
    const std::vector<double> z = d.z.read();
    const int n = t.n(), ncol = t.layout.ncore * t.layout.nwave;
    for (int p = 0; p < 2; ++p) {
        for (int col = 0; col < ncol; ++col) {
            const int cf = col / t.layout.nwave, w = col % t.layout.nwave;
            const int u = w * t.layout.nslot + t.patches[p].core_slot + cf;
            for (int r = 0; r < n; ++r) {
                EXPECT_EQ(z[(std::size_t(p) * ncol + col) * n + r], r == u ? 1.0 : 0.0);
            }
        }
    }
    EXPECT_EQ(d.flags.read(), (std::vector<int>{0, kFlagFactor}));
}

// The model image's bounds and the sum of spots times xflux, against the stamps summed here;
// a fibre whose stamp rows go back up is reported, so that the model is made on the host.
TEST(CudaKernels, ModelImageIsTheSumOfTheBoxSpotsAndUnorderedRowsAreReported)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    TinyProblem t(16);
    std::vector<double> xflux(t.box_nfiber * t.box_nwave);
    for (std::size_t k = 0; k < xflux.size(); ++k) xflux[k] = k % 5 == 2 ? 0.0 : 10.0 + k;
    DeviceProblem d(t);
    Buffer<int> bounds(3, 0, d.ledger);
    launch_model_bounds(d.box, bounds.data(), nullptr);
    const int min_col = *std::min_element(t.xc.begin(), t.xc.end());
    const int max_col = *std::max_element(t.xc.begin(), t.xc.end()) + t.stamp_nx;
    EXPECT_EQ(bounds.read(), (std::vector<int>{min_col, max_col, 0}));

    Buffer<double> dx(xflux, d.ledger);
    Buffer<double> model(std::size_t(t.image_ny) * t.image_nx, 1.0, d.ledger);
    launch_model_image(d.box, dx.data(), model.data(), t.image_ny, t.image_nx, min_col, max_col,
                       nullptr);
    std::vector<double> expected(std::size_t(t.image_ny) * t.image_nx, 1.0);
    for (int f = 0; f < t.box_nfiber; ++f) {
        for (int w = 0; w < t.box_nwave; ++w) {
            const int s = f * t.box_nwave + w;
            for (int iy = 0; iy < t.stamp_ny; ++iy) {
                for (int ix = 0; ix < t.stamp_nx; ++ix) {
                    expected[std::size_t(t.yc[s] + iy) * t.image_nx + t.xc[s] + ix] +=
                        t.stamps[std::size_t(s) * t.stamp_ny * t.stamp_nx + iy * t.stamp_nx + ix] *
                        xflux[s];
                }
            }
        }
    }
    expect_close(expected, model.read(), "model image");

    t.yc[t.box_nwave + 3] = t.yc[t.box_nwave + 2] - 1;
    DeviceProblem unordered(t);
    Buffer<int> unordered_bounds(3, 0, unordered.ledger);
    launch_model_bounds(unordered.box, unordered_bounds.data(), nullptr);
    EXPECT_EQ(unordered_bounds.read()[2], 1);
}

// The spot kernel against the host's evaluation of the same PSF (psf.cpp): stamps and corners
// of fibres across a bundle's edge at wavelengths across the r grid, through DeviceFrame.
TEST(CudaKernels, SpotsMatchTheHostEvaluationOfThePsf)
{
    EX2D_REQUIRE_CUDA_DEVICE();
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const std::vector<double> waves = {5800.0, 6300.5, 7000.25, 7600.0};
    const int fiber_begin = 23, nfiber = 4, nwave = int(waves.size());
    const SpotGrid host = evaluate_spots(psf, fiber_begin, nfiber, waves);
    CudaResources res(0);
    MemoryLedger ledger;
    DeviceFrame frame(res, ledger);
    std::vector<double> pixels(16, 0.0), weights(16, 1.0);
    frame.upload(ImageView{4, 4, pixels.data(), weights.data()}, psf, waves);
    const int ny = 2 * psf.hsizey + 1, nx = 2 * psf.hsizex + 1;
    ASSERT_EQ(ny, host.ny);
    ASSERT_EQ(nx, host.nx);
    Buffer<double> values(std::size_t(nfiber) * nwave * ny * nx, 0.0, ledger);
    Buffer<int> corners(2 * std::size_t(nfiber) * nwave, 0, ledger);
    const SpotBox box{values.data(),
                      corners.data(),
                      corners.data() + nfiber * nwave,
                      fiber_begin,
                      nfiber,
                      nwave,
                      ny,
                      nx};
    launch_spots(frame.psf(), frame.padded_wave(), box, res.stream());
    EX2D_CUDA_CHECK(cudaStreamSynchronize(res.stream()));
    const std::vector<double> device = values.read();
    const std::vector<int> device_corners = corners.read();
    for (int f = 0; f < nfiber; ++f) {
        for (int w = 0; w < nwave; ++w) {
            EXPECT_EQ(device_corners[f * nwave + w], host.corner_x(f, w)) << f << " " << w;
            EXPECT_EQ(device_corners[nfiber * nwave + f * nwave + w], host.corner_y(f, w));
            const double* stamp = host.stamp(f, w);
            for (int k = 0; k < ny * nx; ++k) {
                ASSERT_NEAR(device[(std::size_t(f) * nwave + w) * ny * nx + k], stamp[k], 1e-13)
                    << "fibre " << f << " wavelength " << w << " pixel " << k;
            }
        }
    }
}

}  // namespace
}  // namespace ex2d::cuda::test
