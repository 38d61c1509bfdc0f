// SPDX-License-Identifier: BSD-3-Clause
// ex2d trace-shifts: desi_compute_trace_shifts' command line; writes the PSF with the traces
// of this frame.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli_support.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/trace_shift_io.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::tool {

namespace {

struct TraceShiftArgs {
    std::string image, psf, outpsf, outoffsets, spectrum, lines;
    bool sky = false, continuum = false, arc_lamps = false, auto_flavor = false;
    bool no_large_shift_scan = false;
    TraceShiftOptions opt;
};

unsigned char uc(char c)
{
    return static_cast<unsigned char>(c);
}

std::string lower_trimmed(std::string s)
{
    s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return std::isspace(uc(c)); }),
            s.end());
    std::transform(s.begin(), s.end(), s.begin(), [](char c) { return char(std::tolower(uc(c))); });
    return s;
}

/// --auto: the method from the image's FLAVOR, as desispec chooses it.
void apply_flavor(TraceShiftArgs& args, const PreprocWeightedFloat32& img)
{
    const auto flavor = img.header.get_string("FLAVOR");
    if (!flavor) {
        throw CommandExit(kExitInput, args.image +
                                          ": no FLAVOR keyword in the IMAGE header, "
                                          "which --auto needs");
    }
    const std::string f = lower_trimmed(*flavor);
    if (f == "flat") {
        args.continuum = true;
    } else if (f == "arc") {
        args.arc_lamps = true;
    } else {
        args.sky = true;
    }
    logger()->info("trace-shifts flavor={} continuum={} sky={} arc_lamps={}", f,
                   args.continuum ? "yes" : "no", args.sky ? "yes" : "no",
                   args.arc_lamps ? "yes" : "no");
}

/// The reference lines for y, or none (x only), by desispec's rules; refuses what ex2d does
/// not do. A reference spectrum also goes, sample by sample, into `spectrum`.
std::vector<ReferenceLine> reference_lines(const TraceShiftArgs& args,
                                           std::vector<ReferenceLine>& spectrum)
{
    if (!args.spectrum.empty()) {
        const TabulatedSpectrum table = value_or_exit(read_tabulated_spectrum(args.spectrum));
        std::vector<ReferenceLine> lines =
            value_or_exit(lines_from_spectrum(table.wave, table.flux, args.spectrum));
        for (size_t i = 0; i < table.wave.size(); ++i) {
            spectrum.push_back({table.wave[i], table.flux[i]});
        }
        return lines;
    }
    if (args.arc_lamps) {
        throw CommandExit(kExitUsage,
                          "--arc-lamps needs --spectrum FILE with an arc-lamp "
                          "spectrum: ex2d ships no arc-lamp line list");
    }
    if (args.sky) return night_sky_lines();
    const TraceShiftOptions& o = args.opt;
    if (!args.continuum && (o.degyx > 0 || o.degyy > 0)) {
        throw CommandExit(kExitUsage,
                          "y shifts without a reference (desispec's internal calibration) are "
                          "not implemented: give --sky or --spectrum FILE, or --continuum to "
                          "measure x only");
    }
    return {};
}

/// --continuum and --arc-lamps name different kinds of frame (desi_proc never gives both).
void check_frame_kind(const TraceShiftArgs& args)
{
    if (args.continuum && args.arc_lamps) {
        throw CommandExit(kExitUsage,
                          "--continuum and --arc-lamps exclude each other (with --auto: the "
                          "image's FLAVOR chose the other)");
    }
}

/// desispec's large-shift scan for the frame's kind: arc lamps (which need --spectrum, checked
/// with the reference lines) or continuum, unless --no-large-shift-scan.
LargeShiftScan large_shift_scan(const TraceShiftArgs& args)
{
    if (args.no_large_shift_scan) return LargeShiftScan::none;
    if (args.arc_lamps) return LargeShiftScan::arc_lamps;
    if (args.continuum) return LargeShiftScan::continuum;
    return LargeShiftScan::none;
}

void run_trace_shifts(TraceShiftArgs& args)
{
    const auto t_start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    if (!args.lines.empty()) {
        throw CommandExit(kExitUsage,
                          "--lines (desispec's forward-model fit of arc lines) is not "
                          "implemented in ex2d trace-shifts; use --spectrum FILE");
    }
    check_frame_kind(args);
    const PreprocWeightedFloat32 img =
        value_or_exit(read_preproc_weighted_float32(args.image), kExitInput);
    const GaussHermitePsf psf = value_or_exit(read_psf(args.psf), kExitInput);
    exit_on_error(
        check_psf_camera(img.header.get_string("CAMERA").value_or(""), args.image, psf, args.psf),
        kExitInput);
    if (args.auto_flavor) apply_flavor(args, img);
    check_frame_kind(args);
    args.opt.lines = reference_lines(args, args.opt.spectrum);
    args.opt.large_shift_scan = large_shift_scan(args);
    const Float32ImageView view{img.ny, img.nx, img.image.data(), img.weights.data()};
    logger()->info(
        "trace-shifts start image={} psf={} degxx={} degxy={} degyx={} degyy={} "
        "reference_lines={} large_shift_scan={}",
        args.image, args.psf, args.opt.degxx, args.opt.degxy, args.opt.degyx, args.opt.degyy,
        args.opt.lines.size(), large_shift_scan_name(args.opt.large_shift_scan));
    const TraceShiftResult result =
        value_or_exit(measure_trace_shifts(view, psf, args.opt, args.image), kExitRuntime);
    if (!args.outoffsets.empty()) {
        exit_on_error(write_trace_offsets(args.outoffsets, result.offsets), kExitOutput);
    }
    exit_on_error(write_shifted_psf(args.psf, args.outpsf, result, {args.psf, args.image}),
                  kExitOutput);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    logger()->info(
        "trace-shifts done output={} meandx={:+.4f} meandy={:+.4f} seconds={:.2f} "
        "cpu_seconds={:.2f} peak_rss_mib={:.0f}",
        args.outpsf, result.mean_dx, result.mean_dy, seconds, process_cpu_seconds() - cpu_start,
        peak_rss_mib());
}

}  // namespace

void add_trace_shifts_command(CLI::App& app)
{
    auto args = std::make_shared<TraceShiftArgs>();
    TraceShiftOptions& opt = args->opt;
    CLI::App* cmd = app.add_subcommand(
        "trace-shifts",
        "Measure the shifts of a frame's traces against a PSF and write the PSF with the "
        "shifted traces (desi_compute_trace_shifts' command line; under that name the tool "
        "runs this command)");
    cmd->add_option("-i,--image", args->image, "Preproc image")->required();
    cmd->add_option("--psf", args->psf, "Input PSF (ex2d finds no default PSF)")->required();
    cmd->add_option("-o,--outpsf", args->outpsf, "Output PSF with the shifted traces")->required();
    cmd->add_option("--outoffsets", args->outoffsets,
                    "Also write the measured offsets: a FITS table if the name has .fits, "
                    "else CSV");
    cmd->add_option("--degxx", opt.degxx, "Degree of the x shifts along x")
        ->check(CLI::Range(0, 6))
        ->capture_default_str();
    cmd->add_option("--degxy", opt.degxy, "Degree of the x shifts along y")
        ->check(CLI::Range(0, 6))
        ->capture_default_str();
    cmd->add_option("--degyx", opt.degyx, "Degree of the y shifts along x")
        ->check(CLI::Range(0, 6))
        ->capture_default_str();
    cmd->add_option("--degyy", opt.degyy, "Degree of the y shifts along y")
        ->check(CLI::Range(0, 6))
        ->capture_default_str();
    cmd->add_flag("--sky", args->sky,
                  "Measure y on the night-sky lines ex2d ships (vacuum wavelengths)");
    cmd->add_flag("--continuum", args->continuum,
                  "Continuum or LED frame: measure x only (unless --sky or --spectrum)");
    cmd->add_option("--spectrum", args->spectrum,
                    "Reference spectrum for y: rows 'wavelength flux' in vacuum A, as "
                    "desispec's spec-sky.dat");
    cmd->add_option("--lines", args->lines, "Refused: desispec's forward-model fit of lines");
    cmd->add_flag("--arc-lamps", args->arc_lamps,
                  "Arc frame: needs --spectrum with an arc-lamp spectrum");
    cmd->add_flag("--auto", args->auto_flavor,
                  "Choose --continuum, --arc-lamps or --sky from the image's FLAVOR");
    cmd->add_option("--width", opt.width, "Columns of the cross-dispersion window (odd)")
        ->check(CLI::Validator(
            [](const std::string& v) {
                const int w = std::atoi(v.c_str());
                return w >= 3 && w % 2 == 1 ? std::string() : "must be an odd number >= 3";
            },
            "ODD>=3"))
        ->capture_default_str();
    cmd->add_option("--ccd-rows-rebin", opt.ccd_rows_rebin,
                    "Rows summed before the cross-dispersion centroids")
        ->check(CLI::Range(1, 100))
        ->capture_default_str();
    cmd->add_option("--max-error", opt.max_error,
                    "Largest fit error (px) at the CCD corners before the degrees are lowered")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_flag("--no-large-shift-scan", args->no_large_shift_scan,
                  "Skip the large-shift scan that --continuum and --arc-lamps otherwise make "
                  "first (a constant offset of all traces within 50 px for continuum frames, "
                  "25 fibres for arcs); without it x shifts are found within about +-width/2 "
                  "px");
    cmd->add_option("--nfibers", opt.nfibers, "Measure only the first N fibres (debugging)")
        ->check(CLI::PositiveNumber);
    cmd->callback([args] { run_trace_shifts(*args); });
}

}  // namespace ex2d::tool
