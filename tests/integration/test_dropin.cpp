// SPDX-License-Identifier: BSD-3-Clause
// ex2d extract as a drop-in for desi_extract_spectra: desi_proc's command lines, the options
// it accepts or refuses, the checks that fail before any work, exit codes, signals and a full
// disk. Every test runs the real tool.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
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

RunResult run(const std::string& args, const std::string& prefix = "",
              const std::string& tool = EX2D_TOOL_PATH)
{
    return test::run_command(args, prefix, tool);
}

std::vector<std::string> temporaries_in(const fs::path& dir)
{
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.find(".tmp-") != std::string::npos) found.push_back(name);
    }
    return found;
}

class Dropin : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        dir_ = new test::TempDir();
        psf_r_ = dir_->file("psf-r0.fits");
        psf_b_ = dir_->file("psf-b0.fits");
        ASSERT_TRUE(write_psf(psf_r_, make_synthetic_psf(Arm::r, 0)).is_ok());
        ASSERT_TRUE(write_psf(psf_b_, make_synthetic_psf(Arm::b, 0)).is_ok());
        // Light in 5760-6000 A only keeps the set-up short (ctest runs each test on its own);
        // the full-grid extractions see dark sky elsewhere.
        pre_r_ = simulate(Arm::r, "r0", 5760, 6000, "preproc-r0.fits");
    }
    static void TearDownTestSuite() { delete dir_; }

    static std::string simulate(Arm arm, const std::string& camera, double wmin, double wmax,
                                const std::string& name)
    {
        SimulationOptions sim;
        sim.nspec = 25;
        sim.camera = camera;
        sim.wmin = wmin;
        sim.wmax = wmax;
        auto simulated = simulate_frame(make_synthetic_psf(arm, 0), sim);
        EXPECT_TRUE(simulated.is_ok()) << simulated.status().to_string();
        std::string path = dir_->file(name);
        EXPECT_TRUE(write_preproc(path, simulated.value().preproc).is_ok());
        return path;
    }
    // A quick extraction of the r frame: 25 fibres, 301 wavelengths.
    static std::string small(const std::string& out, const std::string& input = pre_r_)
    {
        return "extract -i " + input + " -p " + psf_r_ + " -o " + out +
               " -w 5760.0,6000.0,0.8 -n 25 --threads 2";
    }
    // Fails with `code`, names `must_name` and `problem` in a log-formatted last line, and
    // leaves neither `output` nor a temporary next to it.
    static void expect_failure(const RunResult& r, int code, const std::string& output,
                               const std::string& must_name, const std::string& problem)
    {
        EXPECT_EQ(r.exit_code, code) << r.output;
        const std::string line = last_line(r.output);
        EXPECT_TRUE(std::regex_search(line, std::regex(R"(^\d{4}-\d\d-\d\dT[\d:.]+ error ex2d: )")))
            << line;
        EXPECT_NE(line.find(must_name), std::string::npos) << line;
        EXPECT_NE(line.find(problem), std::string::npos) << line;
        EXPECT_EQ(r.output.find("extract start"), std::string::npos) << "failed after work began";
        EXPECT_FALSE(fs::exists(output)) << output;
        if (fs::is_directory(fs::path(output).parent_path())) {
            EXPECT_TRUE(temporaries_in(fs::path(output).parent_path()).empty());
        }
    }
    static void expect_frame(const std::string& path, int nwave)
    {
        auto frame = read_frame(path);
        ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
        EXPECT_EQ(frame.value().nspec, 25);
        EXPECT_EQ(frame.value().nwave, nwave);
        EXPECT_EQ(frame.value().fiber.front(), 0);
        EXPECT_NE(
            frame.value().hdu_names.end(),
            std::find(frame.value().hdu_names.begin(), frame.value().hdu_names.end(), "SCORES"));
    }

    static test::TempDir* dir_;
    static std::string psf_r_, psf_b_, pre_r_;
};
test::TempDir* Dropin::dir_ = nullptr;
std::string Dropin::psf_r_, Dropin::psf_b_, Dropin::pre_r_;

// desi_proc's command line for r (proc.py:780-842), run through a desi_extract_spectra
// symlink as the install rule creates it; -n 25 keeps the test small.
TEST_F(Dropin, DesiProcCommandLineForRThroughTheSymlink)
{
    const std::string link = dir_->file("desi_extract_spectra");
    fs::create_symlink(EX2D_TOOL_PATH, link);
    const std::string out = dir_->file("frame-r0-00000001-no-badcolumn-mask.fits");
    const RunResult r = run("-w 5760.0,7620.0,0.8 -i " + pre_r_ + " -p " + psf_r_ + " -o " + out +
                                " --psferr 0.01 -n 25",
                            "", link);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    expect_frame(out, 2326);
}

TEST_F(Dropin, DesiProcCommandLineForBWithNoGpu)
{
    const std::string pre_b = simulate(Arm::b, "b0", 3600, 3800, "preproc-b0.fits");
    const std::string out = dir_->file("frame-b0-00000001-no-badcolumn-mask.fits");
    const RunResult r = run("extract -w 3600.0,5800.0,0.8 -i " + pre_b + " -p " + psf_b_ + " -o " +
                            out + " --psferr 0.04 --no-gpu -n 25");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("event=backend_cpu reason=\"--no-gpu\""), std::string::npos);
    EXPECT_NE(r.output.find("backend=cpu"), std::string::npos);
    expect_frame(out, 2751);
}

TEST_F(Dropin, RefusedOptionsSayWhy)
{
    const std::string out = dir_->file("frame-refused.fits");
    expect_failure(run(small(out) + " --use-specter"), kExitUsage, out, "--use-specter",
                   "gpu_specter");
    expect_failure(run(small(out) + " --decorrelate-fibers"), kExitUsage, out,
                   "--decorrelate-fibers", "desispec rejects it");
}

TEST_F(Dropin, NoScoresLeavesOutTheScoresHdu)
{
    const std::string out = dir_->file("frame-no-scores.fits");
    ASSERT_EQ(run(small(out) + " --no-scores").exit_code, 0);
    auto frame = read_frame(out);
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    const std::vector<std::string> expected = {"FLUX",       "IVAR",     "MASK",   "WAVELENGTH",
                                               "RESOLUTION", "FIBERMAP", "CHI2PIX"};
    EXPECT_EQ(frame.value().hdu_names, expected);
}

TEST_F(Dropin, AcceptedOptions)
{
    const std::string out = dir_->file("frame-accepted.fits");
    const RunResult r = run("extract -i " + pre_r_ + " -f " + pre_r_ + " -p " + psf_r_ + " -o " +
                                out + " -w 5760.0,6000.0,0.8 -n 25 --mpi -v",
                            "DESI_NO_GPU=1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("option=--mpi reason=\"ex2d uses threads\""), std::string::npos);
    EXPECT_NE(r.output.find("reason=\"DESI_NO_GPU is set\""), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(" debug event=default_threads threads="), std::string::npos);
    expect_frame(out, 301);
}

TEST_F(Dropin, AutoBackendSaysWhichAndWhy)
{
    const std::string out = dir_->file("frame-auto.fits");
    const RunResult r = run(small(out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("event=backend_auto backend="), std::string::npos) << r.output;
}

TEST_F(Dropin, OptionValuesAreUsageErrors)
{
    const std::string out = dir_->file("frame-values.fits");
    expect_failure(run(small(out) + " --psferr -0.5"), kExitUsage, out, "--psferr", "-0.5");
    expect_failure(run("extract -i " + pre_r_ + " -p " + psf_r_ + " -o " + out + " --threads -1"),
                   kExitUsage, out, "--threads", "-1");
    expect_failure(run("extract -i " + pre_r_ + " -p " + psf_r_ + " -o " + out + " -w 5760,6000"),
                   kExitUsage, out, "-w/--wavelength", "5760,6000");
    expect_failure(run(small(out) + " --no-gpu --backend cuda"), kExitUsage, out, "--no-gpu",
                   "cuda");
    expect_failure(run(small(out) + " --no-such-option"), kExitUsage, out, "--no-such-option",
                   "--help");
    EXPECT_EQ(run("extract --help").exit_code, 0);
}

TEST_F(Dropin, WavelengthOutsideThePsf)
{
    const std::string out = dir_->file("frame-wave.fits");
    expect_failure(run("extract -i " + pre_r_ + " -p " + psf_r_ + " -o " + out +
                       " -w 5000.0,6000.0,0.8 -n 25"),
                   kExitUsage, out, "psf-r0.fits",
                   "5000..6000 A is outside the range 5543..7827 A");
}

// As desispec does, a missing output folder is created; one that cannot be (a file is in the
// way) is an output error named before any work.
TEST_F(Dropin, MissingOutputFolderIsCreated)
{
    const std::string out = dir_->file("new-folder/deeper/frame.fits");
    ASSERT_EQ(run(small(out)).exit_code, 0);
    expect_frame(out, 301);
}

TEST_F(Dropin, OutputFolderThatCannotBeCreated)
{
    const std::string blocker = dir_->file("a-file");
    std::ofstream(blocker) << "x";
    const std::string out = blocker + "/sub/frame.fits";
    expect_failure(run(small(out)), kExitOutput, out, "a-file/sub", "cannot be created");
}

TEST_F(Dropin, InvalidFlavor)
{
    auto img = read_preproc(pre_r_);
    ASSERT_TRUE(img.is_ok());
    img.value().header.set_string("FLAVOR", "bogus");
    const std::string input = dir_->file("preproc-badflavor.fits");
    ASSERT_TRUE(write_preproc(input, img.value()).is_ok());
    const std::string out = dir_->file("frame-badflavor.fits");
    expect_failure(run(small(out, input)), kExitInput, out, "preproc-badflavor.fits",
                   "FLAVOR 'bogus'");
}

TEST_F(Dropin, CameraDiffersFromThePsfIsAnError)
{
    auto img = read_preproc(pre_r_);
    ASSERT_TRUE(img.is_ok());
    img.value().header.set_string("CAMERA", "r7");
    const std::string input = dir_->file("preproc-r7.fits");
    ASSERT_TRUE(write_preproc(input, img.value()).is_ok());
    const std::string out = dir_->file("frame-r7.fits");
    expect_failure(run(small(out, input)), kExitInput, out, "preproc-r7.fits",
                   "is camera r7 but PSF " + psf_r_ + " is for camera r0");
}

TEST_F(Dropin, FibermapShorterThanTheSpectra)
{
    const std::string fibermap = dir_->file("fibermap-short.fits");
    fs::copy_file(pre_r_, fibermap);
    int status = 0;
    fitsfile* f = nullptr;
    long long nrows = 0;
    fits_open_file(&f, fibermap.c_str(), READWRITE, &status);
    fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("FIBERMAP"), 0, &status);
    fits_get_num_rowsll(f, &nrows, &status);
    fits_delete_rows(f, 11, nrows - 10, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    const std::string out = dir_->file("frame-shortfm.fits");
    expect_failure(run(small(out) + " -f " + fibermap), kExitInput, out, "fibermap-short.fits",
                   "FIBERMAP has 10 rows, specmin + nspec needs 25");
    expect_failure(run(small(out) + " -f " + psf_r_), kExitInput, out, "psf-r0.fits",
                   "no HDU named FIBERMAP");
}

TEST_F(Dropin, FibermapColumnsTableGivesTheDescriptionsOrIsRefused)
{
    const std::string bad = dir_->file("columns-bad.json");
    std::ofstream(bad) << "[{\"name\": \"TARGET_RA\", \"unit\": 1}]";
    const std::string out = dir_->file("frame-columns.fits");
    expect_failure(run(small(out) + " --fibermap-columns " + bad), kExitInput, out,
                   "columns-bad.json", "entry 0: unit is not a string");

    const std::string good = dir_->file("columns.json");
    std::ofstream(good) << "[{\"name\": \"TARGET_RA\", \"unit\": \"deg\", "
                           "\"description\": \"Words of this site\"}]";
    const RunResult r = run(small(out) + " --fibermap-columns " + good);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    int status = 0, column = 0;
    fitsfile* f = nullptr;
    char comment[FLEN_COMMENT] = "", unit[FLEN_VALUE] = "";
    fits_open_file(&f, out.c_str(), READONLY, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &status);
    fits_get_colnum(f, CASEINSEN, const_cast<char*>("TARGET_RA"), &column, &status);
    fits_read_key(f, TSTRING, ("TTYPE" + std::to_string(column)).c_str(), unit, comment, &status);
    fits_read_key(f, TSTRING, ("TUNIT" + std::to_string(column)).c_str(), unit, nullptr, &status);
    fits_close_file(f, &status);
    ASSERT_EQ(status, 0);
    EXPECT_STREQ(comment, "Words of this site");
    EXPECT_STREQ(unit, "deg");
}

// SIGTERM while the model (a 136 MB full-CCD image, written first) is being written: the
// temporary must go, the frame must not appear, the exit code is 128 + 15.
TEST_F(Dropin, SigtermRemovesTemporariesAndExits143)
{
    test::TempDir outdir;
    const std::string out = outdir.file("frame.fits"), log = dir_->file("sigterm.log");
    const std::string cmd = std::string("exec ") + EX2D_TOOL_PATH + " " + small(out) + " -m " +
                            outdir.file("model.fits") + " > " + log + " 2>&1";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    bool seen = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!seen && std::chrono::steady_clock::now() < deadline) {
        seen = !temporaries_in(outdir.path()).empty();
        if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (waitpid(pid, nullptr, WNOHANG) == pid) FAIL() << "the tool ended before writing";
    }
    ASSERT_TRUE(seen) << "no temporary file appeared";
    kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_TRUE(WIFEXITED(status)) << text.str();
    EXPECT_EQ(WEXITSTATUS(status), 143) << text.str();
    EXPECT_NE(last_line(text.str()).find("error ex2d: interrupted by signal 15 (SIGTERM)"),
              std::string::npos)
        << text.str();
    EXPECT_TRUE(temporaries_in(outdir.path()).empty());
    EXPECT_FALSE(fs::exists(out));
}

// A 1 MiB tmpfs cannot hold the frame: exit 4, no frame, no model, no temporary.
TEST_F(Dropin, FullDiskLeavesNothing)
{
    test::TempDir mnt;
    if (mount("tmpfs", mnt.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
    }
    const std::string out = mnt.file("frame.fits"), model = mnt.file("model.fits");
    const RunResult r = run(small(out) + " -m " + model);
    const bool model_failed = r.output.find("model.fits") != std::string::npos;
    const bool empty = fs::is_empty(mnt.path());
    umount(mnt.path().c_str());
    EXPECT_EQ(r.exit_code, kExitOutput) << r.output;
    EXPECT_TRUE(model_failed) << last_line(r.output);
    EXPECT_TRUE(empty) << "files left on the full disk";
}

TEST_F(Dropin, FullDiskFrameOnlyLeavesNothing)
{
    test::TempDir mnt;
    if (mount("tmpfs", mnt.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
        GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
    }
    const std::string out = mnt.file("frame.fits");
    const RunResult r = run("extract -i " + pre_r_ + " -p " + psf_r_ + " -o " + out +
                            " -w 5760.0,7620.0,0.8 -n 25 --threads 2");
    const bool empty = fs::is_empty(mnt.path());
    umount(mnt.path().c_str());
    EXPECT_EQ(r.exit_code, kExitOutput) << r.output;
    EXPECT_NE(last_line(r.output).find("frame.fits"), std::string::npos) << r.output;
    EXPECT_TRUE(empty) << "files left on the full disk";
}

}  // namespace
}  // namespace ex2d

namespace ex2d {
namespace {

// --barycentric-correction: the frame is labelled with the grid asked for, carries HELIOCOR
// (the factor of the simulated pointing and mid-exposure time) and its fluxes come from the
// shifted grid, so they differ from the uncorrected extraction.
TEST_F(Dropin, BarycentricCorrectionWritesHeliocorOnTheRequestedGrid)
{
    const std::string plain = dir_->file("frame-plain.fits");
    const std::string corrected = dir_->file("frame-bary.fits");
    ASSERT_EQ(run(small(plain)).exit_code, 0);
    const RunResult r = run(small(corrected) + " --barycentric-correction");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto a = read_frame(plain);
    auto b = read_frame(corrected);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(a.value().wave, b.value().wave);
    const auto heliocor = b.value().header.get_double("HELIOCOR");
    ASSERT_TRUE(heliocor.has_value());
    EXPECT_FALSE(a.value().header.has("HELIOCOR"));
    // |v| < 32 km/s for any pointing: Earth's orbit (30 km/s) plus its rotation.
    EXPECT_GT(std::abs(*heliocor - 1.0), 1e-7);
    EXPECT_LT(std::abs(*heliocor - 1.0), 32.0 / 299792.458);
    EXPECT_NE(a.value().flux, b.value().flux);
    EXPECT_NE(r.output.find("barycentric correction"), std::string::npos);
}

}  // namespace
}  // namespace ex2d
