// SPDX-License-Identifier: BSD-3-Clause
// ex2d make-psf: a synthetic Gauss-Hermite PSF for a b, r or z camera.
#include <cstdio>
#include <memory>
#include <string>

#include "cli_support.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/synthetic_psf.hpp"

namespace ex2d::tool {

namespace {

struct MakePsfArgs {
    std::string arm;
    std::string camera;
    int petal = -1;
    std::string output;
    std::string from;
    int fibers = 0;
    std::string wave_range;
};

// --from PSF --fibers N --wave-range wmin,wmax: a small CCD with the first N fibres.
// --from PSF --camera C alone: the same PSF labelled as camera C.
void run_crop(const MakePsfArgs& args)
{
    const GaussHermitePsf in = value_or_exit(read_psf(args.from));
    GaussHermitePsf psf = in;
    if (args.fibers == 0 && args.wave_range.empty()) {
        if (args.camera.empty()) {
            throw CommandExit(2, "--from needs --fibers and --wave-range, or --camera alone");
        }
    } else {
        double wmin = 0, wmax = 0;
        if (std::sscanf(args.wave_range.c_str(), "%lf,%lf", &wmin, &wmax) != 2 || !(wmax > wmin)) {
            throw CommandExit(2, "--wave-range must be 'wmin,wmax' with wmax > wmin, got '" +
                                     args.wave_range + "'");
        }
        if (args.fibers < 1 || args.fibers > in.nspec()) {
            throw CommandExit(2, "--fibers must be 1-" + std::to_string(in.nspec()));
        }
        psf = crop_psf(in, args.fibers, wmin, wmax);
    }
    // --camera relabels the PSF, so one simulation PSF can stand for several cameras.
    if (!args.camera.empty()) psf.psf_header.set_string("CAMERA", args.camera, "camera");
    exit_on_error(write_psf(args.output, psf), kExitOutput);
    logger()->info("make-psf done from={} output={} fibers={} ccd={}x{}", args.from, args.output,
                   psf.nspec(), psf.npix_x, psf.npix_y);
}

void run_make_psf(const MakePsfArgs& args)
{
    if (!args.from.empty()) return run_crop(args);
    if (args.arm.empty() == args.camera.empty()) {
        throw CommandExit(2, "make-psf needs exactly one of --arm and --camera");
    }
    const std::string& arm_text = args.arm.empty() ? args.camera : args.arm;
    if (!args.arm.empty() && args.arm.size() != 1) {
        throw CommandExit(2, "--arm must be b, r or z, got '" + args.arm + "'");
    }
    const Arm arm = value_or_exit(parse_arm(arm_text), 2);
    int petal = args.petal;
    if (petal < 0) petal = args.camera.size() == 2 ? args.camera[1] - '0' : 0;
    if (petal > 9) throw CommandExit(2, "--petal must be 0-9, got " + std::to_string(petal));
    if (!args.camera.empty() && args.petal >= 0 && args.camera[1] - '0' != args.petal) {
        throw CommandExit(2, "--camera " + args.camera + " and --petal " +
                                 std::to_string(args.petal) + " disagree");
    }

    const GaussHermitePsf psf = make_synthetic_psf(arm, petal);
    exit_on_error(write_psf(args.output, psf), kExitOutput);
    const ArmDefaults d = arm_defaults(arm);
    logger()->info(
        "make-psf done camera={}{} output={} fibers={} ccd={}x{} wavemin={} wavemax={} "
        "psferr={}",
        arm_letter(arm), petal, args.output, psf.nspec(), psf.npix_x, psf.npix_y, d.psf_wavemin,
        d.psf_wavemax, psf.psferr);
}

}  // namespace

void add_make_psf_command(CLI::App& app)
{
    auto args = std::make_shared<MakePsfArgs>();
    CLI::App* cmd = app.add_subcommand(
        "make-psf",
        "Write a synthetic 500-fibre Gauss-Hermite PSF (PSFVER 3) resembling DESI's, "
        "for simulations and tests without DESI files");
    auto* arm = cmd->add_option("--arm", args->arm, "Spectrograph arm: b, r or z");
    auto* camera = cmd->add_option(
        "--camera", args->camera,
        "Camera, e.g. r0 (arm letter and petal digit); instead of --arm. With --from: the CAMERA "
        "written into the cut-down PSF");
    arm->excludes(camera);
    cmd->add_option("--petal", args->petal,
                    "Petal 0-9 written into the CAMERA card (default: the camera's digit, else 0)")
        ->check(CLI::Range(0, 9));
    cmd->add_option("-o,--output", args->output, "PSF file to write")->required();
    auto* from = cmd->add_option("--from", args->from,
                                 "Cut down this PSF instead (with --fibers and --wave-range)");
    from->excludes(arm);
    cmd->add_option("--fibers", args->fibers, "With --from: keep the first N fibres")->needs(from);
    cmd->add_option("--wave-range", args->wave_range,
                    "With --from: 'wmin,wmax' the small CCD must cover")
        ->needs(from);
    cmd->callback([args] { run_make_psf(*args); });
}

}  // namespace ex2d::tool
