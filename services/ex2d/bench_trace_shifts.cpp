// SPDX-License-Identifier: BSD-3-Clause
#include "bench_trace_shifts.hpp"

#include <cmath>
#include <cstdio>

#include "cli_support.hpp"
#include "ex2d/night_sky_lines.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::tool {

namespace {

// Issue 31: at most 3 core-seconds per full r frame on one thread, stretch 1.5; desispec's
// desi_compute_trace_shifts takes 22-27 CPU-seconds and 1.2 GB.
constexpr double kGoalCoreSeconds = 3.0;
constexpr double kStretchCoreSeconds = 1.5;
constexpr double kAnchorCoreSeconds = 22.0;
constexpr double kKnownDx = 0.3;   // px the bench's PSF is moved from the frame's traces
constexpr double kKnownDy = -0.3;  // px

double mib(std::size_t bytes)
{
    return double(bytes) / double(1 << 20);
}

}  // namespace

void bench_trace_shifts(const SimulatedFrame& simulated, const GaussHermitePsf& psf)
{
    const PreprocImage& img = simulated.preproc;
    const LargeArray<double> weights = img.weights();
    LargeArray<float> pixels32(img.image.size()), weights32(weights.size());
    for (std::size_t i = 0; i < pixels32.size(); ++i) {
        pixels32[i] = float(img.image[i]);
        weights32[i] = float(weights[i]);
    }
    const Float32ImageView view{img.ny, img.nx, pixels32.data(), weights32.data()};
    // The measurement starts from traces off by a known amount and must come back.
    GaussHermitePsf moved = psf;
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        moved.xtrace.coef[std::size_t(fiber) * moved.xtrace.ncoef] -= kKnownDx;
        moved.ytrace.coef[std::size_t(fiber) * moved.ytrace.ncoef] -= kKnownDy;
    }
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degyx = 2;
    opt.lines = night_sky_lines();
    const double c0 = process_cpu_seconds();
    const TraceShiftResult r = value_or_exit(measure_trace_shifts(view, moved, opt, "bench"));
    const double cpu = process_cpu_seconds() - c0;
    std::printf(
        "  trace shifts           %.2f core-s per frame on one thread (goal %.1f: %s; "
        "stretch %.1f: %s), %.0fx less than desispec's ~%.0f\n",
        cpu, kGoalCoreSeconds, cpu <= kGoalCoreSeconds ? "met" : "not met", kStretchCoreSeconds,
        cpu <= kStretchCoreSeconds ? "met" : "not met", kAnchorCoreSeconds / cpu,
        kAnchorCoreSeconds);
    std::printf(
        "  trace-shift memory     %.0f MiB for the float32 frame it measures; ex2d "
        "trace-shifts on a file peaks at about 215 MiB resident (its log's "
        "peak_rss_mib)\n",
        mib(2 * pixels32.size() * sizeof(float)));
    std::printf(
        "  trace shifts found     dx %+.4f (moved %+.2f), dy %+.4f (moved %+.2f) px "
        "mean; %d + %d iterations, %zu offsets\n",
        r.mean_dx, kKnownDx, r.mean_dy, kKnownDy, r.x_iterations, r.y_iterations, r.offsets.size());
}

}  // namespace ex2d::tool
