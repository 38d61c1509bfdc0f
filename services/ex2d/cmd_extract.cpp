// SPDX-License-Identifier: BSD-3-Clause
// ex2d extract: desi_extract_spectra's interface on the ex2d engine.
#include <chrono>
#include <memory>

#include "cli_support.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"

namespace ex2d::tool {

namespace {

struct ExtractArgs {
    std::string input, psf, output, model, wavelength;
    BackendChoice backend;
    ExtractionOptions opt;
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

void run_extract(ExtractArgs& args)
{
    using Clock = std::chrono::steady_clock;
    const auto t_start = Clock::now();
    parse_wavelength_option(args.wavelength, args.opt.wmin, args.opt.wmax, args.opt.dw);
    args.opt.want_model = !args.model.empty();

    const GaussHermitePsf psf = value_or_exit(read_psf(args.psf));
    const PreprocImage img = value_or_exit(read_preproc(args.input));
    const std::string ids = header_id(img);
    if (img.ny != psf.npix_y || img.nx != psf.npix_x) {
        throw CommandExit(1, "format error: " + args.input + ": image is " + std::to_string(img.nx) +
                                 " x " + std::to_string(img.ny) + " pixels but PSF " + args.psf +
                                 " is for a " + std::to_string(psf.npix_x) + " x " +
                                 std::to_string(psf.npix_y) + " CCD");
    }
    const double t_read = std::chrono::duration<double>(Clock::now() - t_start).count();

    auto backend = make_backend_or_exit(args.backend);
    const std::vector<double> weights = img.weights();
    const ImageView view{img.ny, img.nx, img.image.data(), weights.data()};
    logger()->info("extract start {} input={} psf={} backend={} specmin={} nspec={}", ids,
                   args.input, args.psf, backend->name(), args.opt.specmin, args.opt.nspec);
    const auto t_extract = Clock::now();
    const double cpu_before = process_cpu_seconds();
    ExtractionProgress progress("extract " + ids);
    ExtractedFrame frame =
        value_or_exit(extract_frame(view, psf, args.opt, *backend, progress.callback()));
    progress.finish();
    const double extract_seconds = std::chrono::duration<double>(Clock::now() - t_extract).count();
    const double extract_cpu = process_cpu_seconds() - cpu_before;

    FrameProvenance prov;
    prov.image_header = img.header;
    prov.fibermap = img.fibermap;
    prov.psf_header = psf.psf_header;
    prov.input_image = args.input;
    prov.input_psf = args.psf;
    prov.options = args.opt;
    const auto t_write = Clock::now();
    exit_on_error(write_frame(args.output, frame, prov));
    if (!args.model.empty()) exit_on_error(write_model_image(args.model, frame, prov));
    const double write_seconds = std::chrono::duration<double>(Clock::now() - t_write).count();

    const StageTimes& st = frame.stage_times;
    logger()->info(
        "extract done {} output={} patches={} retried={} failed={} read_s={:.2f} extract_s={:.2f} "
        "extract_cpu_s={:.1f} write_s={:.2f} stage_s: psf={:.1f} build={:.1f} solve={:.1f} "
        "decorrelate={:.1f} chi2={:.1f}",
        ids, args.output, frame.npatch, frame.npatch_retried, frame.npatch_failed, t_read,
        extract_seconds, extract_cpu, write_seconds, st.psf, st.build, st.solve, st.decorrelate,
        st.chi2);
}

}  // namespace

void add_extract_command(CLI::App& app)
{
    auto args = std::make_shared<ExtractArgs>();
    CLI::App* cmd = app.add_subcommand(
        "extract", "Extract spectra from a preproc frame into a desispec frame file "
                   "(options as desi_extract_spectra)");
    cmd->add_option("-i,--input", args->input, "Preproc file (IMAGE, IVAR, MASK, FIBERMAP)")
        ->required();
    cmd->add_option("-p,--psf", args->psf, "Gauss-Hermite PSF file (PSFVER 3)")->required();
    cmd->add_option("-o,--output", args->output, "Frame file to write (.fits or .fits.gz)")
        ->required();
    cmd->add_option("-m,--model", args->model, "Also write the 2-D model image A . xflux here");
    add_extraction_options(*cmd, args->opt, args->wavelength);
    add_backend_options(*cmd, args->backend);
    cmd->callback([args] { run_extract(*args); });
}

}  // namespace ex2d::tool
