// SPDX-License-Identifier: BSD-3-Clause
// ex2d simulate: a preproc frame forward-modelled from a PSF and synthetic spectra, with truth.
#include <cctype>
#include <chrono>
#include <memory>
#include <string>

#include "cli_support.hpp"
#include "ex2d/input_checks.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/trace_shift_io.hpp"

namespace ex2d::tool {

namespace {

struct SimulateArgs {
    std::string psf, output, truth, wavelength;
    std::string badcolumns_out;  ///< calibnight badcolumns CSV to write; empty: none
    std::string sky_spectrum;    ///< tabulated night sky to use; empty: ex2d's lines
    bool no_noise = false;
    SimulationOptions opt;
};

bool is_camera_name(const std::string& text)
{
    return text.size() == 2 && (text[0] == 'b' || text[0] == 'r' || text[0] == 'z') &&
           std::isdigit(static_cast<unsigned char>(text[1]));
}

/// The PSF's CAMERA card without the quotes specex leaves inside the string ("'r0'").
std::string psf_camera(const GaussHermitePsf& psf)
{
    std::string camera;
    for (char ch : psf.psf_header.get_string("CAMERA").value_or("")) {
        if (std::isalnum(static_cast<unsigned char>(ch))) {
            camera += char(std::tolower(static_cast<unsigned char>(ch)));
        }
    }
    return camera;
}

void run_simulate(SimulateArgs& args, bool camera_given)
{
    const auto t_start = std::chrono::steady_clock::now();
    exit_on_usage_error(
        parse_wavelength_option(args.wavelength, args.opt.wmin, args.opt.wmax, args.opt.dw));
    args.opt.noise = !args.no_noise;

    if (!args.sky_spectrum.empty()) {
        TabulatedSpectrum sky = value_or_exit(read_tabulated_spectrum(args.sky_spectrum));
        args.opt.sky_spectrum_wave = std::move(sky.wave);
        args.opt.sky_spectrum_flux = std::move(sky.flux);
    }
    const GaussHermitePsf psf = value_or_exit(read_psf(args.psf));
    if (!camera_given) {
        const std::string camera = psf_camera(psf);
        if (is_camera_name(camera)) args.opt.camera = camera;
    }
    if (!is_camera_name(args.opt.camera)) {
        throw CommandExit(2, "--camera must be b0..z9, got '" + args.opt.camera + "'");
    }
    if (args.opt.nspec < 0) args.opt.nspec = psf.nspec() - args.opt.specmin;

    const SimulatedFrame frame = value_or_exit(simulate_frame(psf, args.opt));
    exit_on_error(write_preproc(args.output, frame.preproc), kExitOutput);
    exit_on_error(write_truth(args.truth, frame.truth), kExitOutput);
    if (!args.badcolumns_out.empty()) {
        const BadColumns table = simulated_badcolumns(psf, args.opt);
        exit_on_error(write_badcolumns_csv(args.badcolumns_out, table, args.opt.camera),
                      kExitOutput);
        logger()->info("simulate badcolumns file={} columns={}", args.badcolumns_out,
                       table.column.size());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    logger()->info(
        "simulate done camera={} expid={} night={} seed={} fibers={}-{} nwave={} "
        "output={} truth={} noise={} seconds={:.1f}",
        args.opt.camera, args.opt.expid, args.opt.night, args.opt.seed, args.opt.specmin,
        args.opt.specmin + args.opt.nspec - 1, frame.truth.wave.size(), args.output, args.truth,
        args.opt.noise ? "yes" : "no", seconds);
}

}  // namespace

void add_simulate_command(CLI::App& app)
{
    auto args = std::make_shared<SimulateArgs>();
    args->opt.nspec = -1;
    SimulationOptions& opt = args->opt;
    CLI::App* cmd = app.add_subcommand(
        "simulate",
        "Simulate a preproc frame from a PSF and synthetic spectra (sky, galaxies, "
        "stars), with Poisson and read noise, and write the true photons per bin");
    cmd->add_option("-p,--psf", args->psf, "Gauss-Hermite PSF file (PSFVER 3)")->required();
    cmd->add_option("-o,--output", args->output, "Preproc file to write")->required();
    cmd->add_option("--truth", args->truth,
                    "Truth file to write: photons per bin of the lit fibres on the -w grid")
        ->required();
    cmd->add_option("--seed", opt.seed, "Random seed; the same seed gives the same frame")
        ->capture_default_str();
    cmd->add_option("-s,--specmin", opt.specmin, "First lit fibre")->capture_default_str();
    cmd->add_option("-n,--nspec", opt.nspec,
                    "Number of lit fibres; the others stay dark (default: all from specmin)");
    cmd->add_option("-w,--wavelength", args->wavelength,
                    "Truth grid 'wmin,wmax,dw' in Angstrom (default: the PSF HDU's "
                    "WAVEMIN,WAVEMAX with dw 0.8); light is simulated over the whole CCD");
    auto* camera = cmd->add_option(
        "--camera", opt.camera, "Camera in the IMAGE header (default: the PSF's CAMERA, else r0)");
    cmd->add_option("--expid", opt.expid, "Exposure id (EXPID)")->capture_default_str();
    cmd->add_option("--night", opt.night, "Observing night YYYYMMDD (NIGHT)")
        ->capture_default_str();
    cmd->add_option("--read-noise", opt.read_noise, "Read noise in electrons per pixel")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--sky-level", opt.sky_level, "Scale of the sky continuum and lines")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--sky-spectrum", args->sky_spectrum,
                    "Night-sky lines from a spectrum file (rows 'wavelength flux', vacuum A, as "
                    "desispec's spec-sky.dat) in place of ex2d's list, with as many electrons")
        ->check(CLI::ExistingFile);
    cmd->add_flag("--no-noise", args->no_noise,
                  "Write the expected image without Poisson or read noise (ivar unchanged)");
    cmd->add_option("--bright-stars", opt.n_bright_stars,
                    "Number of bright stars (50-200x brighter) among the targets")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--cosmics", opt.n_cosmics, "Number of cosmic-ray tracks (mask bit COSMIC)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--badcolumns-out", args->badcolumns_out,
                    "Also write a calibnight badcolumns CSV (COLUMN, ELEC_PER_SEC) for "
                    "desi_proc's bad-column step: a strong column on a trace, one between two "
                    "fibres, one too weak to mask");
    cmd->add_option("--bad-columns", opt.n_bad_columns, "Number of bad columns (mask bit BAD)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->callback([args, camera] { run_simulate(*args, camera->count() > 0); });
}

}  // namespace ex2d::tool
