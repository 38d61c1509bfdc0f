// SPDX-License-Identifier: BSD-3-Clause
// The ex2d tool end to end: a good run, and every bad input of issue 2 item 3 giving a
// one-line error that names the file, a non-zero exit and no output file.
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fitsio.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/extraction_backend.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "run_tool.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

namespace fs = std::filesystem;

using test::last_line;
using test::RunResult;

RunResult run_tool(const std::string& args)
{
    return test::run_command(args);
}

class Cli : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        dir_ = new test::TempDir();
        psf_path_ = dir_->file("psf-r0.fits");
        ASSERT_TRUE(write_psf(psf_path_, make_synthetic_psf(Arm::r, 0)).is_ok());
        SimulationOptions sim;
        sim.nspec = 25;
        sim.specmin = 25;
        sim.wmin = 5760;
        sim.wmax = 6400;
        auto simulated = simulate_frame(make_synthetic_psf(Arm::r, 0), sim);
        ASSERT_TRUE(simulated.is_ok());
        preproc_ = new PreprocImage(simulated.value().preproc);
        preproc_path_ = dir_->file("preproc-r0.fits");
        ASSERT_TRUE(write_preproc(preproc_path_, *preproc_).is_ok());
        truth_path_ = dir_->file("truth-r0.fits");
        ASSERT_TRUE(write_truth(truth_path_, simulated.value().truth).is_ok());
        sim.seed = 2;
        auto other = simulate_frame(make_synthetic_psf(Arm::r, 0), sim);
        ASSERT_TRUE(other.is_ok());
        other_truth_path_ = dir_->file("truth-r0-seed2.fits");
        ASSERT_TRUE(write_truth(other_truth_path_, other.value().truth).is_ok());
    }
    static void TearDownTestSuite()
    {
        delete preproc_;
        delete dir_;
    }
    static std::string extract_args(const std::string& input, const std::string& psf,
                                    const std::string& output)
    {
        return "extract -i " + input + " -p " + psf + " -o " + output +
               " -w 5760.0,6400.0,0.8 -s 25 -n 25 --threads 2";
    }
    void expect_clean_failure(const std::string& args, const std::string& output,
                              const std::string& must_name, const std::string& problem)
    {
        const RunResult r = run_tool(args);
        EXPECT_NE(r.exit_code, 0) << r.output;
        const std::string line = last_line(r.output);
        EXPECT_NE(line.find("ex2d: "), std::string::npos) << line;
        EXPECT_NE(line.find(must_name), std::string::npos) << line;
        EXPECT_NE(line.find(problem), std::string::npos) << line;
        EXPECT_FALSE(fs::exists(output)) << output;
        for (const auto& entry : fs::directory_iterator(fs::path(output).parent_path())) {
            EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos)
                << "temporary file left: " << entry.path();
        }
    }

    static test::TempDir* dir_;
    static std::string psf_path_, preproc_path_, truth_path_, other_truth_path_;
    static PreprocImage* preproc_;
};
test::TempDir* Cli::dir_ = nullptr;
std::string Cli::psf_path_, Cli::preproc_path_, Cli::truth_path_, Cli::other_truth_path_;
PreprocImage* Cli::preproc_ = nullptr;

TEST_F(Cli, HelpListsSubcommands)
{
    const RunResult r = run_tool("--help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* cmd : {"extract", "simulate", "make-psf", "accuracy", "bench"}) {
        EXPECT_NE(r.output.find(cmd), std::string::npos) << cmd;
    }
    const RunResult e = run_tool("extract --help");
    EXPECT_EQ(e.exit_code, 0);
    for (const char* opt :
         {"--psferr", "--regularize", "--bundlesize", "--nsubbundles", "--nwavestep",
          "--pixpad-frac", "--wavepad-frac", "--threads", "--specmin", "--nspec"}) {
        EXPECT_NE(e.output.find(opt), std::string::npos) << opt;
    }
}

// spdlog maps an unknown level name to "off": accepted, it would silence every line, the final
// error included. It is a usage error that names the choices, before any work.
TEST_F(Cli, UnknownLogLevelIsAUsageErrorNamingTheChoices)
{
    const std::string out = dir_->file("log-level.fits");
    const RunResult r =
        run_tool("--log-level bogus " + extract_args(preproc_path_, psf_path_, out));
    EXPECT_EQ(r.exit_code, kExitUsage) << r.output;
    EXPECT_NE(r.output.find("bogus"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("warning"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(Cli, ExtractWritesAFrameAndAModel)
{
    const std::string out = dir_->file("frame-good.fits"), model = dir_->file("model-good.fits");
    const RunResult r = run_tool(extract_args(preproc_path_, psf_path_, out) + " -m " + model);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("extract done"), std::string::npos);
    EXPECT_NE(r.output.find("camera=r0"), std::string::npos);
    auto frame = read_frame(out);
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().nspec, 25);
    EXPECT_EQ(frame.value().nwave, 801);
    EXPECT_EQ(frame.value().fiber.front(), 25);
    EXPECT_TRUE(fs::exists(model));
}

TEST_F(Cli, CudaBackendWithoutADeviceFailsCleanly)
{
    if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
    const std::string out = dir_->file("frame-cuda.fits");
    const RunResult r = run_tool(extract_args(preproc_path_, psf_path_, out) + " --backend cuda");
    EXPECT_EQ(r.exit_code, kExitRuntime) << r.output;
    const std::string line = last_line(r.output);
    EXPECT_TRUE(line.find("not compiled") != std::string::npos ||
                line.find("device unavailable") != std::string::npos)
        << line;
    EXPECT_NE(line.find("CUDA"), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(Cli, MissingInputFile)
{
    const std::string out = dir_->file("frame-missing.fits");
    expect_clean_failure(extract_args(dir_->file("nope.fits"), psf_path_, out), out, "nope.fits",
                         "I/O error");
}

TEST_F(Cli, TruncatedPreproc)
{
    const std::string truncated = dir_->file("preproc-truncated.fits");
    fs::copy_file(preproc_path_, truncated);
    fs::resize_file(truncated, fs::file_size(truncated) / 2);
    const std::string out = dir_->file("frame-truncated.fits");
    expect_clean_failure(extract_args(truncated, psf_path_, out), out, "preproc-truncated.fits",
                         "error");
}

TEST_F(Cli, MissingHdu)
{
    const std::string no_ivar = dir_->file("preproc-noivar.fits");
    fs::copy_file(preproc_path_, no_ivar);
    int status = 0;
    fitsfile* f = nullptr;
    fits_open_file(&f, no_ivar.c_str(), READWRITE, &status);
    fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("IVAR"), 0, &status);
    fits_delete_hdu(f, nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    const std::string out = dir_->file("frame-noivar.fits");
    expect_clean_failure(extract_args(no_ivar, psf_path_, out), out, "preproc-noivar.fits", "IVAR");
}

TEST_F(Cli, PsfOfAnotherFormat)
{
    const std::string out = dir_->file("frame-badpsf.fits");
    expect_clean_failure(extract_args(preproc_path_, preproc_path_, out), out, "preproc-r0.fits",
                         "format error");
}

TEST_F(Cli, ImageSizeDisagreesWithPsf)
{
    const std::string bpsf = dir_->file("psf-b0.fits");
    ASSERT_TRUE(write_psf(bpsf, make_synthetic_psf(Arm::b, 0)).is_ok());
    const std::string out = dir_->file("frame-size.fits");
    expect_clean_failure(extract_args(preproc_path_, bpsf, out), out, "psf-b0.fits", "4096");
}

TEST_F(Cli, BadOptionsAreRejectedBeforeWork)
{
    const std::string out = dir_->file("frame-opts.fits");
    expect_clean_failure(extract_args(preproc_path_, psf_path_, out) + " --bundlesize 24", out,
                         "bundlesize", "invalid argument");
    const RunResult r = run_tool("extract -i " + preproc_path_ + " -p " + psf_path_ + " -o " + out +
                                 " -w 6000,5000,0.8");
    EXPECT_EQ(r.exit_code, kExitUsage);
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(Cli, MissingFlavorWritesNothing)
{
    PreprocImage img = *preproc_;
    img.header.erase("FLAVOR");
    const std::string input = dir_->file("preproc-noflavor.fits");
    ASSERT_TRUE(write_preproc(input, img).is_ok());
    const std::string out = dir_->file("frame-noflavor.fits");
    expect_clean_failure(extract_args(input, psf_path_, out), out, "frame-noflavor.fits", "FLAVOR");
}

TEST_F(Cli, NonFinitePixelsAreMaskedCountedAndNeverWritten)
{
    PreprocImage img = *preproc_;
    // a NaN block on fibre 30's trace and scattered Inf pixels in the IVAR
    for (int row = 2000; row < 2040; ++row) {
        for (int col = 0; col < img.nx; col += 397) img.ivar[size_t(row) * img.nx + col] = INFINITY;
    }
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const double w = 6000;
    const int xc = int(psf.xtrace.eval(30, w)), yc = int(psf.ytrace.eval(30, w));
    for (int row = yc - 6; row <= yc + 6; ++row) {
        for (int col = xc - 9; col <= xc + 9; ++col) img.image[size_t(row) * img.nx + col] = NAN;
    }
    const std::string input = dir_->file("preproc-nan.fits");
    ASSERT_TRUE(write_preproc(input, img).is_ok());
    const std::string out = dir_->file("frame-nan.fits");
    const RunResult r = run_tool(extract_args(input, psf_path_, out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("nonfinite_pixels_masked"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("preproc-nan.fits count="), std::string::npos) << r.output;
    auto frame = read_frame(out);
    ASSERT_TRUE(frame.is_ok());
    long allbad = 0;
    for (size_t k = 0; k < frame.value().flux.size(); ++k) {
        ASSERT_TRUE(std::isfinite(frame.value().flux[k]));
        ASSERT_TRUE(std::isfinite(frame.value().ivar[k]));
        allbad += (frame.value().mask[k] & 2) != 0;
    }
    EXPECT_GT(allbad, 0) << "the NaN block covers whole spots of fibre 30";
}

TEST_F(Cli, UnwritableOutputLeavesNothing)
{
    // A regular file where the output folder should be: the folder cannot be created.
    const std::string blocker = dir_->file("not-a-folder");
    std::ofstream(blocker) << "x";
    const std::string out = blocker + "/frame.fits";
    const RunResult r = run_tool(extract_args(preproc_path_, psf_path_, out));
    EXPECT_EQ(r.exit_code, kExitOutput) << r.output;
    EXPECT_NE(last_line(r.output).find("not-a-folder"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out));
}

// accuracy --check: a frame against its own truth passes; against another simulation's truth
// it misses the goals and ends with errors, the code ex2dctl wait gives an exposure with
// failed frames (one table, docs/usage.md).
TEST_F(Cli, AccuracyCheckEndsWithErrorsWhenAGoalIsMissed)
{
    const std::string out = dir_->file("frame-accuracy.fits");
    ASSERT_EQ(run_tool(extract_args(preproc_path_, psf_path_, out)).exit_code, kExitOk);
    const RunResult own = run_tool("accuracy --check --frame " + out + " --truth " + truth_path_);
    EXPECT_EQ(own.exit_code, kExitOk) << own.output;
    const RunResult other =
        run_tool("accuracy --check --frame " + out + " --truth " + other_truth_path_);
    EXPECT_EQ(other.exit_code, kExitWithErrors) << other.output;
    EXPECT_NE(other.output.find("verdict              FAIL"), std::string::npos) << other.output;
    EXPECT_NE(other.output.find("error ex2d: pull statistics outside the goals"), std::string::npos)
        << other.output;
}

}  // namespace
}  // namespace ex2d
