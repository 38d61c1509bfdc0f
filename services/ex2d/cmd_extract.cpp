// SPDX-License-Identifier: BSD-3-Clause
// ex2d extract: desi_extract_spectra's interface on the ex2d engine. Every check that can
// fail on the inputs runs before the extraction, so a bad job fails in seconds, not minutes.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "cli_support.hpp"
#include "ex2d/badcolumns.hpp"
#include "ex2d/fibermap_columns.hpp"
#include "ex2d/barycentric.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "ex2d/timing_file.hpp"
#include "interrupt.hpp"

namespace ex2d::tool {

namespace {

struct ExtractArgs {
    std::string input, fibermap, psf, output, model, wavelength;
    std::string badcolumns;        ///< desi_compute_badcolumn_mask's table; empty: no such step
    std::string timingfile;        ///< desi_proc's --timingfile JSON; empty: none
    std::string fibermap_columns;  ///< JSON table of FIBERMAP units; empty: the built-in one
    BadColumnThresholds badcolumn_thresholds;
    BackendChoice backend;
    ExtractionOptions opt;
    bool no_gpu = false, no_scores = false, verbose = false, mpi = false;
    bool use_specter = false, decorrelate_fibers = false;
    bool psferr_given = false;
    bool barycentric = false;
};

std::string header_id(const PreprocImage& img)
{
    const auto expid = img.header.get_int("EXPID");
    const auto camera = img.header.get_string("CAMERA");
    const auto night = img.header.get_int("NIGHT");
    return "night=" + (night ? std::to_string(*night) : std::string("?")) +
           " expid=" + (expid ? std::to_string(*expid) : std::string("?")) +
           " camera=" + camera.value_or("?");
}

/// desi_extract_spectra options that ex2d accepts but cannot honour are refused in one line;
/// --mpi only changes how desispec parallelises, which ex2d does with threads.
void check_desispec_options(const ExtractArgs& args)
{
    if (args.use_specter) {
        throw CommandExit(kExitUsage,
                          "--use-specter is not supported: ex2d implements "
                          "gpu_specter's algorithm (desispec's default and GPU path), "
                          "not classic specter");
    }
    if (args.decorrelate_fibers) {
        throw CommandExit(kExitUsage,
                          "--decorrelate-fibers is not supported: ex2d implements gpu_specter's "
                          "extraction, for which desispec rejects it too");
    }
    if (args.mpi) logger()->info("event=option_ignored option=--mpi reason=\"ex2d uses threads\"");
}

/// Option values that need no input file, and the backend from --backend, --no-gpu and
/// $DESI_NO_GPU (desispec: the GPU wherever one is found unless either disables it).
void check_option_values(ExtractArgs& args)
{
    exit_on_usage_error(
        parse_wavelength_option(args.wavelength, args.opt.wmin, args.opt.wmax, args.opt.dw));
    if (args.psferr_given) exit_on_usage_error(check_psferr_option(args.opt.psferr));
    if (args.backend.threads < 0) {
        throw CommandExit(kExitUsage,
                          "--threads must be >= 0 (0: the CPUs this process may "
                          "use), got " +
                              std::to_string(args.backend.threads));
    }
    const bool env_no_gpu = std::getenv("DESI_NO_GPU") != nullptr;
    if (args.no_gpu && args.backend.name == "cuda") {
        throw CommandExit(kExitUsage, "--no-gpu contradicts --backend cuda");
    }
    if ((args.no_gpu || env_no_gpu) && args.backend.name == "auto") {
        args.backend.name = "cpu";
        logger()->info("event=backend_cpu reason=\"{}\"",
                       args.no_gpu ? "--no-gpu" : "DESI_NO_GPU is set");
    }
    args.opt.want_model = !args.model.empty();
    const BadColumnThresholds& bc = args.badcolumn_thresholds;
    if (!(bc.elec_per_sec > 0)) {
        throw CommandExit(kExitUsage, "--badcolumn-threshold must be > 0 electrons/s");
    }
    if (!(bc.fiber_fraction > 0 && bc.fiber_fraction <= 1)) {
        throw CommandExit(kExitUsage, "--badcolumn-frac-threshold must be in (0, 1]");
    }
}

/// The bad-column table and the camera's arm, read before the extraction: a bad table fails
/// the run in a second. An explicit --badcolumns that is missing is an input error (as for
/// desi_compute_badcolumn_mask); only the fleet's desispec-layout default may be absent.
struct BadColumnStep {
    BadColumns table;
    char arm = 'r';
};
std::optional<BadColumnStep> read_badcolumn_step(const ExtractArgs& args, const FitsHeader& image)
{
    if (args.badcolumns.empty()) return std::nullopt;
    BadColumnStep step;
    step.table = value_or_exit(read_badcolumns_csv(args.badcolumns), kExitInput);
    const auto arm = parse_arm(image.get_string("CAMERA").value_or(""));
    if (!arm.is_ok()) {
        exit_on_error(
            Status::format(args.input + ": no CAMERA b#, r# or z# in the header, which "
                                        "--badcolumns needs for the fibermask BADAMP bit"),
            kExitInput);
    }
    step.arm = arm_letter(arm.value());
    return step;
}

/// desi_proc's bad-column step (datamodel 4.7) on the finished frame: MASK and FIBERSTATUS.
void apply_badcolumn_step(const ExtractArgs& args, const BadColumnStep& step,
                          const GaussHermitePsf& psf, ExtractedFrame& frame,
                          FitsTableBlob& fibermap)
{
    const BadColumnFrame target{&psf.xtrace,       &frame.wave, frame.specmin, frame.nspec,
                                frame.mask.data(), &fibermap,   step.arm};
    const BadColumnOutcome outcome = value_or_exit(
        apply_badcolumn_mask(step.table, target, args.badcolumn_thresholds), kExitInput);
    logger()->info(
        "badcolumn mask file={} columns={} masked_bins={} masked_fibers={} "
        "badamp_fibers={}",
        args.badcolumns, step.table.column.size(), outcome.masked_bins, outcome.masked_fibers,
        outcome.flagged_spectra.size());
}

/// desispec (makepath in io.write_frame) creates a missing output folder; ex2d reports it
/// instead, because a typo in a batch script should not scatter new folders.
void check_output_folder(const std::string& path, const char* what)
{
    if (path.empty()) return;
    std::filesystem::path folder = std::filesystem::path(path).parent_path();
    if (folder.empty()) folder = ".";
    std::error_code ec;
    // desispec's writers create the output folder (desispec.io.util.makepath); so does ex2d.
    std::filesystem::create_directories(folder, ec);
    if (!std::filesystem::is_directory(folder, ec)) {
        throw CommandExit(kExitOutput, std::string("I/O error: cannot write ") + what + " " + path +
                                           ": folder " + folder.string() +
                                           " does not exist and cannot be created");
    }
    if (::access(folder.c_str(), W_OK | X_OK) != 0) {
        throw CommandExit(kExitOutput, std::string("I/O error: cannot write ") + what + " " + path +
                                           ": folder " + folder.string() + " is not writable");
    }
}

/// The image against the PSF and the options (the fleet's reader runs the same checks):
/// the image's problems exit as input errors, -w outside the PSF as a usage error.
void check_image(const ExtractArgs& args, const PreprocImage& img, const GaussHermitePsf& psf,
                 const FitsTableBlob& fibermap)
{
    const ExtractionInputNames names{
        args.input, args.psf, args.fibermap.empty() ? args.input : args.fibermap, args.output};
    const Status checked = check_extraction_inputs(img, fibermap, psf, args.opt, names);
    if (checked.code() == StatusCode::invalid_argument) exit_on_usage_error(checked);
    exit_on_error(checked, kExitInput);
}

/// The CCD columns that the patches of `opt` use.
ColumnRange extracted_columns(const GaussHermitePsf& psf, const ExtractionOptions& opt)
{
    const std::vector<PatchGeometry> patches =
        plan_patches(psf, opt, make_wave_grids(psf, opt), psf.npix_y, psf.npix_x);
    ColumnRange columns{psf.npix_x, 0};
    for (const PatchGeometry& p : patches) {
        columns.begin = std::min(columns.begin, p.col_begin);
        columns.end = std::max(columns.end, p.col_end);
    }
    if (columns.begin >= columns.end) return {};
    return columns;
}

/// The model first: a frame on disk then means a complete set of outputs. A frame that
/// cannot be written takes its model with it.
void write_outputs(const ExtractArgs& args, const ExtractedFrame& frame,
                   const FrameProvenance& prov)
{
    if (!args.model.empty()) exit_on_error(write_model_image(args.model, frame, prov), kExitOutput);
    const Status written = write_frame(args.output, frame, prov);
    if (!written.is_ok() && !args.model.empty()) {
        std::error_code ec;
        std::filesystem::remove(args.model, ec);
    }
    exit_on_error(written, kExitOutput);
}

void run_extract(ExtractArgs& args)
{
    using Clock = std::chrono::steady_clock;
    const auto t_start = Clock::now();
    StepTimer timer;  // desi_proc's --timingfile steps: read, extract, write
    timer["read"].start_unix = unix_now();
    if (args.verbose) set_log_level("debug");
    if (run_context().owns_signals) install_interrupt_cleanup();
    check_desispec_options(args);
    check_option_values(args);

    const GaussHermitePsf psf = value_or_exit(read_psf(args.psf), kExitInput);
    exit_on_error(validate_options(psf, args.opt), kExitUsage);
    check_output_folder(args.output, "frame");
    check_output_folder(args.model, "model");
    check_output_folder(args.timingfile, "timing");
    std::shared_ptr<const FibermapColumns> fibermap_columns;
    if (!args.fibermap_columns.empty()) {
        fibermap_columns = std::make_shared<const FibermapColumns>(
            value_or_exit(read_fibermap_columns_json(args.fibermap_columns), kExitInput));
    }

    // Header, shapes and fibermap first: every check that needs no pixel runs before the
    // pixels are read.
    const PreprocImage meta = value_or_exit(read_preproc_metadata(args.input), kExitInput);
    const FitsTableBlob fibermap = args.fibermap.empty()
                                       ? meta.fibermap
                                       : value_or_exit(read_fibermap(args.fibermap), kExitInput);
    check_image(args, meta, psf, fibermap);
    const std::optional<BadColumnStep> badcolumn_step = read_badcolumn_step(args, meta.header);
    const std::string ids = header_id(meta);
    auto backend = make_backend_or_exit(args.backend);

    // desispec extracts on the observed grid divided by the barycentric factor and labels the
    // result with the grid asked for, writing HELIOCOR.
    ExtractionOptions labelled = args.opt;
    FitsHeader image_header = meta.header;
    if (args.barycentric) {
        const BarycentricCorrection bc =
            value_or_exit(exposure_barycentric_correction(meta.header, fibermap), kExitInput);
        if (args.opt.wmin <= 0 || args.opt.wmax <= 0) {
            const WaveGrids grids = make_wave_grids(psf, args.opt);
            args.opt.wmin = grids.wave.front();
            args.opt.wmax = grids.wave.back();
        }
        labelled = args.opt;
        args.opt.wmin /= bc.factor;
        args.opt.wmax /= bc.factor;
        args.opt.dw /= bc.factor;
        set_heliocor(image_header, bc.factor);
        logger()->info("barycentric correction {} v={:.6f} km/s HELIOCOR={:.15f}", ids,
                       bc.velocity_km_s, bc.factor);
    }
    // Several processes on one frame (RunContext::share): this one extracts its share of the
    // bundles, and the one that writes merges every part.
    FrameShare* const share = run_context().share;
    ExtractionOptions extracted = args.opt;
    if (share != nullptr) {
        const BundleShare mine = share->bundles(args.opt.nspec / args.opt.bundlesize);
        if (mine.count <= 0) throw std::logic_error("a frame share without a bundle");
        extracted.specmin = args.opt.specmin + mine.first * args.opt.bundlesize;
        extracted.nspec = mine.count * args.opt.bundlesize;
    }
    // The CPU reads only the columns its patches use: a one-bundle run then needs a tenth of
    // the frame's memory and reading.
    const ColumnRange columns =
        backend->name() == "cpu" ? extracted_columns(psf, extracted) : ColumnRange{};
    PreprocImage img =
        value_or_exit(read_preproc(args.input, columns, PreprocPlanes::extraction), kExitInput);
    const LargeArray<double> weights = img.take_weights();
    const ImageView view{img.ny,         img.ccd_width(), img.image.data(),
                         weights.data(), img.col_begin,   img.nx};
    const double t_read = std::chrono::duration<double>(Clock::now() - t_start).count();
    timer["read"].stop_unix = timer["extract"].start_unix = unix_now();
    logger()->info("extract start {} input={} psf={} backend={} specmin={} nspec={}", ids,
                   args.input, args.psf, backend->name(), extracted.specmin, extracted.nspec);
    const auto t_extract = Clock::now();
    const double cpu_before = process_cpu_seconds();
    ExtractionProgress progress("extract " + ids);
    ExtractedFrame frame = value_or_exit(
        extract_frame(view, psf, extracted, *backend, progress.callback(), run_context().cancel),
        kExitRuntime);
    progress.finish();
    if (share != nullptr) {
        std::optional<std::vector<ExtractedFrame>> parts = share->gather(std::move(frame));
        if (!parts) {
            timer["extract"].stop_unix = unix_now();
            if (run_context().steps != nullptr) *run_context().steps = timer;
            logger()->info("extract part done {} specmin={} nspec={} (another process writes {})",
                           ids, extracted.specmin, extracted.nspec, args.output);
            return;
        }
        frame = value_or_exit(merge_frame_parts(std::move(*parts)), kExitRuntime);
    }
    const double extract_seconds = std::chrono::duration<double>(Clock::now() - t_extract).count();
    const double extract_cpu = process_cpu_seconds() - cpu_before;
    timer["extract"].stop_unix = unix_now();

    if (args.barycentric) frame.wave = wavelength_grid(labelled.wmin, labelled.wmax, labelled.dw);
    FrameProvenance prov;
    prov.image_header = image_header;
    prov.fibermap = fibermap;
    if (badcolumn_step) apply_badcolumn_step(args, *badcolumn_step, psf, frame, prov.fibermap);
    prov.psf_header = psf.psf_header;
    prov.input_image = args.input;
    prov.input_psf = args.psf;
    prov.options = labelled;
    prov.write_scores = !args.no_scores;
    prov.fibermap_columns = fibermap_columns;
    const auto t_write = Clock::now();
    timer["write"].start_unix = unix_now();
    write_outputs(args, frame, prov);
    timer["write"].stop_unix = unix_now();
    if (run_context().steps != nullptr) *run_context().steps = timer;
    const double write_seconds = std::chrono::duration<double>(Clock::now() - t_write).count();
    if (!args.timingfile.empty()) {
        exit_on_error(record_step_timings(args.timingfile, {timer}, {"read", "extract", "write"}),
                      kExitOutput);
    }

    const StageTimes& st = frame.stage_times;
    logger()->info(
        "extract done {} output={} patches={} retried={} failed={} read_s={:.2f} extract_s={:.2f} "
        "extract_cpu_s={:.2f} write_s={:.2f} stage_s: psf={:.2f} build={:.2f} solve={:.2f} "
        "decorrelate={:.2f} chi2={:.2f}",
        ids, args.output, frame.npatch, frame.npatch_retried, frame.npatch_failed, t_read,
        extract_seconds, extract_cpu, write_seconds, st.psf, st.build, st.solve, st.decorrelate,
        st.chi2);
}

}  // namespace

void add_extract_command(CLI::App& app)
{
    auto args = std::make_shared<ExtractArgs>();
    args->backend.name = "auto";
    CLI::App* cmd = app.add_subcommand(
        "extract",
        "Extract spectra from a preproc frame into a desispec frame file "
        "(options as desi_extract_spectra; installed under that name it runs this)");
    cmd->add_option("-i,--input", args->input, "Preproc file (IMAGE, IVAR, MASK, FIBERMAP)")
        ->required();
    cmd->add_option("-f,--fibermap", args->fibermap,
                    "Fibermap file (its FIBERMAP HDU; default: the input's FIBERMAP HDU)");
    cmd->add_option("-p,--psf", args->psf, "Gauss-Hermite PSF file (PSFVER 3)")->required();
    cmd->add_option("-o,--output", args->output, "Frame file to write (.fits or .fits.gz)")
        ->required();
    cmd->add_option("-m,--model", args->model, "Also write the 2-D model image A . xflux here");
    add_extraction_options(*cmd, args->opt, args->wavelength);
    add_backend_options(*cmd, args->backend);
    cmd->add_flag("--no-gpu", args->no_gpu,
                  "Run on the CPU even where a GPU is found (also: $DESI_NO_GPU set)");
    cmd->add_flag("-v,--verbose", args->verbose, "Debug log level");
    cmd->add_flag("--barycentric-correction", args->barycentric,
                  "Extract on the barycentric grid and write HELIOCOR, as desispec does");
    cmd->add_flag("--mpi", args->mpi, "Accepted for desi_extract_spectra; ignored (threads)");
    cmd->add_option("--badcolumns", args->badcolumns,
                    "Apply desi_proc's bad-column mask from this calibnight badcolumns CSV "
                    "(MASK bit BADCOLUMN, FIBERSTATUS BADAMP; default: no such step)");
    cmd->add_option("--badcolumn-threshold", args->badcolumn_thresholds.elec_per_sec,
                    "Bias in electrons/s that masks a bin (desi_compute_badcolumn_mask "
                    "--threshold-elec-per-sec)")
        ->default_val(0.005);
    cmd->add_option("--badcolumn-frac-threshold", args->badcolumn_thresholds.fiber_fraction,
                    "Share of a fibre's bins with BADCOLUMN that sets BADAMP in FIBERSTATUS "
                    "(desi_compute_badcolumn_mask --frac-threshold)")
        ->default_val(0.4);
    cmd->add_option("--timingfile", args->timingfile,
                    "Add the read, extract and write steps' timings to this JSON file, in "
                    "desi_proc's --timingfile form (desiutil.timer statistics; an existing "
                    "file keeps its other steps)");
    cmd->add_option("--fibermap-columns", args->fibermap_columns,
                    "Units and descriptions for the FIBERMAP's known columns, a JSON list "
                    "(python3 -m ex2d_desi.fibermap_columns exports desispec's; default: "
                    "ex2d's table, same units)");
    cmd->add_flag("--no-scores", args->no_scores, "Do not compute and write the SCORES HDU");
    cmd->add_flag("--use-specter", args->use_specter, "Refused: ex2d is gpu_specter's algorithm");
    cmd->add_flag("--decorrelate-fibers", args->decorrelate_fibers,
                  "Refused: not part of gpu_specter's extraction");
    CLI::Option* psferr = cmd->get_option("--psferr");
    cmd->callback([args, psferr] {
        args->psferr_given = psferr->count() > 0;
        run_extract(*args);
    });
}

}  // namespace ex2d::tool
