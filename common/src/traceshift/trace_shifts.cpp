// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/trace_shifts.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ex2d/logging.hpp"
#include "large_shift_scan.hpp"
#include "measure.hpp"
#include "shift_fit.hpp"

namespace ex2d {

namespace {

using traceshift::ShiftPolynomial;
using traceshift::TraceAxis;

constexpr double kConverged = 0.001;  // px: the traces moved less than this in an iteration

Status check_options(const TraceShiftOptions& o, const GaussHermitePsf& psf,
                     const std::string& frame)
{
    if (o.degxx < 0 || o.degxy < 0 || o.degyx < 0 || o.degyy < 0 || o.degxx > 6 || o.degxy > 6 ||
        o.degyx > 6 || o.degyy > 6) {
        return Status::invalid(frame + ": shift degrees must be 0..6");
    }
    if (o.width < 3 || o.width % 2 == 0) {
        return Status::invalid(frame + ": --width must be an odd number >= 3, got " +
                               std::to_string(o.width));
    }
    if (o.ccd_rows_rebin < 1 || o.ccd_rows_rebin > traceshift::kRowsPerXOffset) {
        return Status::invalid(frame + ": --ccd-rows-rebin must be 1..100, got " +
                               std::to_string(o.ccd_rows_rebin));
    }
    if (o.nfibers < 0 || o.nfibers > psf.nspec()) {
        return Status::invalid(frame + ": --nfibers must be 1.." + std::to_string(psf.nspec()));
    }
    if (!(o.max_error > 0)) return Status::invalid(frame + ": --max-error must be > 0");
    if (o.large_shift_scan == LargeShiftScan::arc_lamps && o.lines.empty()) {
        return Status::invalid(frame +
                               ": the arc-lamp scan needs reference lines (the arc's spectrum)");
    }
    return Status::ok();
}

/// Largest correction of one iteration at the measured points.
double largest_shift(const std::vector<TraceOffset>& offsets, const ShiftPolynomial& shift)
{
    double largest = 0;
    for (const TraceOffset& o : offsets) largest = std::max(largest, std::fabs(shift(o.x, o.y)));
    return largest;
}

/// Whether the measurements reach all four quadrants of the CCD (a masked amplifier leaves
/// one empty; then only a constant can be fitted).
bool covers_quadrants(const std::vector<TraceOffset>& offsets, int npix_x, int npix_y)
{
    bool seen[4] = {false, false, false, false};
    for (const TraceOffset& o : offsets) {
        seen[(o.x > 0.5 * npix_x ? 1 : 0) + (o.y > 0.5 * npix_y ? 2 : 0)] = true;
    }
    return seen[0] && seen[1] && seen[2] && seen[3];
}

struct AxisRun {
    std::vector<TraceOffset> offsets;
    int iterations = 0;
};

/// Measures one axis and moves the traces of `work` until they stop moving.
template <typename Measure>
Result<AxisRun> converge(GaussHermitePsf& work, TraceAxis axis, int& degx, int& degy,
                         const TraceShiftOptions& opt, int nfibers, const std::string& frame,
                         Measure measure)
{
    const char* name = axis == TraceAxis::x ? "x" : "y";
    AxisRun run;
    for (int it = 0; it < opt.max_iterations; ++it) {
        run.offsets = measure(work);
        if (run.offsets.empty()) {
            return Status::invalid(
                frame +
                (axis == TraceAxis::x
                     ? ": no lit fibre, none with S/N > 3 in half of its blocks of rows (a dark, "
                       "bias or masked frame?)"
                     : ": no reference line measured with S/N > 10 (too few sky lines "
                       "on this frame?)"));
        }
        if (it == 0 && (degx > 0 || degy > 0) &&
            !covers_quadrants(run.offsets, work.npix_x, work.npix_y)) {
            logger()->warn(
                "trace-shifts frame={} axis={} no measurement in a CCD quadrant; "
                "fitting a constant shift",
                frame, name);
            degx = degy = 0;
        }
        auto fit =
            traceshift::fit_with_degree_rule(run.offsets, degx, degy, opt.max_error, work, nfibers);
        if (fit.is_ok() && axis == TraceAxis::y) {
            const std::vector<double> dropped =
                traceshift::drop_discrepant_lines(run.offsets, fit.value());
            if (!dropped.empty()) {
                logger()->info(
                    "trace-shifts frame={} axis=y iteration={} lines_left_out={} "
                    "first={:.2f}",
                    frame, it + 1, dropped.size(), dropped.front());
                fit = traceshift::fit_with_degree_rule(run.offsets, degx, degy, opt.max_error, work,
                                                       nfibers);
            }
        }
        if (!fit.is_ok()) {
            return Status::invalid(frame + ": the " + name +
                                   " shift fit failed: " + fit.status().message());
        }
        const ShiftPolynomial& shift = fit.value();
        (axis == TraceAxis::x ? work.xtrace : work.ytrace) =
            traceshift::shifted_trace(work, axis, shift);
        const double moved = largest_shift(run.offsets, shift);
        const long used = std::count_if(run.offsets.begin(), run.offsets.end(),
                                        [](const TraceOffset& o) { return o.used; });
        run.iterations = it + 1;
        logger()->info(
            "trace-shifts frame={} axis={} iteration={} offsets={} used={} degx={} degy={} "
            "error_floor={:.4f} moved={:.4f}",
            frame, name, it + 1, run.offsets.size(), used, degx, degy, shift.error_floor, moved);
        if (moved < kConverged) break;
    }
    return run;
}

void summarize(const GaussHermitePsf& in, const GaussHermitePsf& out, TraceShiftResult& r)
{
    double sum_dx = 0, sum_dy = 0;
    long n = 0;
    r.min_dx = r.min_dy = 1e300;
    r.max_dx = r.max_dy = -1e300;
    for (int fiber = 0; fiber < in.nspec(); ++fiber) {
        for (int k = 0; k < 5; ++k) {
            const double wave =
                in.xtrace.wavemin + (in.xtrace.wavemax - in.xtrace.wavemin) * k / 4.0;
            const double dx = out.xtrace.eval(fiber, wave) - in.xtrace.eval(fiber, wave);
            const double dy = out.ytrace.eval(fiber, wave) - in.ytrace.eval(fiber, wave);
            sum_dx += dx;
            sum_dy += dy;
            r.min_dx = std::min(r.min_dx, dx);
            r.max_dx = std::max(r.max_dx, dx);
            r.min_dy = std::min(r.min_dy, dy);
            r.max_dy = std::max(r.max_dy, dy);
            ++n;
        }
    }
    r.mean_dx = sum_dx / double(n);
    r.mean_dy = sum_dy / double(n);
}

template <typename View>
Result<LargeShiftScanResult> scan(const View& image, const GaussHermitePsf& psf,
                                  const TraceShiftOptions& options, const std::string& frame_name)
{
    EX2D_RETURN_NOT_OK(check_options(options, psf, frame_name));
    switch (options.large_shift_scan) {
        case LargeShiftScan::continuum:
            return traceshift::scan_continuum(image, psf, frame_name);
        case LargeShiftScan::arc_lamps:
            return traceshift::scan_arc_lamps(image, psf, options.lines, frame_name);
        case LargeShiftScan::none:
            break;
    }
    return LargeShiftScanResult{};
}

template <typename View>
Result<TraceShiftResult> measure(const View& image, const GaussHermitePsf& psf,
                                 const TraceShiftOptions& options, const std::string& frame_name)
{
    EX2D_RETURN_NOT_OK(check_options(options, psf, frame_name));
    bool any_weight = false;
    for (long i = 0, n = long(image.ny) * image.stride(); i < n && !any_weight; ++i) {
        any_weight = image.weights[i] > 0;
    }
    if (!any_weight) {
        return Status::invalid(frame_name + ": every pixel is masked; no trace shift to measure");
    }
    const int nfibers = options.nfibers > 0 ? options.nfibers : psf.nspec();
    GaussHermitePsf work = psf;
    TraceShiftResult result;
    result.degxx = options.degxx;
    result.degxy = options.degxy;
    result.degyx = options.degyx;
    result.degyy = options.degyy;

    if (options.large_shift_scan != LargeShiftScan::none) {
        EX2D_ASSIGN_OR_RETURN(result.scan, scan(image, psf, options, frame_name));
        for (int fiber = 0; fiber < work.nspec(); ++fiber) {
            work.xtrace.coef[size_t(fiber) * work.xtrace.ncoef] += result.scan.dx;
            work.ytrace.coef[size_t(fiber) * work.ytrace.ncoef] += result.scan.dy;
        }
    }

    const traceshift::XCentroidModel x_model(work, nfibers, image.ny, options.width);
    EX2D_ASSIGN_OR_RETURN(AxisRun x_run,
                          converge(work, TraceAxis::x, result.degxx, result.degxy, options, nfibers,
                                   frame_name, [&](const GaussHermitePsf& current) {
                                       return traceshift::measure_x_offsets(image, current, x_model,
                                                                            nfibers, options.width,
                                                                            options.ccd_rows_rebin);
                                   }));
    result.x_iterations = x_run.iterations;
    std::vector<TraceOffset> y_offsets;
    if (!options.lines.empty()) {
        std::vector<ReferenceLine> spectrum = options.spectrum;
        std::sort(spectrum.begin(), spectrum.end(),
                  [](const ReferenceLine& a, const ReferenceLine& b) { return a.wave < b.wave; });
        EX2D_ASSIGN_OR_RETURN(AxisRun y_run,
                              converge(work, TraceAxis::y, result.degyx, result.degyy, options,
                                       nfibers, frame_name, [&](const GaussHermitePsf& current) {
                                           return traceshift::measure_y_offsets(
                                               image, current, options.lines, spectrum, nfibers,
                                               options.width);
                                       }));
        result.y_iterations = y_run.iterations;
        result.y_measured = true;
        y_offsets = std::move(y_run.offsets);
    }
    result.offsets = std::move(y_offsets);
    result.offsets.insert(result.offsets.end(), x_run.offsets.begin(), x_run.offsets.end());
    result.xtrace = work.xtrace;
    result.ytrace = work.ytrace;
    summarize(psf, work, result);
    logger()->info(
        "trace-shifts frame={} meandx={:+.4f} mindx={:+.4f} maxdx={:+.4f} meandy={:+.4f} "
        "mindy={:+.4f} maxdy={:+.4f} y_measured={}",
        frame_name, result.mean_dx, result.min_dx, result.max_dx, result.mean_dy, result.min_dy,
        result.max_dy, result.y_measured ? "yes" : "no");
    return result;
}

}  // namespace

Result<LargeShiftScanResult> scan_large_shift(const ImageView& image, const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name)
{
    return scan(image, psf, options, frame_name);
}

Result<LargeShiftScanResult> scan_large_shift(const Float32ImageView& image,
                                              const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name)
{
    return scan(image, psf, options, frame_name);
}

Result<TraceShiftResult> measure_trace_shifts(const ImageView& image, const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name)
{
    return measure(image, psf, options, frame_name);
}

Result<TraceShiftResult> measure_trace_shifts(const Float32ImageView& image,
                                              const GaussHermitePsf& psf,
                                              const TraceShiftOptions& options,
                                              const std::string& frame_name)
{
    return measure(image, psf, options, frame_name);
}

}  // namespace ex2d
