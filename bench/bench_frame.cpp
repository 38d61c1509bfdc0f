// SPDX-License-Identifier: BSD-3-Clause
#include "bench_frame.hpp"

#include <cmath>
#include <random>

#include "ex2d/extraction.hpp"
#include "ex2d/extraction_backend.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"

namespace ex2d::bench {

namespace {

constexpr int kNspec = 500;

ExtractionOptions r_grid()
{
    const ArmDefaults d = arm_defaults(Arm::r);
    ExtractionOptions opt;
    opt.wmin = d.wmin;
    opt.wmax = d.wmax;
    opt.dw = d.dw;
    opt.nspec = kNspec;
    return opt;
}

std::vector<double> grid_of(const ExtractionOptions& opt)
{
    std::vector<double> wave;
    for (int j = 0; opt.wmin + j * opt.dw <= opt.wmax + 1e-9; ++j)
        wave.push_back(opt.wmin + j * opt.dw);
    return wave;
}

/// Values drawn like an extraction's: compression ratios depend on the float mantissas, so
/// constants or ramps would flatter every compressor.
ExtractedFrame synthetic_frame(unsigned long seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    std::chi_squared_distribution<double> chi2(1.0);
    ExtractedFrame f;
    f.nspec = kNspec;
    f.wave = grid_of(r_grid());
    f.nwave = int(f.wave.size());
    f.ndiag = 11;
    const size_t n = size_t(f.nspec) * size_t(f.nwave);
    f.flux.resize(n);
    f.ivar.resize(n);
    f.mask.assign(n, 0);
    f.chi2pix.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const double sigma = 3.0 + 0.5 * std::abs(normal(rng));
        f.flux[i] =
            40.0 + 20.0 * std::sin(double(i % size_t(f.nwave)) * 1e-3) + sigma * normal(rng);
        f.ivar[i] = 1.0 / (sigma * sigma);
        f.chi2pix[i] = chi2(rng);
        if (rng() % 2000 == 0) f.mask[i] = specmask::somebadpix;
    }
    f.resolution.resize(n * size_t(f.ndiag));
    for (int s = 0; s < f.nspec; ++s) {
        for (int w = 0; w < f.nwave; ++w) {
            // A normalised Gaussian line spread whose width drifts along the trace.
            const double width = 1.0 + 0.3 * std::sin(0.002 * w + 0.01 * s) + 0.01 * normal(rng);
            double sum = 0;
            double row[11];
            for (int d = 0; d < 11; ++d)
                sum += row[d] = std::exp(-0.5 * std::pow((d - 5) / width, 2));
            for (int d = 0; d < 11; ++d) {
                f.resolution[(size_t(s) * 11 + size_t(d)) * size_t(f.nwave) + size_t(w)] =
                    row[d] / sum;
            }
        }
    }
    return f;
}

FitsHeader bench_header()
{
    FitsHeader h;
    h.set_string("CAMERA", "r0");
    h.set_int("EXPID", 1);
    h.set_int("NIGHT", 20261125);
    h.set_string("FLAVOR", "science");
    return h;
}

Result<ExtractedFrame> frame_from_file(const std::string& path, FitsHeader& header)
{
    EX2D_ASSIGN_OR_RETURN(FrameFile file, read_frame(path));
    ExtractedFrame f;
    f.nspec = file.nspec;
    f.nwave = file.nwave;
    f.ndiag = file.ndiag;
    f.wave = std::move(file.wave);
    f.flux = std::move(file.flux);
    f.ivar = std::move(file.ivar);
    f.mask = std::move(file.mask);
    f.chi2pix = std::move(file.chi2pix);
    f.resolution.assign(file.resolution.begin(), file.resolution.end());
    header = file.header;
    return f;
}

Result<ExtractedFrame> extracted_frame(const FrameSource& source, service::FrameOutputs& out)
{
    EX2D_ASSIGN_OR_RETURN(GaussHermitePsf psf, read_psf(source.psf));
    const ExtractionOptions opt = r_grid();
    SimulationOptions sim;
    sim.nspec = kNspec;
    sim.wmin = opt.wmin;
    sim.wmax = opt.wmax;
    sim.dw = opt.dw;
    sim.camera = "r0";
    sim.night = 20261125;
    logger()->info("simulating and extracting a full r0 frame with {} (about a minute)",
                   source.psf);
    EX2D_ASSIGN_OR_RETURN(SimulatedFrame simulated, simulate_frame(psf, sim));
    const LargeArray<double> weights = simulated.preproc.weights();
    const ImageView view{simulated.preproc.ny, simulated.preproc.nx, simulated.preproc.image.data(),
                         weights.data()};
    auto backend = make_cpu_backend(source.threads);
    EX2D_ASSIGN_OR_RETURN(ExtractedFrame frame, extract_frame(view, psf, opt, *backend));
    out.image_header = simulated.preproc.header;
    out.fibermap = simulated.preproc.fibermap;
    out.options = opt;
    return frame;
}

}  // namespace

Result<service::FrameOutputs> make_bench_frame(const FrameSource& source, const std::string& dir)
{
    service::FrameOutputs out;
    out.options = r_grid();
    out.image_header = bench_header();
    ExtractedFrame frame;
    if (!source.frame.empty()) {
        EX2D_ASSIGN_OR_RETURN(frame, frame_from_file(source.frame, out.image_header));
    } else if (!source.psf.empty()) {
        EX2D_ASSIGN_OR_RETURN(frame, extracted_frame(source, out));
    } else {
        frame = synthetic_frame(source.seed);
    }
    // What a worker sends: the file's precision, SCORES already computed.
    out.frame = to_stored_frame(frame, out.options.dw);
    // The job is whatever the frame's header says it is, so the writer's identity check holds.
    out.job.camera = "r0";
    out.job.expid = "00000001";
    out.job.night = "20261125";
    if (auto expid = out.image_header.get_int("EXPID")) {
        char text[16];
        std::snprintf(text, sizeof text, "%08lld", *expid);
        out.job.expid = text;
    }
    if (auto night = out.image_header.get_int("NIGHT")) out.job.night = std::to_string(*night);
    if (auto camera = out.image_header.get_string("CAMERA")) {
        out.job.camera = camera->substr(0, camera->find(' '));
    }
    out.job.campaign = "bench";
    out.job.job = "bench/" + out.job.expid + "/" + out.job.camera;
    out.job.output = dir + "/frame-" + out.job.camera + "-" + out.job.expid;
    out.job.preproc = "preproc-" + out.job.camera + "-" + out.job.expid + ".fits";
    out.job.psf = source.psf.empty() ? "psf.fits" : source.psf;
    return out;
}

}  // namespace ex2d::bench
