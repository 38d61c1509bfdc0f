// SPDX-License-Identifier: BSD-3-Clause
// Extraction of a small forward-modelled frame on an in-memory PSF: pulls, determinism,
// masked and failing patches. Needs no files.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "test_hooks.hpp"
#include "tiny_psf.hpp"

namespace ex2d {
namespace {

struct TinySetup {
    GaussHermitePsf psf = test::tiny_psf(25, 270, 940);
    ExtractionOptions opt;
    test::ForwardModel fm;
    std::vector<double> weights;
    int offset = 50;  // photon grid starts 50 bins before the extraction grid

    explicit TinySetup(unsigned seed)
    {
        opt.wmin = 5000;
        opt.wmax = 5300;
        opt.nspec = 25;
        fm = test::forward_model(psf, wavelength_grid(4960, 5340, 0.8), seed);
        weights = fm.ivar;
    }
    ImageView view() const { return {psf.npix_y, psf.npix_x, fm.image.data(), weights.data()}; }
    ExtractedFrame extract(int threads, std::size_t spot_window_bytes = std::size_t(16) << 20) const
    {
        auto backend = make_cpu_backend(threads, spot_window_bytes);
        auto result = extract_frame(view(), psf, opt, *backend);
        EXPECT_TRUE(result.is_ok()) << result.status().to_string();
        return std::move(result).value();
    }
};

struct PullSummary {
    double mean = 0, stddev = 0, frac_beyond5 = 0;
    long n = 0;
};

PullSummary pulls(const ExtractedFrame& frame, const test::ForwardModel& fm, int offset)
{
    const std::vector<double> truth = test::convolved_truth(frame, fm, offset);
    const std::vector<double> dwave = grid_gradient(frame.wave);
    const int nd = frame.ndiag / 2;
    double sum = 0, sum2 = 0;
    long beyond = 0, n = 0;
    for (int s = 0; s < frame.nspec; ++s) {
        for (int j = nd; j < frame.nwave - nd; ++j) {
            const size_t k = size_t(s) * frame.nwave + j;
            if (frame.ivar[k] <= 0) continue;
            const double pull =
                (frame.flux[k] * dwave[j] - truth[k]) * std::sqrt(frame.ivar[k]) / dwave[j];
            sum += pull;
            sum2 += pull * pull;
            beyond += std::abs(pull) > 5;
            ++n;
        }
    }
    PullSummary p;
    p.n = n;
    p.mean = sum / n;
    p.stddev = std::sqrt(sum2 / n - p.mean * p.mean);
    p.frac_beyond5 = double(beyond) / n;
    return p;
}

TEST(ExtractTiny, PullsAreUnitGaussian)
{
    TinySetup setup(7);
    const ExtractedFrame frame = setup.extract(2);
    EXPECT_EQ(frame.nwave, 376);
    EXPECT_EQ(frame.npatch, 5 * 8);
    EXPECT_EQ(frame.npatch_failed, 0);
    const PullSummary p = pulls(frame, setup.fm, setup.offset);
    EXPECT_GT(p.n, 25 * 360);
    EXPECT_LT(std::abs(p.mean), 0.05);
    EXPECT_GT(p.stddev, 0.95);
    EXPECT_LT(p.stddev, 1.05);
    EXPECT_LT(p.frac_beyond5, 1e-3);
}

TEST(ExtractTiny, NoiselessExtractionRecoversConvolvedTruth)
{
    TinySetup setup(0);
    const ExtractedFrame frame = setup.extract(2);
    const PullSummary p = pulls(frame, setup.fm, setup.offset);
    // Without noise the only error is light from outside a patch's padding.
    EXPECT_LT(std::abs(p.mean), 0.01);
    EXPECT_LT(p.stddev, 0.05);
}

TEST(ExtractTiny, ResolutionRowsSumToOne)
{
    TinySetup setup(3);
    const ExtractedFrame frame = setup.extract(2);
    const std::vector<double> r = dense_resolution(frame, 12);
    const int nw = frame.nwave;
    for (int i = 20; i < nw - 20; i += 17) {
        double row = 0;
        for (int j = 0; j < nw; ++j) row += r[size_t(i) * nw + j];
        // the stored +-5 diagonals hold all but ~1e-4 of each row
        EXPECT_NEAR(row, 1.0, 2e-3) << "row " << i;
    }
}

TEST(ExtractTiny, BitIdenticalForAnyThreadCount)
{
    TinySetup setup(11);
    const ExtractedFrame one = setup.extract(1);
    const ExtractedFrame three = setup.extract(3);
    ASSERT_EQ(one.flux.size(), three.flux.size());
    EXPECT_EQ(0, std::memcmp(one.flux.data(), three.flux.data(), one.flux.size() * sizeof(double)));
    EXPECT_EQ(0, std::memcmp(one.ivar.data(), three.ivar.data(), one.ivar.size() * sizeof(double)));
    EXPECT_EQ(0, std::memcmp(one.resolution.data(), three.resolution.data(),
                             one.resolution.size() * sizeof(double)));
    EXPECT_EQ(0, std::memcmp(one.chi2pix.data(), three.chi2pix.data(),
                             one.chi2pix.size() * sizeof(double)));
}

// Spots are evaluated window by window along wavelength; windows of one patch each (with
// their neighbours' shared wavelengths evaluated again) give the very same frame.
TEST(ExtractTiny, BitIdenticalForAnySpotWindow)
{
    TinySetup setup(13);
    const ExtractedFrame whole = setup.extract(1);
    for (int threads : {1, 2}) {
        const ExtractedFrame windowed = setup.extract(threads, 1);
        ASSERT_EQ(whole.flux.size(), windowed.flux.size());
        EXPECT_EQ(whole.flux, windowed.flux) << threads;
        EXPECT_EQ(whole.ivar, windowed.ivar) << threads;
        EXPECT_EQ(whole.resolution, windowed.resolution) << threads;
        EXPECT_EQ(whole.chi2pix, windowed.chi2pix) << threads;
        EXPECT_EQ(whole.pixmask_fraction, windowed.pixmask_fraction) << threads;
    }
}

TEST(ExtractTiny, ColumnWindowGivesTheSameFrameAsTheWholeImage)
{
    TinySetup setup(12);
    setup.opt.nspec = 25;
    const ExtractedFrame whole = setup.extract(1);
    const std::vector<PatchGeometry> patches =
        plan_patches(setup.psf, setup.opt, make_wave_grids(setup.psf, setup.opt), setup.psf.npix_y,
                     setup.psf.npix_x);
    int col_begin = setup.psf.npix_x, col_end = 0;
    for (const PatchGeometry& p : patches) {
        col_begin = std::min(col_begin, p.col_begin);
        col_end = std::max(col_end, p.col_end);
    }
    ASSERT_GT(col_begin, 0) << "the window must start inside the CCD to test the offset";
    const int ncols = col_end - col_begin;
    std::vector<double> pixels, weights;
    for (int row = 0; row < setup.psf.npix_y; ++row) {
        const size_t first = size_t(row) * setup.psf.npix_x + col_begin;
        pixels.insert(pixels.end(), setup.fm.image.begin() + first,
                      setup.fm.image.begin() + first + ncols);
        weights.insert(weights.end(), setup.weights.begin() + first,
                       setup.weights.begin() + first + ncols);
    }
    const ImageView window{setup.psf.npix_y, setup.psf.npix_x, pixels.data(),
                           weights.data(),   col_begin,        ncols};
    auto backend = make_cpu_backend(1);
    auto result = extract_frame(window, setup.psf, setup.opt, *backend);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    const ExtractedFrame& part = result.value();
    EXPECT_EQ(part.flux, whole.flux);
    EXPECT_EQ(part.ivar, whole.ivar);
    EXPECT_EQ(part.resolution, whole.resolution);
    EXPECT_EQ(part.chi2pix, whole.chi2pix);

    // A window that misses a patch's columns is a programming error, not a bad frame.
    const ImageView narrow{setup.psf.npix_y, setup.psf.npix_x, pixels.data(),
                           weights.data(),   col_begin + 1,    ncols - 1};
    EXPECT_THROW((void)extract_frame(narrow, setup.psf, setup.opt, *backend), Error);
}

TEST(ExtractTiny, FullyMaskedFibreHasZeroIvarAndAllBadPix)
{
    TinySetup setup(5);
    const int nx = setup.psf.npix_x;
    // mask every pixel within 2.5 px of fibre 10's trace
    for (int row = 0; row < setup.psf.npix_y; ++row) {
        const double x = setup.psf.xtrace.coef[10 * 2];
        for (int col = int(x - 2.5 - 1); col <= int(x + 3.5); ++col) {
            if (std::abs(col - x) <= 8) setup.weights[size_t(row) * nx + col] = 0;
        }
    }
    const ExtractedFrame frame = setup.extract(2);
    for (int j = 0; j < frame.nwave; ++j) {
        const size_t k = size_t(10) * frame.nwave + j;
        EXPECT_TRUE(std::isfinite(frame.flux[k]));
        EXPECT_GT(frame.pixmask_fraction[k], 0.5) << j;
        EXPECT_TRUE(frame.mask[k] & specmask::somebadpix);
    }
    // neighbours keep usable, finite extractions
    for (int j = 0; j < frame.nwave; ++j) {
        EXPECT_GT(frame.ivar[size_t(12) * frame.nwave + j], 0);
    }
}

// The pixel rule (usable_pixels.hpp): a pixel with a NaN or infinite value, or a weight that
// is infinite, NaN or negative, is masked by the driver before the backend sees it. So the
// frame is bit-identical to the one where those pixels had weight 0, no patch fails, and no
// output is NaN. The CUDA backend's test of the same name checks the device against this.
TEST(ExtractTiny, NonFinitePixelsWithWeightAreMaskedLikeZeroWeight)
{
    TinySetup setup(5);
    const int col = int(setup.psf.xtrace.coef[7 * 2]);
    const std::size_t nx = std::size_t(setup.psf.npix_x);
    const std::size_t nan_value = 400 * nx + col, inf_value = 520 * nx + col + 1;
    const std::size_t inf_weight = 610 * nx + col - 1, nan_weight = 300 * nx + col;
    const std::size_t negative_weight = 700 * nx + col;
    for (std::size_t pix : {nan_value, inf_value, inf_weight, nan_weight, negative_weight}) {
        ASSERT_GT(setup.weights[pix], 0.0) << pix;
    }
    TinySetup masked(5);
    for (std::size_t pix : {nan_value, inf_value, inf_weight, nan_weight, negative_weight}) {
        masked.weights[pix] = 0.0;
    }
    setup.fm.image[nan_value] = std::nan("");
    setup.fm.image[inf_value] = -INFINITY;
    setup.weights[inf_weight] = INFINITY;
    setup.weights[nan_weight] = std::nan("");
    setup.weights[negative_weight] = -1.0;

    const ExtractedFrame frame = setup.extract(2);
    const ExtractedFrame expected = masked.extract(2);
    EXPECT_EQ(frame.npatch_failed, 0);
    EXPECT_EQ(frame.npatch_retried, 0);
    for (size_t k = 0; k < frame.flux.size(); ++k) {
        ASSERT_TRUE(std::isfinite(frame.flux[k]) && std::isfinite(frame.ivar[k])) << k;
    }
    EXPECT_EQ(frame.flux, expected.flux);
    EXPECT_EQ(frame.ivar, expected.ivar);
    EXPECT_EQ(frame.resolution, expected.resolution);
    EXPECT_EQ(frame.chi2pix, expected.chi2pix);
    EXPECT_EQ(frame.pixmask_fraction, expected.pixmask_fraction);
    EXPECT_EQ(frame.mask, expected.mask);
    // The masked pixels count in pixmask_fraction, as any masked pixel does.
    double total_pixmask = 0;
    for (double f : frame.pixmask_fraction) total_pixmask += f;
    EXPECT_GT(total_pixmask, 0.0);
}

// A NaN that reaches a backend's sums anyway (the backend called without the driver, as a
// corrupted buffer would) fails its patches cleanly: zeroed, masked, never NaN.
TEST(ExtractTiny, NonFiniteSolveFailsItsPatchesNeverNaN)
{
    TinySetup setup(5);
    const int row = 400, col = int(setup.psf.xtrace.coef[7 * 2]);
    setup.fm.image[size_t(row) * setup.psf.npix_x + col] = std::nan("");
    const WaveGrids grids = make_wave_grids(setup.psf, setup.opt);
    const PatchBatch batch = plan_batch(setup.view(), setup.psf, setup.opt, grids);
    std::vector<PatchResult> results;
    StageTimes times;
    make_cpu_backend(2)->extract(batch, results, times);
    long failed = 0;
    for (const PatchResult& r : results) {
        if (r.status != PatchStatus::failed) continue;
        ++failed;
        for (double v : r.flux) EXPECT_EQ(v, 0.0);
        for (double v : r.ivar) EXPECT_EQ(v, 0.0);
    }
    EXPECT_GE(failed, 1);
    for (const PatchResult& r : results) {
        for (double v : r.flux) ASSERT_TRUE(std::isfinite(v));
        for (double v : r.resolution) ASSERT_TRUE(std::isfinite(v));
    }
}

// Valid inputs always give a positive definite iCov, so the factorization-failure path is
// reached by making one patch's iCov indefinite (the backends' test seam, test_hooks.hpp).
// That patch is retried with regularize 1e-4, fails again and comes out zeroed, saying why;
// every other patch is exactly as without it.
TEST(ExtractTiny, IndefiniteIcovFailsItsPatchAloneAndSaysWhy)
{
    EX2D_REQUIRE_TEST_HOOKS();
    const TinySetup setup(17);
    const WaveGrids grids = make_wave_grids(setup.psf, setup.opt);
    const PatchBatch batch = plan_batch(setup.view(), setup.psf, setup.opt, grids);
    ASSERT_GT(batch.patches.size(), 20u);
    auto backend = make_cpu_backend(2);
    std::vector<PatchResult> clean;
    StageTimes times;
    backend->extract(batch, clean, times);
    const long forced = 13;
    std::vector<PatchResult> results;
    {
        const test::IndefinitePatch indefinite(batch.patches[size_t(forced)]);
        backend->extract(batch, results, times);
    }
    ASSERT_EQ(results.size(), clean.size());
    for (size_t i = 0; i < results.size(); ++i) {
        if (long(i) == forced) continue;
        EXPECT_EQ(results[i].status, PatchStatus::ok) << i;
        EXPECT_EQ(results[i].flux, clean[i].flux) << i;
        EXPECT_EQ(results[i].resolution, clean[i].resolution) << i;
    }
    const PatchResult& failed = results[size_t(forced)];
    EXPECT_EQ(failed.status, PatchStatus::failed);
    EXPECT_EQ(failed.failure,
              "iCov is not positive definite; retry: iCov is not positive definite");
    for (double v : failed.flux) EXPECT_EQ(v, 0.0);
    for (double v : failed.ivar) EXPECT_EQ(v, 0.0);
    for (double v : failed.resolution) EXPECT_EQ(v, 0.0);
}

// The Python module's Ctrl-C: a cancel flag raised from the progress callback stops the CPU
// backend between patches (the patches already taken finish), and the frame is dropped with
// StatusCode::cancelled; the same backend then extracts the next frame whole.
TEST(ExtractTiny, CancelStopsBetweenPatchesAndTheBackendExtractsAgain)
{
    const TinySetup setup(11);
    auto backend = make_cpu_backend(2);
    std::atomic<bool> cancel{false};
    long reported = 0, total = 0;
    const auto progress = [&](long done, long all) {
        reported = done;
        total = all;
        if (done == 3) cancel = true;
    };
    const auto stopped =
        extract_frame(setup.view(), setup.psf, setup.opt, *backend, progress, &cancel);
    ASSERT_FALSE(stopped.is_ok());
    EXPECT_EQ(stopped.status().code(), StatusCode::cancelled);
    EXPECT_EQ(stopped.status().to_string().rfind("cancelled: the extraction was stopped", 0), 0u)
        << stopped.status().to_string();
    ASSERT_GT(total, 20);
    // Two threads: each finishes the patch it holds, so at most 3 + 1 are reported.
    EXPECT_GE(reported, 3);
    EXPECT_LE(reported, 4);

    cancel = false;
    const auto whole = extract_frame(setup.view(), setup.psf, setup.opt, *backend, {}, &cancel);
    ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
    EXPECT_EQ(whole.value().flux, setup.extract(2).flux);
}

}  // namespace
}  // namespace ex2d
