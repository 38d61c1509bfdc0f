// SPDX-License-Identifier: BSD-3-Clause
// The large-shift scan of trace shifts (issue 31): continuum and arc frames simulated through
// traces moved by far more than the fine measurement reaches (+-width/2 px), measured against
// the unmoved PSF. With the scan the output traces must match the truth over every fibre and
// wavelength with rms <= 0.015 px and |mean| <= 0.01 px in x and y; without it the result is
// off by whole fibres. Then the scan's refusals, on images made for them.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "ex2d/trace_shifts.hpp"
#include "shifted_traces.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

constexpr double kMaxRms = 0.015;
constexpr double kMaxMean = 0.01;

/// A frame simulated through `truth` (flat or arc, all 500 fibres, r grid).
PreprocImage simulate(const GaussHermitePsf& truth, bool arc, std::uint64_t seed)
{
    SimulationOptions sim;
    sim.seed = seed;
    sim.nspec = truth.nspec();
    sim.wmin = 5760.0;
    sim.wmax = 7620.0;
    sim.flat = !arc;
    sim.arc = arc;
    auto frame = simulate_frame(truth, sim);
    EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
    return std::move(frame.value().preproc);
}

/// desi_proc's options: flats --degxx 2 --continuum, arcs --degxx 0 ... --degyy 0
/// --arc-lamps with the simulated lamps' lines as the reference.
TraceShiftOptions options(bool arc, LargeShiftScan scan)
{
    TraceShiftOptions opt;
    if (!arc) opt.degxx = 2;
    if (arc) opt.lines = simulated_arc_lines();
    opt.large_shift_scan = scan;
    return opt;
}

Result<TraceShiftResult> measure(const PreprocImage& img, const GaussHermitePsf& psf,
                                 const TraceShiftOptions& opt, const std::string& name)
{
    const LargeArray<double> weights = img.weights();
    return measure_trace_shifts(ImageView{img.ny, img.nx, img.image.data(), weights.data()}, psf,
                                opt, name);
}

test::TraceErrors report(const TraceShiftResult& r, const GaussHermitePsf& truth,
                         const std::string& name)
{
    const test::TraceErrors e = test::trace_errors(r.xtrace, r.ytrace, truth);
    std::printf(
        "%-34s scan dx %+.3f dy %+.3f   x: mean %+.4f rms %.4f   y: mean %+.4f rms %.4f   "
        "(%ld points)\n",
        name.c_str(), r.scan.dx, r.scan.dy, e.mean_x, e.rms_x, e.mean_y, e.rms_y, e.n);
    return e;
}

void expect_accurate(const test::TraceErrors& e, const std::string& name)
{
    EXPECT_LE(e.rms_x, kMaxRms) << name;
    EXPECT_LE(std::abs(e.mean_x), kMaxMean) << name;
    EXPECT_LE(e.rms_y, kMaxRms) << name;
    EXPECT_LE(std::abs(e.mean_y), kMaxMean) << name;
}

/// The real r0 PSF, or an empty Result where ../shared/data is absent.
class LargeShiftScanReal : public ::testing::Test {
protected:
    void SetUp() override
    {
        EX2D_REQUIRE_SHARED_PSF(path, "psf-r0-00051060.fits");
        auto psf = read_psf(path);
        ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
        psf_ = std::move(psf.value());
    }
    GaussHermitePsf psf_;
};

// A flat 12.6 px off (nearly two fibres) with a gentle curve across the fibres: without the
// scan the fine measurement locks onto the fibre two over; with it, the traces are right.
TEST_F(LargeShiftScanReal, FlatMovedByTwelvePixels)
{
    const GaussHermitePsf truth = test::shifted_psf(
        psf_, [](double u) { return 12.6 + 0.2 * u - 0.3 * u * u; }, [](double) { return 0.0; });
    const PreprocImage img = simulate(truth, false, 3131);

    auto without = measure(img, psf_, options(false, LargeShiftScan::none), "flat +12.6");
    ASSERT_TRUE(without.is_ok()) << without.status().to_string();
    const test::TraceErrors wrong = report(without.value(), truth, "flat +12.6, no scan");
    EXPECT_NEAR(wrong.mean_x, -14.6, 0.5) << "two fibres over";

    auto with = measure(img, psf_, options(false, LargeShiftScan::continuum), "flat +12.6");
    ASSERT_TRUE(with.is_ok()) << with.status().to_string();
    const LargeShiftScanResult& scan = with.value().scan;
    EXPECT_EQ(scan.method, LargeShiftScan::continuum);
    EXPECT_NEAR(scan.dx, 12.5, 0.5);
    EXPECT_EQ(scan.dy, 0.0);
    ASSERT_EQ(scan.band_dx.size(), 7u);
    for (double d : scan.band_dx) EXPECT_NEAR(d, 12.5, 0.5);
    expect_accurate(report(with.value(), truth, "flat +12.6, continuum scan"), "flat +12.6");
}

// Traces already right: the scan moves nothing, and the result is as without it.
TEST_F(LargeShiftScanReal, FlatInPlaceIsLeftInPlace)
{
    const PreprocImage img = simulate(psf_, false, 3133);
    auto r = measure(img, psf_, options(false, LargeShiftScan::continuum), "flat in place");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LE(std::abs(r.value().scan.dx), 0.5);
    expect_accurate(report(r.value(), psf_, "flat in place, continuum scan"), "flat in place");
}

// An arc 9.3 px off in x and 2.7 px in y, with desi_proc's degrees (all 0): without the scan
// x locks onto the next fibre; with it both axes are right.
TEST_F(LargeShiftScanReal, ArcMovedByNineAndThreePixels)
{
    const GaussHermitePsf truth = test::shifted_psf(
        psf_, [](double) { return 9.3; }, [](double) { return 2.7; });
    const PreprocImage img = simulate(truth, true, 3132);

    auto without = measure(img, psf_, options(true, LargeShiftScan::none), "arc +9.3/+2.7");
    ASSERT_TRUE(without.is_ok()) << without.status().to_string();
    const test::TraceErrors wrong = report(without.value(), truth, "arc +9.3/+2.7, no scan");
    EXPECT_NEAR(wrong.mean_x, -7.3, 0.5) << "one fibre over";

    auto with = measure(img, psf_, options(true, LargeShiftScan::arc_lamps), "arc +9.3/+2.7");
    ASSERT_TRUE(with.is_ok()) << with.status().to_string();
    const LargeShiftScanResult& scan = with.value().scan;
    EXPECT_EQ(scan.method, LargeShiftScan::arc_lamps);
    EXPECT_NEAR(scan.dx, 9.3, 0.1);
    EXPECT_NEAR(scan.dy, 2.7, 0.1);
    EXPECT_GT(scan.spots_predicted, 20000);
    EXPECT_GT(scan.matches, 0.99 * scan.spots_predicted);
    expect_accurate(report(with.value(), truth, "arc +9.3/+2.7, arc-lamp scan"), "arc");
}

TEST_F(LargeShiftScanReal, ArcInPlaceIsLeftInPlace)
{
    const PreprocImage img = simulate(psf_, true, 3134);
    auto r = measure(img, psf_, options(true, LargeShiftScan::arc_lamps), "arc in place");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_LE(std::abs(r.value().scan.dx), 0.5);
    EXPECT_LE(std::abs(r.value().scan.dy), 0.5);
    expect_accurate(report(r.value(), psf_, "arc in place, arc-lamp scan"), "arc in place");
}

/// An image made for the refusals: read noise of 3 e (seeded), every pixel usable.
struct MadeImage {
    int ny = 0, nx = 0;
    std::vector<double> pixels, weights;

    MadeImage(const GaussHermitePsf& psf, std::uint64_t seed)
        : ny(psf.npix_y),
          nx(psf.npix_x),
          pixels(size_t(ny) * nx),
          weights(size_t(ny) * nx, 1.0 / 9.0)
    {
        std::mt19937_64 rng(seed);
        std::normal_distribution<double> noise(0.0, 3.0);
        for (double& p : pixels) p = noise(rng);
    }
    ImageView view() const { return ImageView{ny, nx, pixels.data(), weights.data()}; }
    /// A Gaussian spot of sigma 1 px and `peak` electrons at its centre.
    void add_spot(double x, double y, double peak)
    {
        for (long r = std::lround(y) - 4; r <= std::lround(y) + 4; ++r) {
            for (long c = std::lround(x) - 4; c <= std::lround(x) + 4; ++c) {
                if (r < 0 || r >= ny || c < 0 || c >= nx) continue;
                const double d2 = (c - x) * (c - x) + (r - y) * (r - y);
                pixels[size_t(r) * nx + size_t(c)] += peak * std::exp(-0.5 * d2);
            }
        }
    }
    /// Every fibre's trace, moved by dx, as a Gaussian profile of sigma 1 px in rows [begin,
    /// end).
    void add_traces(const GaussHermitePsf& psf, int begin, int end, double dx)
    {
        for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
            const double wave = 0.5 * (psf.xtrace.wavemin + psf.xtrace.wavemax);
            const double x = psf.xtrace.eval(fiber, wave) + dx;
            for (int r = begin; r < end; ++r) {
                for (long c = std::lround(x) - 4; c <= std::lround(x) + 4; ++c) {
                    pixels[size_t(r) * nx + size_t(c)] +=
                        200.0 * std::exp(-0.5 * (c - x) * (c - x));
                }
            }
        }
    }
};

TraceShiftOptions scan_only(LargeShiftScan scan, std::vector<ReferenceLine> lines = {})
{
    TraceShiftOptions opt;
    opt.large_shift_scan = scan;
    opt.lines = std::move(lines);
    return opt;
}

void expect_refused(const Result<LargeShiftScanResult>& r, const std::string& message)
{
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
}

// Bands of rows without light are left out of the median; fewer than 4 of 7 with light is a
// refusal naming the frame, as is a dark frame.
TEST(LargeShiftScan, ContinuumBandsWithoutLight)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    MadeImage image(psf, 5);
    expect_refused(scan_large_shift(image.view(), psf, scan_only(LargeShiftScan::continuum),
                                    "preproc-dark.fits"),
                   "preproc-dark.fits: large-shift scan: trace light (peak S/N >= 10) in 0 of "
                   "the 7 bands");
    // Light in the three lowest bands (rows mid - 350 .. mid - 51).
    const int mid = psf.npix_y / 2;
    image.add_traces(psf, mid - 350, mid - 50, 8.0);
    expect_refused(scan_large_shift(image.view(), psf, scan_only(LargeShiftScan::continuum),
                                    "preproc-half.fits"),
                   "preproc-half.fits: large-shift scan: trace light (peak S/N >= 10) in 3 of "
                   "the 7 bands");
    // And in the upper two (mid + 150 .. mid + 349): five bands, the median of theirs.
    image.add_traces(psf, mid + 150, mid + 350, 8.0);
    auto r = scan_large_shift(image.view(), psf, scan_only(LargeShiftScan::continuum), "five");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r.value().dx, 8.0);
    const std::vector<double>& bands = r.value().band_dx;
    ASSERT_EQ(bands.size(), 7u);
    for (int b : {0, 1, 2, 5, 6}) EXPECT_EQ(bands[size_t(b)], 8.0) << b;
    EXPECT_TRUE(std::isnan(bands[3]) && std::isnan(bands[4]));
}

// Light further off than the scan reaches puts the peak on the edge of its range: refused.
TEST(LargeShiftScan, ContinuumPeakOnTheEdgeIsRefused)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    MadeImage image(psf, 6);
    const double wave = 0.5 * (psf.xtrace.wavemin + psf.xtrace.wavemax);
    const double x = psf.xtrace.eval(psf.nspec() - 1, wave) + 53.0;
    for (int r = 0; r < image.ny; ++r) {
        for (long c = std::lround(x) - 4; c <= std::lround(x) + 4; ++c) {
            image.pixels[size_t(r) * image.nx + size_t(c)] +=
                500.0 * std::exp(-0.5 * (c - x) * (c - x));
        }
    }
    expect_refused(scan_large_shift(image.view(), psf, scan_only(LargeShiftScan::continuum),
                                    "preproc-far.fits"),
                   "preproc-far.fits: large-shift scan: the cross-correlation of rows");
    expect_refused(scan_large_shift(image.view(), psf, scan_only(LargeShiftScan::continuum),
                                    "preproc-far.fits"),
                   "peaks at the edge of its range (+50 px)");
}

/// The spots the PSF's traces predict for `lines`, moved by (dx, dy), drawn on `image`.
void add_arc_spots(MadeImage& image, const GaussHermitePsf& psf,
                   const std::vector<ReferenceLine>& lines, double dx, double dy)
{
    for (int fiber = 0; fiber < psf.nspec(); ++fiber) {
        for (const ReferenceLine& line : lines) {
            image.add_spot(psf.xtrace.eval(fiber, line.wave) + dx,
                           psf.ytrace.eval(fiber, line.wave) + dy, 2000.0);
        }
    }
}

std::vector<ReferenceLine> r_arc_lines()
{
    std::vector<ReferenceLine> lines;
    for (const ReferenceLine& line : simulated_arc_lines()) {
        if (line.wave > 5800 && line.wave < 7600) lines.push_back(line);
    }
    return lines;
}

// The arc scan's matching alone, on spots drawn where the traces predict them: the offset
// found to 0.05 px; then its refusals.
TEST(LargeShiftScan, ArcSpotsMatchedAndRefusals)
{
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const std::vector<ReferenceLine> lines = r_arc_lines();
    MadeImage moved(psf, 7);
    add_arc_spots(moved, psf, lines, -31.4, 4.2);
    auto r = scan_large_shift(moved.view(), psf, scan_only(LargeShiftScan::arc_lamps, lines),
                              "arc-moved");
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_NEAR(r.value().dx, -31.4, 0.05);
    EXPECT_NEAR(r.value().dy, 4.2, 0.05);
    EXPECT_GE(r.value().matches, r.value().spots_predicted - 200);
    // 177 px off, past the first pass's 25 fibres, the last fibres' spots off the CCD: the
    // passes find it (desispec's first offset of those with as many matches would be a fibre
    // short).
    MadeImage far(psf, 11);
    add_arc_spots(far, psf, lines, 177.0, 0.0);
    auto f =
        scan_large_shift(far.view(), psf, scan_only(LargeShiftScan::arc_lamps, lines), "arc-far");
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    EXPECT_NEAR(f.value().dx, 177.0, 0.05);
    EXPECT_NEAR(f.value().dy, 0.0, 0.05);

    MadeImage dark(psf, 8);
    expect_refused(scan_large_shift(dark.view(), psf, scan_only(LargeShiftScan::arc_lamps, lines),
                                    "preproc-dark.fits"),
                   "preproc-dark.fits: large-shift scan: no spot detected with S/N >= 75");
    expect_refused(
        scan_large_shift(moved.view(), psf, scan_only(LargeShiftScan::arc_lamps, {{3000.0, 1.0}}),
                         "preproc-arc.fits"),
        "preproc-arc.fits: large-shift scan: none of the 1 reference lines falls on "
        "the CCD");
    expect_refused(scan_large_shift(moved.view(), psf, scan_only(LargeShiftScan::arc_lamps),
                                    "preproc-arc.fits"),
                   "preproc-arc.fits: the arc-lamp scan needs reference lines");
    // A spot half way between the rows of two lines, alone: nothing to match.
    MadeImage lone(psf, 9);
    const int mid_fiber = psf.nspec() / 2;
    lone.add_spot(psf.xtrace.eval(mid_fiber, 6823.0), psf.ytrace.eval(mid_fiber, 6823.0), 2000.0);
    expect_refused(scan_large_shift(lone.view(), psf, scan_only(LargeShiftScan::arc_lamps, lines),
                                    "preproc-lone.fits"),
                   "preproc-lone.fits: large-shift scan: no predicted spot within 28 px of a "
                   "detected one");
    // A field of spots every 5 px is no arc.
    MadeImage field(psf, 10);
    for (int r = 2; r < field.ny - 2; r += 5) {
        for (int c = 2; c < field.nx - 2; c += 5) field.pixels[size_t(r) * field.nx + c] += 3000;
    }
    expect_refused(scan_large_shift(field.view(), psf, scan_only(LargeShiftScan::arc_lamps, lines),
                                    "field.fits"),
                   "field.fits: large-shift scan: more than 100000 spots detected");
}

}  // namespace
}  // namespace ex2d
