// SPDX-License-Identifier: BSD-3-Clause
// desi_proc's bad-column step through the fleet (datamodel 4.7, docs/protocol.md): a frame with
// a calibnight badcolumns table has the MASK and FIBERMAP of `ex2d extract --badcolumns`; a
// missing table is a warning and an unmasked frame; a malformed one fails the frame by name.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "ex2d/badcolumns.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/simulate.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNight = "20261122";

std::string desispec_table(const Fleet& fleet, const std::string& camera)
{
    return fleet.dir() + "/calibnight/" + kNight + "/badcolumns-" + camera + "-" + kNight + ".csv";
}

/// The simulator's table for the harness's small frames (25 fibres, 6000-6100 A).
BadColumns table_for(const Fleet& fleet, const std::string& camera)
{
    auto psf = read_psf(fleet.psf_path(camera));
    EXPECT_TRUE(psf.is_ok()) << psf.status().to_string();
    SimulationOptions sim;
    sim.nspec = 25;
    sim.wmin = 6000;
    sim.wmax = 6100;
    return simulated_badcolumns(psf.value(), sim);
}

std::vector<long long> fibermap_column(const std::string& frame, const char* name)
{
    auto table = read_fibermap(frame);
    EXPECT_TRUE(table.is_ok()) << table.status().to_string();
    if (!table.is_ok()) return {};
    auto values = read_int_column(table.value(), name);
    EXPECT_TRUE(values.is_ok()) << name;
    return values.is_ok() ? values.value() : std::vector<long long>{};
}

int extract_reference(Fleet& fleet, const std::string& preproc, const std::string& camera,
                      const std::string& output, const std::string& badcolumns)
{
    std::vector<std::string> argv = {EX2D_TOOL_PATH, "extract",
                                     "-i",           preproc,
                                     "-p",           fleet.psf_path(camera),
                                     "-o",           output,
                                     "-w",           "6000,6100,0.8",
                                     "-n",           "25",
                                     "--threads",    "1",
                                     "--backend",    "cpu",
                                     "--psferr",     camera[0] == 'b' ? "0.04" : "0.01"};
    if (!badcolumns.empty()) argv.insert(argv.end(), {"--badcolumns", badcolumns});
    Process tool("extract", argv, {}, fleet.dir() + "/logs/extract.log");
    return tool.wait(60);
}

long long bins_with_badcolumn(const std::vector<std::uint32_t>& mask)
{
    long long n = 0;
    for (std::uint32_t m : mask) n += (m & kSpecmaskBadColumn) != 0;
    return n;
}

// The default table (desispec's calibnight layout next to the preproc tree) is applied by the
// worker: MASK and FIBERSTATUS as `ex2d extract --badcolumns` writes them, FLUX untouched.
TEST(FleetBadColumns, FrameMatchesExtractWithTheSameTable)
{
    Fleet fleet("badcolumns");
    const std::vector<std::string> cams = {"r0", "z1"};
    const std::vector<std::string> preprocs = fleet.make_exposure(71, cams);
    for (const auto& cam : cams) {
        ASSERT_TRUE(
            write_badcolumns_csv(desispec_table(fleet, cam), table_for(fleet, cam), cam).is_ok());
    }
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(71), 0);
    ASSERT_TRUE(fleet.wait_exposure(71, 90));
    for (std::size_t i = 0; i < cams.size(); ++i) {
        SCOPED_TRACE(cams[i]);
        EXPECT_EQ(fleet.frame_field(71, cams[i], "state"), "done");
        EXPECT_EQ(fleet.frame_field(71, cams[i], "badcolumns"), desispec_table(fleet, cams[i]));
        const std::string reference = fleet.dir() + "/reference-" + cams[i] + ".fits";
        const std::string plain = fleet.dir() + "/plain-" + cams[i] + ".fits";
        ASSERT_EQ(extract_reference(fleet, preprocs[i], cams[i], reference,
                                    desispec_table(fleet, cams[i])),
                  0);
        ASSERT_EQ(extract_reference(fleet, preprocs[i], cams[i], plain, ""), 0);
        const std::string output = fleet.output_path(71, cams[i]);
        auto a = read_frame(output);
        auto b = read_frame(reference);
        auto u = read_frame(plain);
        ASSERT_TRUE(a.is_ok() && b.is_ok() && u.is_ok());
        EXPECT_EQ(a.value().mask, b.value().mask);
        EXPECT_EQ(a.value().flux, b.value().flux);
        EXPECT_EQ(a.value().ivar, u.value().ivar);
        const long long masked = bins_with_badcolumn(a.value().mask);
        std::printf("%s: %lld of %zu bins BADCOLUMN\n", cams[i].c_str(), masked,
                    a.value().mask.size());
        EXPECT_GT(masked, a.value().nwave) << "the strong column covers a whole fibre";
        EXPECT_EQ(bins_with_badcolumn(u.value().mask), 0);
        for (const char* name : {"FIBER", "FIBERSTATUS", "TARGETID"})
            EXPECT_EQ(fibermap_column(output, name), fibermap_column(reference, name)) << name;
        // The strong column lies on fibre 2's trace: BADAMPR (bit 23) or BADAMPZ (bit 24).
        const long long badamp = cams[i][0] == 'r' ? (1LL << 23) : (1LL << 24);
        EXPECT_EQ(fibermap_column(output, "FIBERSTATUS").at(2) & badamp, badamp);
        EXPECT_EQ(fibermap_column(plain, "FIBERSTATUS").at(2) & badamp, 0);
    }
    // The writer logs a frame after it is marked done in Redis: wait for the lines.
    EXPECT_TRUE(eventually(10, [&] {
        return fleet.count_log_lines("badcolumn_mask=applied") == 2;
    })) << fleet.count_log_lines("badcolumn_mask=applied");
    expect_clean(fleet.check({71}, cams), "bad-column frames");
}

// desi_proc without a table for the night: a warning, and the frame without the mask.
TEST(FleetBadColumns, MissingTableIsAWarningAndAnUnmaskedFrame)
{
    Fleet fleet("badcolumns-missing");
    const std::vector<std::string> preprocs = fleet.make_exposure(72, {"r2"});
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(72), 0);
    ASSERT_TRUE(fleet.wait_exposure(72, 60));
    EXPECT_EQ(fleet.frame_field(72, "r2", "state"), "done");
    EXPECT_EQ(fleet.count_log_lines("badcolumns missing file=" + desispec_table(fleet, "r2")), 1);
    EXPECT_TRUE(eventually(10, [&] {
        return fleet.count_log_lines("badcolumn_mask=missing") == 1;
    })) << fleet.count_log_lines("badcolumn_mask=missing");
    const std::string plain = fleet.dir() + "/plain-r2.fits";
    ASSERT_EQ(extract_reference(fleet, preprocs[0], "r2", plain, ""), 0);
    auto a = read_frame(fleet.output_path(72, "r2"));
    auto u = read_frame(plain);
    ASSERT_TRUE(a.is_ok() && u.is_ok());
    EXPECT_EQ(a.value().mask, u.value().mask);
    EXPECT_EQ(bins_with_badcolumn(a.value().mask), 0);
    expect_clean(fleet.check({72}, {"r2"}), "no bad-column table");
}

// A malformed table (here named by --badcolumns) fails the frame with the file named; the
// other camera's good table goes through; nothing is written for the failed frame.
TEST(FleetBadColumns, MalformedTableFailsTheFrameAndWritesNothing)
{
    Fleet fleet("badcolumns-malformed");
    fleet.make_exposure(73, {"b3", "r3"});
    const std::string tables = fleet.dir() + "/tables";
    fs::create_directories(tables);
    std::ofstream(tables + "/b3.csv") << "CAMERA,COLUMN,SIGMA\nb3,100,0.1\n";
    ASSERT_TRUE(write_badcolumns_csv(tables + "/r3.csv", table_for(fleet, "r3"), "r3").is_ok());
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(73, kNight, {"--badcolumns", tables + "/{camera}.csv"}), 0);
    ASSERT_TRUE(fleet.wait_exposure(73, 60));
    EXPECT_EQ(fleet.frame_field(73, "b3", "state"), "failed");
    const std::string error = fleet.frame_field(73, "b3", "error");
    EXPECT_NE(error.find(tables + "/b3.csv"), std::string::npos) << error;
    EXPECT_NE(error.find("lacks column ELEC_PER_SEC"), std::string::npos) << error;
    EXPECT_FALSE(fs::exists(fleet.output_path(73, "b3")));
    EXPECT_EQ(fleet.frame_field(73, "r3", "state"), "done");
    auto r3 = read_frame(fleet.output_path(73, "r3"));
    ASSERT_TRUE(r3.is_ok());
    EXPECT_GT(bins_with_badcolumn(r3.value().mask), 0);
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
}

}  // namespace
}  // namespace ex2d::fleet_test
