// SPDX-License-Identifier: BSD-3-Clause
// The stand-in backend of test builds: the frame of a file written from a real extraction,
// returned after its delay, and a clear status for a job of another shape. In a build
// without test hooks, the name is refused.
#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "ex2d/extraction.hpp"
#include "ex2d/frame_io.hpp"
#include "fits_fixtures.hpp"
#include "test_paths.hpp"
#include "tiny_psf.hpp"

namespace ex2d {
namespace {

#if EX2D_TEST_HOOKS

using Clock = std::chrono::steady_clock;

constexpr double kDelay = 0.3;
// A sleep ends late when the machine is busy, never early; 0.5 s covers a loaded CI machine.
constexpr double kLateness = 0.5;

struct StandinSetup {
    GaussHermitePsf psf = test::tiny_psf(25, 270, 940);
    ExtractionOptions opt;
    test::ForwardModel fm;
    test::TempDir dir;
    std::string path = dir.file("frame-r3-00000042.fits");
    FrameFile written;

    StandinSetup()
    {
        opt.wmin = 5000;
        opt.wmax = 5300;
        opt.nspec = 25;
        fm = test::forward_model(psf, wavelength_grid(4960, 5340, 0.8), 5);
        auto cpu = make_cpu_backend(2);
        auto frame = extract_frame(view(), psf, opt, *cpu);
        EXPECT_TRUE(frame.is_ok()) << frame.status().to_string();
        FrameProvenance prov;
        prov.image_header.set_string("CAMERA", "r3");
        prov.image_header.set_string("FLAVOR", "science");
        prov.image_header.set_int("EXPID", 42);
        prov.fibermap = test::make_fibermap_blob(25, 1500, 1000, 80605, false);
        prov.options = opt;
        const Status status = write_frame(path, frame.value(), prov);
        EXPECT_TRUE(status.is_ok()) << status.to_string();
        auto file = read_frame(path);
        EXPECT_TRUE(file.is_ok()) << file.status().to_string();
        written = std::move(file).value();
    }
    ImageView view() const { return {psf.npix_y, psf.npix_x, fm.image.data(), fm.ivar.data()}; }
    std::unique_ptr<ExtractionBackend> standin() const
    {
        auto backend = make_backend("standin", 1, {}, {path, kDelay});
        EXPECT_TRUE(backend.is_ok()) << backend.status().to_string();
        return std::move(backend).value();
    }
};

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const char* what)
{
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t k = 0; k < got.size(); ++k) {
        ASSERT_NEAR(got[k], want[k], 1e-12 * std::max(1.0, std::abs(want[k])))
            << what << "[" << k << "]";
    }
}

TEST(StandinBackend, ReturnsTheFileFrameAfterItsDelay)
{
    StandinSetup setup;
    auto backend = setup.standin();
    EXPECT_EQ(backend->name(), "standin");
    const auto start = Clock::now();
    auto frame = extract_frame(setup.view(), setup.psf, setup.opt, *backend);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_GE(elapsed, kDelay);
    EXPECT_LT(elapsed, kDelay + kLateness);

    const ExtractedFrame& f = frame.value();
    const FrameFile& w = setup.written;
    ASSERT_EQ(f.nspec, w.nspec);
    ASSERT_EQ(f.nwave, w.nwave);
    EXPECT_EQ(f.wave, w.wave);
    EXPECT_EQ(f.npatch_failed, 0);
    expect_close(f.flux, w.flux, "flux");
    expect_close(f.ivar, w.ivar, "ivar");
    expect_close(f.chi2pix, w.chi2pix, "chi2pix");
    expect_close(std::vector<double>(f.resolution.begin(), f.resolution.end()), w.resolution,
                 "resolution");
    EXPECT_EQ(f.mask, w.mask);
}

TEST(StandinBackend, RefusesAShorterGridAtOnce)
{
    StandinSetup setup;
    auto backend = setup.standin();
    setup.opt.wmax = 5200;
    const auto start = Clock::now();
    auto frame = extract_frame(setup.view(), setup.psf, setup.opt, *backend);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    ASSERT_FALSE(frame.is_ok());
    EXPECT_EQ(frame.status().code(), StatusCode::invalid_argument);
    const std::string& message = frame.status().message();
    EXPECT_NE(message.find(setup.path), std::string::npos) << message;
    EXPECT_NE(message.find("holds fibres 0-24 on 376 wavelengths"), std::string::npos) << message;
    EXPECT_NE(message.find("asks for fibres 0-24 on 251 wavelengths"), std::string::npos)
        << message;
    EXPECT_LT(elapsed, kDelay);
}

TEST(StandinBackend, RefusesAShiftedGridOfTheSameLength)
{
    StandinSetup setup;
    auto backend = setup.standin();
    setup.opt.wmin += 0.4;
    setup.opt.wmax += 0.4;
    auto frame = extract_frame(setup.view(), setup.psf, setup.opt, *backend);
    ASSERT_FALSE(frame.is_ok());
    EXPECT_NE(frame.status().message().find("5000.400000-5300.400000 A"), std::string::npos)
        << frame.status().message();
}

TEST(StandinBackend, NeedsAReadableFrameFile)
{
    auto none = make_backend("standin", 1, {}, {"", 1.0});
    ASSERT_FALSE(none.is_ok());
    EXPECT_NE(none.status().message().find("worker.standin_frame"), std::string::npos);

    test::TempDir dir;
    const std::string missing = dir.file("no-such-frame.fits");
    auto absent = make_backend("standin", 1, {}, {missing, 1.0});
    ASSERT_FALSE(absent.is_ok());
    EXPECT_NE(absent.status().message().find(missing), std::string::npos)
        << absent.status().to_string();
}

#else

TEST(StandinBackend, IsRefusedInBuildsWithoutTestHooks)
{
    auto backend = make_backend("standin", 1, {}, {"frame.fits", 0.3});
    ASSERT_FALSE(backend.is_ok());
    EXPECT_EQ(backend.status().code(), StatusCode::not_compiled);
    EXPECT_NE(backend.status().message().find("EX2D_TEST_HOOKS"), std::string::npos);
}

#endif

}  // namespace
}  // namespace ex2d
