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

constexpr double kFlatDx = 12.6;  // px the large-shift scans' flat is moved
constexpr double kArcDx = 9.3;    // px the arc is moved in x
constexpr double kArcDy = 2.7;    // and in y

double mib(std::size_t bytes)
{
    return double(bytes) / double(1 << 20);
}

/// A frame's pixels and weights in float32, as ex2d trace-shifts reads them.
struct Float32Frame {
    LargeArray<float> pixels, weights;
    int ny = 0, nx = 0;

    explicit Float32Frame(const PreprocImage& img)
        : pixels(img.image.size()), weights(img.image.size()), ny(img.ny), nx(img.nx)
    {
        const LargeArray<double> w = img.weights();
        for (std::size_t i = 0; i < pixels.size(); ++i) {
            pixels[i] = float(img.image[i]);
            weights[i] = float(w[i]);
        }
    }
    Float32ImageView view() const { return {ny, nx, pixels.data(), weights.data()}; }
};

/// `psf` with every trace moved by (dx, dy).
GaussHermitePsf moved_traces(const GaussHermitePsf& psf, double dx, double dy)
{
    GaussHermitePsf moved = psf;
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        moved.xtrace.coef[std::size_t(fiber) * moved.xtrace.ncoef] += dx;
        moved.ytrace.coef[std::size_t(fiber) * moved.ytrace.ncoef] += dy;
    }
    return moved;
}

struct ScanTiming {
    double scan = 0;  ///< core-s of the scan alone
    double step = 0;  ///< core-s of the whole measurement, scan included
    TraceShiftResult result;
};

ScanTiming time_scan(const Float32Frame& frame, const GaussHermitePsf& psf,
                     const TraceShiftOptions& opt, const char* name)
{
    ScanTiming t;
    double c0 = process_cpu_seconds();
    value_or_exit(scan_large_shift(frame.view(), psf, opt, name));
    t.scan = process_cpu_seconds() - c0;
    c0 = process_cpu_seconds();
    t.result = value_or_exit(measure_trace_shifts(frame.view(), psf, opt, name));
    t.step = process_cpu_seconds() - c0;
    return t;
}

const char* goal(double core_seconds)
{
    return core_seconds <= kGoalCoreSeconds ? "met" : "not met";
}

}  // namespace

void bench_trace_shifts(const SimulatedFrame& simulated, const GaussHermitePsf& psf)
{
    const Float32Frame frame(simulated.preproc);
    const Float32ImageView view = frame.view();
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
        mib(2 * frame.pixels.size() * sizeof(float)));
    std::printf(
        "  trace shifts found     dx %+.4f (moved %+.2f), dy %+.4f (moved %+.2f) px "
        "mean; %d + %d iterations, %zu offsets\n",
        r.mean_dx, kKnownDx, r.mean_dy, kKnownDy, r.x_iterations, r.y_iterations, r.offsets.size());
}

void bench_large_shift_scans(const GaussHermitePsf& psf, const SimulationOptions& frame)
{
    // The frames lie where the PSF's traces moved by the offsets are; the PSF is measured
    // against them.
    SimulationOptions sim = frame;
    sim.specmin = 0;
    sim.nspec = psf.nspec();
    sim.flat = true;
    const Float32Frame flat(
        value_or_exit(simulate_frame(moved_traces(psf, kFlatDx, 0.0), sim)).preproc);
    sim.flat = false;
    sim.arc = true;
    const Float32Frame arc(
        value_or_exit(simulate_frame(moved_traces(psf, kArcDx, kArcDy), sim)).preproc);

    TraceShiftOptions continuum = desi_proc_trace_shift_options("continuum");
    continuum.large_shift_scan = LargeShiftScan::continuum;
    TraceShiftOptions arc_lamps;
    arc_lamps.lines = simulated_arc_lines();
    arc_lamps.large_shift_scan = LargeShiftScan::arc_lamps;
    const ScanTiming f = time_scan(flat, psf, continuum, "bench-flat");
    const ScanTiming a = time_scan(arc, psf, arc_lamps, "bench-arc");
    std::printf(
        "  large-shift scans      continuum %.2f core-s (whole step %.2f: goal %.1f %s), arc "
        "lamps %.2f (whole step %.2f: %s) per frame on one thread\n",
        f.scan, f.step, kGoalCoreSeconds, goal(f.step), a.scan, a.step, goal(a.step));
    std::printf(
        "  large shifts found     flat moved %+.2f: scan %+.2f, dx %+.4f mean; arc moved %+.2f / "
        "%+.2f: scan %+.3f / %+.3f (%d of %d spots matched), dx %+.4f dy %+.4f mean\n",
        kFlatDx, f.result.scan.dx, f.result.mean_dx, kArcDx, kArcDy, a.result.scan.dx,
        a.result.scan.dy, a.result.scan.matches, a.result.scan.spots_predicted, a.result.mean_dx,
        a.result.mean_dy);
}

}  // namespace ex2d::tool
