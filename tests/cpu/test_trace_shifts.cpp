// SPDX-License-Identifier: BSD-3-Clause
// Trace shifts (issue 31, item 3): whole r frames simulated through shifted traces and
// measured against the unshifted PSF; the output traces must match the truth over every fibre
// and wavelength with rms <= 0.015 px and |mean| <= 0.01 px in x and y.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include <gtest/gtest.h>

#include "ex2d/accuracy.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/night_sky_lines.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "ex2d/trace_shift_io.hpp"
#include "masked_amplifier.hpp"
#include "shifted_traces.hpp"
#include "sim_extract.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

constexpr double kMaxRms = 0.015;
constexpr double kMaxMean = 0.01;

/// A science frame of `nspec` fibres on the r grid (5760-7620 A), as every case here simulates.
SimulationOptions r_frame(std::uint64_t seed, int nspec)
{
    SimulationOptions sim;
    sim.seed = seed;
    sim.nspec = nspec;
    sim.wmin = 5760.0;
    sim.wmax = 7620.0;
    return sim;
}

/// A simulated frame and the weights its view reads.
struct SimulatedView {
    SimulatedFrame frame;
    LargeArray<double> weights;
    ImageView view() const
    {
        const PreprocImage& img = frame.preproc;
        return ImageView{img.ny, img.nx, img.image.data(), weights.data()};
    }
};

SimulatedView simulate_view(const GaussHermitePsf& truth, const SimulationOptions& sim)
{
    auto frame = simulate_frame(truth, sim);
    EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
    SimulatedView out{std::move(frame).value(), {}};
    out.weights = out.frame.preproc.weights();
    return out;
}

/// desi_proc's science degrees: x and y shifts of degree 2 across fibres.
TraceShiftOptions science_degrees()
{
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degyx = 2;
    return opt;
}

struct Case {
    const char* name;
    test::ShiftOfColumn dx, dy;
    bool flat = false;
};

test::TraceErrors run_case(const GaussHermitePsf& psf, const Case& c, std::uint64_t seed)
{
    const GaussHermitePsf truth = test::shifted_psf(psf, c.dx, c.dy);
    SimulationOptions sim = r_frame(seed, psf.nspec());
    sim.flat = c.flat;
    const SimulatedView frame = simulate_view(truth, sim);
    TraceShiftOptions opt = science_degrees();
    if (!c.flat) opt.lines = night_sky_lines();
    auto result = measure_trace_shifts(frame.view(), psf, opt, c.name);
    EXPECT_TRUE(result.is_ok()) << result.status().to_string();
    if (!result.is_ok()) return {};
    const test::TraceErrors e =
        test::trace_errors(result.value().xtrace, result.value().ytrace, truth);
    std::printf("%-28s x: mean %+.4f rms %.4f   y: mean %+.4f rms %.4f   (%ld points)\n", c.name,
                e.mean_x, e.rms_x, e.mean_y, e.rms_y, e.n);
    EXPECT_LE(e.rms_x, kMaxRms) << c.name;
    EXPECT_LE(std::abs(e.mean_x), kMaxMean) << c.name;
    EXPECT_LE(e.rms_y, kMaxRms) << c.name;
    EXPECT_LE(std::abs(e.mean_y), kMaxMean) << c.name;
    return e;
}

const Case kCases[] = {
    {"science, no shift", [](double) { return 0.0; }, [](double) { return 0.0; }},
    {"science, constant", [](double) { return 0.35; }, [](double) { return -0.4; }},
    {"science, across fibres", [](double u) { return 0.2 + 0.3 * u - 0.25 * u * u; },
     [](double u) { return -0.15 + 0.35 * u + 0.2 * u * u; }},
    {"flat, across fibres", [](double u) { return -0.3 + 0.2 * u + 0.3 * u * u; },
     [](double) { return 0.0; }, true},
};

TEST(TraceShifts, RealPsfMatchesTruth)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto psf = read_psf(path);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    std::uint64_t seed = 31;
    for (const Case& c : kCases) run_case(psf.value(), c, seed++);
}

TEST(TraceShifts, SyntheticPsfMatchesTruth)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    run_case(psf, kCases[2], 7);
    run_case(psf, kCases[3], 8);
}

/// A night sky sampled every 0.1 A: each of ex2d's lines, with a weak neighbour 1.3 A to its
/// blue (as an OH Q1 line has its Q2 lines) of 1.5 % of the strongest line, under the 2 %
/// that makes a peak of a reference spectrum a line of its own: a blend the line list cannot
/// see and the spectrum has.
TabulatedSpectrum sky_with_unlisted_neighbours()
{
    TabulatedSpectrum sky;
    const double sigma = 0.15;  // A, a resolved atlas line
    for (double w = 5400.0; w <= 7900.0; w += 0.1) {
        double f = 0;
        for (const ReferenceLine& line : night_sky_lines()) {
            for (const auto& [center, strength] :
                 {std::pair{line.wave, line.strength}, std::pair{line.wave - 1.3, 1.5}}) {
                const double z = (w - center) / sigma;
                if (std::abs(z) < 8) f += strength * std::exp(-0.5 * z * z);
            }
        }
        sky.wave.push_back(w);
        sky.flux.push_back(f);
    }
    return sky;
}

// A reference spectrum (--spectrum) gives the prediction of each line's window from every
// sample near it, so a neighbour the lines miss is in the model as it is in the frame.
TEST(TraceShifts, ReferenceSpectrumModelsNeighboursTheLinesMiss)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const GaussHermitePsf truth = test::shifted_psf(
        psf, [](double) { return 0.2; }, [](double u) { return -0.3 + 0.2 * u; });
    const TabulatedSpectrum sky = sky_with_unlisted_neighbours();
    SimulationOptions sim = r_frame(41, psf.nspec());
    sim.sky_spectrum_wave = sky.wave;
    sim.sky_spectrum_flux = sky.flux;
    const SimulatedView frame = simulate_view(truth, sim);
    const ImageView view = frame.view();
    TraceShiftOptions opt = science_degrees();
    auto lines = lines_from_spectrum(sky.wave, sky.flux, "sky");
    ASSERT_TRUE(lines.is_ok()) << lines.status().to_string();
    opt.lines = lines.value();
    const auto listed = std::count_if(
        night_sky_lines().begin(), night_sky_lines().end(), [&](const ReferenceLine& l) {
            return l.wave > sky.wave.front() && l.wave < sky.wave.back();
        });
    EXPECT_EQ(long(opt.lines.size()), long(listed)) << "the neighbours are not lines";
    auto lines_only = measure_trace_shifts(view, psf, opt, "lines only");
    for (size_t i = 0; i < sky.wave.size(); ++i) opt.spectrum.push_back({sky.wave[i], sky.flux[i]});
    auto modelled = measure_trace_shifts(view, psf, opt, "spectrum");
    ASSERT_TRUE(lines_only.is_ok()) << lines_only.status().to_string();
    ASSERT_TRUE(modelled.is_ok()) << modelled.status().to_string();
    const test::TraceErrors e_lines =
        test::trace_errors(lines_only.value().xtrace, lines_only.value().ytrace, truth);
    const test::TraceErrors e =
        test::trace_errors(modelled.value().xtrace, modelled.value().ytrace, truth);
    std::printf("unlisted neighbours, lines only   y: mean %+.4f rms %.4f\n", e_lines.mean_y,
                e_lines.rms_y);
    std::printf("unlisted neighbours, spectrum     y: mean %+.4f rms %.4f\n", e.mean_y, e.rms_y);
    EXPECT_GT(std::abs(e_lines.mean_y), 2 * kMaxMean) << "the neighbours must matter";
    EXPECT_LE(std::abs(e.mean_y), kMaxMean);
    EXPECT_LE(e.rms_y, kMaxRms);
}

// Item 6: a dead amplifier leaves a quadrant of the CCD without measurements (nothing is taken
// from its garbage pixels); the fit over the other three must still be right.
TEST(TraceShifts, MaskedAmplifierIsLeftOutAndTheShiftStillRight)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const GaussHermitePsf truth = test::shifted_psf(
        psf, [](double) { return 0.3; }, [](double) { return -0.2; });
    auto frame = simulate_frame(truth, r_frame(77, psf.nspec()));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    PreprocImage& img = frame.value().preproc;
    const test::AmplifierQuadrant quadrant = test::upper_left_quadrant(psf, 249, 6700.0, img.ny);
    test::mask_quadrant(img, quadrant);
    const LargeArray<double> weights = img.weights();
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degyx = 2;
    opt.lines = night_sky_lines();
    auto result = measure_trace_shifts(ImageView{img.ny, img.nx, img.image.data(), weights.data()},
                                       psf, opt, "masked amplifier");
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    for (const TraceOffset& o : result.value().offsets) {
        EXPECT_FALSE(o.x < quadrant.column_end - 4 && o.y > quadrant.row_begin + 6)
            << "offset at x " << o.x << " y " << o.y << " in the masked quadrant";
    }
    const test::TraceErrors e =
        test::trace_errors(result.value().xtrace, result.value().ytrace, truth);
    std::printf("masked amplifier             x: mean %+.4f rms %.4f   y: mean %+.4f rms %.4f\n",
                e.mean_x, e.rms_x, e.mean_y, e.rms_y);
    EXPECT_LE(e.rms_x, kMaxRms);
    EXPECT_LE(e.rms_y, kMaxRms);
}

// Item 6: a frame without light is refused with its name and the reason.
TEST(TraceShifts, DarkFrameIsRefusedWithItsName)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    auto frame = simulate_frame(psf, r_frame(1, 0));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    const PreprocImage& img = frame.value().preproc;
    const LargeArray<double> weights = img.weights();
    TraceShiftOptions opt;
    opt.degxx = 2;
    auto result = measure_trace_shifts(ImageView{img.ny, img.nx, img.image.data(), weights.data()},
                                       psf, opt, "preproc-dark.fits");
    ASSERT_FALSE(result.is_ok());
    EXPECT_NE(result.status().message().find("preproc-dark.fits: no lit fibre"), std::string::npos)
        << result.status().message();
    LargeArray<double> none(weights.size(), 0.0);
    auto masked = measure_trace_shifts(ImageView{img.ny, img.nx, img.image.data(), none.data()},
                                       psf, opt, "preproc-masked.fits");
    ASSERT_FALSE(masked.is_ok());
    EXPECT_NE(masked.status().message().find("preproc-masked.fits: every pixel is masked"),
              std::string::npos);
}

// The fleet measures a frame on its float32 planes (in the reader) or on float64 copies of
// them (in a worker): both must give the same shifts to the last bit, so that a frame does not
// depend on where its step ran.
TEST(TraceShifts, Float32AndFloat64ViewsGiveTheSameBits)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const GaussHermitePsf truth = test::shifted_psf(
        psf, [](double u) { return 0.2 + 0.1 * u; }, [](double) { return -0.15; });
    auto frame = simulate_frame(truth, r_frame(5, 100));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    const PreprocImage& img = frame.value().preproc;
    const LargeArray<double> weights64 = img.weights();
    // The values a float32 preproc file holds, in both precisions.
    std::vector<float> pixels32(img.image.begin(), img.image.end());
    std::vector<float> weights32(weights64.begin(), weights64.end());
    const std::vector<double> pixels64(pixels32.begin(), pixels32.end());
    const std::vector<double> widened(weights32.begin(), weights32.end());
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degyx = 2;
    opt.nfibers = 100;
    opt.lines = night_sky_lines();
    auto a = measure_trace_shifts(
        Float32ImageView{img.ny, img.nx, pixels32.data(), weights32.data()}, psf, opt, "f32");
    auto b = measure_trace_shifts(ImageView{img.ny, img.nx, pixels64.data(), widened.data()}, psf,
                                  opt, "f64");
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_EQ(a.value().xtrace.coef, b.value().xtrace.coef);
    EXPECT_EQ(a.value().ytrace.coef, b.value().ytrace.coef);
    ASSERT_EQ(a.value().offsets.size(), b.value().offsets.size());
    for (std::size_t i = 0; i < a.value().offsets.size(); ++i) {
        EXPECT_EQ(a.value().offsets[i].delta, b.value().offsets[i].delta) << i;
        EXPECT_EQ(a.value().offsets[i].error, b.value().offsets[i].error) << i;
    }
    const auto x = trace_shift_summary_keys(a.value()), y = trace_shift_summary_keys(b.value());
    for (std::size_t k = 0; k < x.size(); ++k) EXPECT_EQ(x[k].value, y[k].value) << x[k].name;
    EXPECT_TRUE(a.value().y_measured);
}

/// Pulls of one bundle of `frame` extracted with `psf`, through the writer and reader.
PullStatistics bundle_pulls(const SimulatedFrame& frame, const GaussHermitePsf& psf)
{
    const ExtractionOptions opt = test::r_grid_options(225, 25);
    const LargeArray<double> weights = frame.preproc.weights();
    const ImageView view{frame.preproc.ny, frame.preproc.nx, frame.preproc.image.data(),
                         weights.data()};
    auto backend = make_cpu_backend(2);
    auto extracted = extract_frame(view, psf, opt, *backend);
    EXPECT_TRUE(extracted.is_ok()) << extracted.status().to_string();
    test::TempDir dir;
    FrameProvenance prov;
    prov.image_header = frame.preproc.header;
    prov.fibermap = frame.preproc.fibermap;
    prov.options = opt;
    const std::string path = dir.file("frame.fits");
    EXPECT_TRUE(write_frame(path, extracted.value(), prov).is_ok());
    auto file = read_frame(path);
    EXPECT_TRUE(file.is_ok()) << file.status().to_string();
    auto pulls = pull_statistics(file.value(), frame.truth);
    EXPECT_TRUE(pulls.is_ok()) << pulls.status().to_string();
    const PullStatistics& p = pulls.value();
    std::printf("  pulls mean %+.4f std %.4f median chi2pix %.3f\n", p.mean, p.stddev,
                p.median_chi2pix);
    return p;
}

// Item 3: extraction with the output PSF gives pulls as with the true PSF; the input PSF,
// 0.35 px off in x and 0.4 px in y, does not.
TEST(TraceShifts, ExtractionWithOutputPsfPullsAsWithTruePsf)
{
    EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
    auto psf = read_psf(path);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    const Case& c = kCases[1];
    const GaussHermitePsf truth = test::shifted_psf(psf.value(), c.dx, c.dy);
    auto frame = simulate_frame(truth, r_frame(3101, truth.nspec()));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    const PreprocImage& img = frame.value().preproc;
    const LargeArray<double> weights = img.weights();
    TraceShiftOptions opt;
    opt.degxx = 2;
    opt.degyx = 2;
    opt.lines = night_sky_lines();
    auto result = measure_trace_shifts(ImageView{img.ny, img.nx, img.image.data(), weights.data()},
                                       psf.value(), opt, c.name);
    ASSERT_TRUE(result.is_ok()) << result.status().to_string();
    GaussHermitePsf output = psf.value();
    output.xtrace = result.value().xtrace;
    output.ytrace = result.value().ytrace;

    std::printf("true PSF\n");
    const PullStatistics with_truth = bundle_pulls(frame.value(), truth);
    std::printf("output PSF\n");
    const PullStatistics with_output = bundle_pulls(frame.value(), output);
    std::printf("input PSF\n");
    const PullStatistics with_input = bundle_pulls(frame.value(), psf.value());
    EXPECT_NEAR(with_output.mean, with_truth.mean, 0.01);
    EXPECT_NEAR(with_output.stddev, with_truth.stddev, 0.01);
    EXPECT_NEAR(with_output.median_chi2pix, with_truth.median_chi2pix, 0.02);
    EXPECT_GT(with_input.stddev, with_truth.stddev + 0.05);
}

}  // namespace
}  // namespace ex2d
