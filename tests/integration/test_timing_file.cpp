// SPDX-License-Identifier: BSD-3-Clause
// Timing files in desi_proc's --timingfile form (datamodel 4.9: desiutil.timer's compute_stats
// over timers): the statistics against values worked out by hand, an existing file augmented
// rather than overwritten, a file that is not a JSON object refused and left alone, and
// `ex2d extract --timingfile` writing its read, extract and write steps.
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ex2d/exit_codes.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/synthetic_psf.hpp"
#include "ex2d/timing_file.hpp"
#include "run_tool.hpp"
#include "test_paths.hpp"

namespace ex2d {
namespace {

using Json = nlohmann::json;

Json read_json(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return Json::parse(text.str());
}

void write_text(const std::string& path, const std::string& text)
{
    std::ofstream(path) << text;
}

// 2017-07-14T02:40:00 UTC.
constexpr double kEpoch = 1500000000.0;

TEST(TimingFile, StatisticsOverTimersAsDesiutilComputesThem)
{
    ::setenv("TZ", "UTC", 1);
    ::tzset();
    test::TempDir dir;
    const std::string path = dir.file("timing.json");
    // Three frames' timers; only two ran "write".
    const std::vector<StepTimer> timers = {
        {{"extract", {kEpoch, kEpoch + 10}}, {"write", {kEpoch + 10, kEpoch + 11}}},
        {{"extract", {kEpoch + 1, kEpoch + 13}}},
        {{"extract", {kEpoch + 2.25, kEpoch + 20}}, {"write", {kEpoch + 20, kEpoch + 23}}}};
    ASSERT_TRUE(record_step_timings(path, timers, {"extract", "write", "absent"}).is_ok());
    const Json doc = read_json(path);
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(doc.size(), 2u) << doc.dump();  // a step no timer ran gets no entry
    const Json& extract = doc.at("extract");
    EXPECT_EQ(extract.at("n"), 3);
    EXPECT_EQ(extract.at("start.min"), "2017-07-14T02:40:00");
    EXPECT_EQ(extract.at("start.max"), "2017-07-14T02:40:02.250000");
    EXPECT_EQ(extract.at("start.mean"), "2017-07-14T02:40:01.083333");
    EXPECT_EQ(extract.at("start.median"), "2017-07-14T02:40:01");
    EXPECT_EQ(extract.at("stop.max"), "2017-07-14T02:40:20");
    EXPECT_DOUBLE_EQ(extract.at("duration.min").get<double>(), 10.0);
    EXPECT_DOUBLE_EQ(extract.at("duration.max").get<double>(), 17.75);
    EXPECT_DOUBLE_EQ(extract.at("duration.mean").get<double>(), (10.0 + 12.0 + 17.75) / 3);
    EXPECT_DOUBLE_EQ(extract.at("duration.median").get<double>(), 12.0);
    const Json& write = doc.at("write");
    EXPECT_EQ(write.at("n"), 2);
    EXPECT_DOUBLE_EQ(write.at("duration.median").get<double>(), 2.0);  // mean of the middle two
    EXPECT_EQ(write.size(), 13u);  // 4 start, 4 stop, 4 duration, n
}

TEST(TimingFile, AnExistingFileIsAugmentedAndABadOneLeftAlone)
{
    test::TempDir dir;
    const std::string path = dir.file("timing.json");
    write_text(path, R"({"preproc": {"n": 30}, "extract": {"n": 99}})");
    ASSERT_TRUE(
        record_step_timings(path, {{{"extract", {kEpoch, kEpoch + 1}}}}, {"extract"}).is_ok());
    const Json doc = read_json(path);
    EXPECT_EQ(doc.at("preproc").at("n"), 30);  // kept
    EXPECT_EQ(doc.at("extract").at("n"), 1);   // replaced

    const std::string bad = dir.file("bad.json");
    write_text(bad, "[1, 2]");
    const Status refused =
        record_step_timings(bad, {{{"extract", {kEpoch, kEpoch + 1}}}}, {"extract"});
    EXPECT_FALSE(refused.is_ok());
    EXPECT_NE(refused.message().find(bad), std::string::npos) << refused.message();
    std::ifstream in(bad);
    std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(kept, "[1, 2]");
}

TEST(TimingFile, ExtractRecordsReadExtractAndWrite)
{
    test::TempDir dir;
    const GaussHermitePsf psf = make_synthetic_psf(Arm::r, 0);
    const std::string psf_path = dir.file("psf-r0.fits");
    ASSERT_TRUE(write_psf(psf_path, psf).is_ok());
    SimulationOptions sim;
    sim.specmin = 0;
    sim.nspec = 25;
    sim.wmin = 6000;
    sim.wmax = 6200;
    auto simulated = simulate_frame(psf, sim);
    ASSERT_TRUE(simulated.is_ok());
    const std::string preproc = dir.file("preproc-r0.fits");
    ASSERT_TRUE(write_preproc(preproc, simulated.value().preproc).is_ok());
    const std::string timing = dir.file("timing-00000001.json");
    write_text(timing, R"({"preproc": {"n": 1}})");
    const double before = unix_now();
    const test::RunResult run = test::run_command(
        "extract -i " + preproc + " -p " + psf_path + " -o " + dir.file("frame-r0.fits") +
        " -w 6000.0,6200.0,0.8 -s 0 -n 25 --threads 2 --timingfile " + timing);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const double after = unix_now();
    const Json doc = read_json(timing);
    EXPECT_TRUE(doc.contains("preproc"));
    double total = 0;
    for (const char* step : {"read", "extract", "write"}) {
        ASSERT_TRUE(doc.contains(step)) << step << " in " << doc.dump();
        EXPECT_EQ(doc.at(step).at("n"), 1) << step;
        const double seconds = doc.at(step).at("duration.mean").get<double>();
        EXPECT_GT(seconds, 0.0) << step;
        total += seconds;
    }
    EXPECT_LT(total, after - before);
    // One process: its steps follow one another (ISO strings of one format sort by time).
    EXPECT_LE(doc.at("read").at("stop.min").get<std::string>(),
              doc.at("extract").at("start.min").get<std::string>());
    EXPECT_LE(doc.at("extract").at("stop.min").get<std::string>(),
              doc.at("write").at("start.min").get<std::string>());

    // A timing file in a folder that cannot be made fails before anything is extracted.
    write_text(dir.file("not-a-folder"), "x");
    const test::RunResult refused = test::run_command(
        "extract -i " + preproc + " -p " + psf_path + " -o " + dir.file("frame-b.fits") +
        " -w 6000.0,6200.0,0.8 -s 0 -n 25 --timingfile " + dir.file("not-a-folder/t.json"));
    EXPECT_EQ(refused.exit_code, kExitOutput) << refused.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("frame-b.fits")));
}

}  // namespace
}  // namespace ex2d
