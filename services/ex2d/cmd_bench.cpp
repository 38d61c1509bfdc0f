// SPDX-License-Identifier: BSD-3-Clause
// ex2d bench: extraction speed and memory on a full simulated frame, with its accuracy.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include "cli_support.hpp"
#include "ex2d/accuracy.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"

namespace ex2d::tool {

namespace {

// DESI's CPU code (gpu_specter on NumPy/OpenBLAS, one thread) on this kind of machine:
// about 55 core-seconds per 25-fibre r bundle, 1100 per r frame (issue 2's anchor).
constexpr double kAnchorCoreSecondsPerRFrame = 1100.0;

struct BenchArgs {
    std::string psf, camera = "r0", backend = "cpu", wavelength;
    int threads = 0;
    int nspec = 500;
    int repeat = 1;
    unsigned long seed = 42;
};

void run_bench(BenchArgs& args)
{
    using Clock = std::chrono::steady_clock;
    const Arm arm = value_or_exit(parse_arm(args.camera));
    const ArmDefaults defaults = arm_defaults(arm);
    const GaussHermitePsf psf =
        args.psf.empty() ? make_synthetic_psf(arm, 0) : value_or_exit(read_psf(args.psf));
    ExtractionOptions opt;
    opt.wmin = defaults.wmin;
    opt.wmax = defaults.wmax;
    opt.dw = defaults.dw;
    parse_wavelength_option(args.wavelength, opt.wmin, opt.wmax, opt.dw);
    opt.nspec = args.nspec;

    SimulationOptions sim;
    sim.seed = args.seed;
    sim.nspec = args.nspec;
    sim.wmin = opt.wmin;
    sim.wmax = opt.wmax;
    sim.dw = opt.dw;
    sim.camera = args.camera;
    logger()->info("bench simulating camera={} nspec={} psf={}", args.camera, args.nspec, psf.source);
    const SimulatedFrame simulated = value_or_exit(simulate_frame(psf, sim));
    const std::vector<double> weights = simulated.preproc.weights();
    const ImageView view{simulated.preproc.ny, simulated.preproc.nx,
                         simulated.preproc.image.data(), weights.data()};
    auto backend = value_or_exit(make_backend(args.backend, args.threads));

    const double rss_before_extraction = current_rss_mib();
    ExtractedFrame frame;
    double wall = 0, cpu = 0;
    for (int r = 0; r < args.repeat; ++r) {
        const auto t0 = Clock::now();
        const double c0 = process_cpu_seconds();
        ExtractionProgress progress("bench");
        frame = value_or_exit(extract_frame(view, psf, opt, *backend, progress.callback()));
        progress.finish();
        wall = std::chrono::duration<double>(Clock::now() - t0).count();
        cpu = process_cpu_seconds() - c0;
    }

    // Accuracy of the same frame, through the file writer and reader as a user would see it.
    const std::string tmp = (std::filesystem::temp_directory_path() /
                             ("ex2d-bench-" + std::to_string(::getpid()) + ".fits")).string();
    FrameProvenance prov;
    prov.image_header = simulated.preproc.header;
    prov.fibermap = simulated.preproc.fibermap;
    prov.options = opt;
    const auto tw = Clock::now();
    exit_on_error(write_frame(tmp, frame, prov));
    const double write_seconds = std::chrono::duration<double>(Clock::now() - tw).count();
    const FrameFile written = value_or_exit(read_frame(tmp));
    std::filesystem::remove(tmp);
    const PullStatistics pulls = value_or_exit(pull_statistics(written, simulated.truth));

    const StageTimes& st = frame.stage_times;
    const double frame_scale = 500.0 / args.nspec;
    std::printf("ex2d bench: backend=%s threads=%d camera=%s psf=%s\n", backend->name().c_str(),
                args.threads, args.camera.c_str(), psf.source.c_str());
    std::printf("  frame                  %d fibres x %d bins, %ld patches\n", frame.nspec,
                frame.nwave, frame.npatch);
    std::printf("  wall seconds           %.2f\n", wall);
    std::printf("  core-seconds           %.1f (process CPU time)\n", cpu);
    std::printf("  core-seconds per frame %.1f (scaled to 500 fibres)\n", cpu * frame_scale);
    std::printf("  patches per second     %.0f wall, %.1f per core\n", frame.npatch / wall,
                frame.npatch / cpu);
    std::printf("  peak memory            %.0f MiB resident; %.0f MiB before extraction (simulated "
                "frame and PSF), so extraction adds at most %.0f MiB\n", peak_rss_mib(),
                rss_before_extraction, peak_rss_mib() - rss_before_extraction);
    std::printf("  stage core-seconds     psf %.1f, build %.1f, solve %.1f, decorrelate %.1f, "
                "chi2 %.1f\n", st.psf, st.build, st.solve, st.decorrelate, st.chi2);
    std::printf("  frame write seconds    %.2f\n", write_seconds);
    std::printf("  frames per node-hour   %.0f on this machine\n", 3600.0 / (wall * frame_scale));
    std::printf("  vs DESI CPU anchor     %.1fx less core time than ~%.0f core-s per r frame\n",
                kAnchorCoreSecondsPerRFrame / (cpu * frame_scale), kAnchorCoreSecondsPerRFrame);
    std::printf("  patches retried/failed %ld / %ld\n", frame.npatch_retried, frame.npatch_failed);
    std::printf("  pulls                  mean %+.4f, std %.4f, |pull|>5 fraction %.1e over %ld bins\n",
                pulls.mean, pulls.stddev, pulls.frac_beyond_5, pulls.n);
    std::printf("  median chi2pix         %.3f\n", pulls.median_chi2pix);
}

}  // namespace

void add_bench_command(CLI::App& app)
{
    auto args = std::make_shared<BenchArgs>();
    CLI::App* cmd = app.add_subcommand(
        "bench", "Benchmark: simulate a full frame and extract it; prints seconds, core-seconds, "
                 "patches per second, peak memory, a split by stage and the accuracy");
    cmd->add_option("-p,--psf", args->psf, "PSF file (default: a synthetic PSF of --camera)");
    cmd->add_option("--camera", args->camera, "Camera whose grid and CCD to use: b0..z9")
        ->capture_default_str();
    cmd->add_option("-w,--wavelength", args->wavelength, "Grid 'wmin,wmax,dw' (default: desi_proc's)");
    cmd->add_option("-n,--nspec", args->nspec, "Fibres to simulate and extract")->capture_default_str();
    cmd->add_option("--threads", args->threads, "Worker threads (default: all cores)");
    cmd->add_option("--backend", args->backend, "cpu or cuda")->capture_default_str();
    cmd->add_option("--repeat", args->repeat, "Extractions; the last is reported (warm-up)")
        ->capture_default_str();
    cmd->add_option("--seed", args->seed, "Simulation seed")->capture_default_str();
    cmd->callback([args] { run_bench(*args); });
}

}  // namespace ex2d::tool
