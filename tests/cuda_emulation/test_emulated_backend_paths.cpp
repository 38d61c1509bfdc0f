// SPDX-License-Identifier: BSD-3-Clause
// Paths of the CUDA backend that the parity tests do not take, reached through the emulation:
// the eigen-solver's fallback to one syevd per block when cuSOLVER refuses the batched one for
// the blocks' size, a new patch shape on a backend that already holds buffers, and the device
// report. Small frames (one bundle of ten fibres, part of the r grid), compared with the CPU
// backend.
#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "sim_extract.hpp"

namespace ex2d {
namespace {

struct SmallFrame {
    GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    ExtractionOptions opt;
    SimulatedFrame sim;
    LargeArray<double> weights;

    explicit SmallFrame(int nwavestep = 50)
    {
        opt = test::r_grid_options(20, 10);
        opt.bundlesize = 10;
        opt.nsubbundles = 2;
        opt.wmin = 6000.0;
        opt.wmax = 6400.0;
        opt.nwavestep = nwavestep;
        auto simulated = simulate_frame(psf, test::simulation_for(opt, 3));
        EXPECT_TRUE(simulated.is_ok()) << simulated.status().to_string();
        sim = std::move(simulated).value();
        weights = sim.preproc.weights();
    }
    ExtractedFrame extract(ExtractionBackend& backend, const ExtractionOptions& options) const
    {
        const ImageView view{sim.preproc.ny, sim.preproc.nx, sim.preproc.image.data(),
                             weights.data()};
        auto frame = extract_frame(view, psf, options, backend);
        EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
        return frame.is_ok() ? std::move(frame).value() : ExtractedFrame{};
    }
};

void expect_close(const ExtractedFrame& a, const ExtractedFrame& b, double relative)
{
    ASSERT_EQ(a.flux.size(), b.flux.size());
    ASSERT_FALSE(a.flux.empty());
    EXPECT_EQ(a.mask, b.mask);
    for (std::size_t k = 0; k < a.flux.size(); ++k) {
        const double sigma = a.ivar[k] > 0 ? 1.0 / std::sqrt(a.ivar[k]) : 1.0;
        ASSERT_NEAR(a.flux[k], b.flux[k], relative * sigma) << "bin " << k;
        ASSERT_NEAR(a.ivar[k], b.ivar[k], relative * std::abs(a.ivar[k])) << "bin " << k;
    }
}

TEST(CudaBackendPaths, EigenSolverFallbackGivesTheBatchedSolversResults)
{
    const SmallFrame f;
    auto batched = make_cuda_backend(CudaBackendOptions{});
    const ExtractedFrame a = f.extract(*batched, f.opt);
    // The emulated cuSOLVER now refuses the batched eigen-solver for these blocks, as a
    // toolkit without it for their size does: the backend solves one block at a time.
    setenv("EX2D_EMULATION_SYEVBATCHED_MAX_N", "8", 1);
    auto per_block = make_cuda_backend(CudaBackendOptions{});
    const ExtractedFrame b = f.extract(*per_block, f.opt);
    unsetenv("EX2D_EMULATION_SYEVBATCHED_MAX_N");
    expect_close(a, b, 1e-9);
    auto cpu = make_cpu_backend(0);
    expect_close(f.extract(*cpu, f.opt), b, 0.01);
}

TEST(CudaBackendPaths, ANewPatchShapeResizesTheBuffersAndGivesAFreshBackendsResults)
{
    const SmallFrame f;
    ExtractionOptions shorter = f.opt;
    shorter.nwavestep = 30;
    auto reused = make_cuda_backend(CudaBackendOptions{});
    f.extract(*reused, f.opt);
    const std::size_t held_before = reused->device_report().held_bytes;
    const ExtractedFrame second = f.extract(*reused, shorter);
    EXPECT_NE(reused->device_report().held_bytes, held_before);
    auto fresh = make_cuda_backend(CudaBackendOptions{});
    const ExtractedFrame expected = f.extract(*fresh, shorter);
    EXPECT_EQ(second.flux, expected.flux);
    EXPECT_EQ(second.ivar, expected.ivar);
    EXPECT_EQ(second.resolution, expected.resolution);
}

TEST(CudaBackendPaths, DeviceReportNamesTheDeviceItsMemoryAndEveryLibraryCall)
{
    const SmallFrame f;
    auto gpu = make_cuda_backend(CudaBackendOptions{});
    f.extract(*gpu, f.opt);
    const DeviceReport report = gpu->device_report();
    EXPECT_EQ(report.device_name, "ex2d CUDA emulation (host CPU)");
    EXPECT_GT(report.held_bytes, 0u);
    EXPECT_GE(report.peak_held_bytes, report.held_bytes);
    EXPECT_GT(report.device_total_bytes, report.device_free_bytes);
    ASSERT_EQ(report.call_seconds.size(), 6u);
    EXPECT_EQ(report.call_seconds[0].first, "potrfBatched");
    EXPECT_EQ(report.call_seconds[4].first, "syevBatched");
    for (const auto& [call, seconds] : report.call_seconds) EXPECT_GE(seconds, 0.0) << call;
}

TEST(CudaBackendPaths, AMissingDeviceOrdinalIsRefused)
{
    CudaBackendOptions options;
    options.device = 3;
    EXPECT_THROW(make_cuda_backend(options), DeviceUnavailable);
    EXPECT_EQ(cuda_device_count(), 1);
}

}  // namespace
}  // namespace ex2d
