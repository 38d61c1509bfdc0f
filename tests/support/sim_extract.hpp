// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Simulate-then-extract helpers for physics tests.

#include <string>

#include <gtest/gtest.h>

#include "ex2d/accuracy.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/simulate.hpp"
#include "test_paths.hpp"

namespace ex2d::test {

struct SimExtract {
    SimulatedFrame sim;
    ExtractedFrame frame;
    FrameFile written;  ///< the frame after write_frame + read_frame
    PullStatistics pulls;
};

/// Extraction options on DESI's r grid (5760-7620 A by 0.8) for fibres [specmin, specmin+nspec).
inline ExtractionOptions r_grid_options(int specmin, int nspec)
{
    ExtractionOptions opt;
    opt.wmin = 5760.0;
    opt.wmax = 7620.0;
    opt.dw = 0.8;
    opt.specmin = specmin;
    opt.nspec = nspec;
    return opt;
}

/// Simulator settings for the fibres and grid of extraction options `opt`.
inline SimulationOptions simulation_for(const ExtractionOptions& opt, std::uint64_t seed)
{
    SimulationOptions sim;
    sim.seed = seed;
    sim.specmin = opt.specmin;
    sim.nspec = opt.nspec;
    sim.wmin = opt.wmin;
    sim.wmax = opt.wmax;
    sim.dw = opt.dw;
    return sim;
}

/// Simulates fibres [specmin, specmin+nspec) on grid `opt` and extracts them on the CPU; the
/// frame goes through the writer and reader so the pulls are those a user would measure.
inline SimExtract simulate_and_extract(const GaussHermitePsf& psf, ExtractionOptions opt,
                                       std::uint64_t seed, int nthreads = 2)
{
    SimExtract out;
    auto simulated = simulate_frame(psf, simulation_for(opt, seed));
    EXPECT_TRUE(simulated.is_ok()) << simulated.status().to_string();
    out.sim = std::move(simulated).value();
    const LargeArray<double> weights = out.sim.preproc.weights();
    const ImageView view{out.sim.preproc.ny, out.sim.preproc.nx, out.sim.preproc.image.data(),
                         weights.data()};
    auto backend = make_cpu_backend(nthreads);
    auto frame = extract_frame(view, psf, opt, *backend);
    EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
    out.frame = std::move(frame).value();
    TempDir dir;
    FrameProvenance prov;
    prov.image_header = out.sim.preproc.header;
    prov.fibermap = out.sim.preproc.fibermap;
    prov.options = opt;
    const std::string path = dir.file("frame.fits");
    const Status written = write_frame(path, out.frame, prov);
    EXPECT_TRUE(written.is_ok()) << written.to_string();
    auto file = read_frame(path);
    EXPECT_TRUE(file.is_ok()) << file.status().to_string();
    out.written = std::move(file).value();
    auto pulls = pull_statistics(out.written, out.sim.truth);
    EXPECT_TRUE(pulls.is_ok()) << pulls.status().to_string();
    if (pulls.is_ok()) out.pulls = pulls.value();
    return out;
}

}  // namespace ex2d::test
