// SPDX-License-Identifier: BSD-3-Clause
// Trace shifts in the fleet (issue 31, items 5 and 6): the reader shifts the traces before the
// worker extracts, records the shifts in the frame's header and Redis hash and can write the
// shifted PSF where desi_proc does; a frame it cannot measure is extracted with the input PSF
// and flagged, never silently.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "ex2d/psf_io.hpp"
#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;

int extract_reference(Fleet& fleet, const std::string& preproc, const std::string& output)
{
    Process tool("extract",
                 {EX2D_TOOL_PATH, "extract", "-i", preproc, "-p", fleet.psf_path("r0"), "-o",
                  output, "-w", "6000,6100,0.8", "-n", "25", "--threads", "1", "--psferr", "0.01"},
                 {}, fleet.dir() + "/logs/extract.log");
    return tool.wait(60);
}

// Forced to continuum (x only) on the harness's small science frame: the shifts are measured,
// recorded and the shifted PSF is written beside the frame; the worker extracted with it.
TEST(FleetTraceShifts, ContinuumShiftsRecordedAndPsfWritten)
{
    Fleet fleet("traceshift");
    const auto preprocs = fleet.make_exposure(81, {"r0"});
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(81, "20261122", {"--trace-shifts", "continuum", "--write-shifted-psf"}),
              0);
    ASSERT_TRUE(fleet.wait_exposure(81, 90));
    EXPECT_EQ(fleet.frame_field(81, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(81, "r0", "trace_shifts"), "continuum");
    const double meandx = std::stod(fleet.frame_field(81, "r0", "meandx"));
    EXPECT_LT(std::fabs(meandx), 0.02) << "the frame was simulated through the PSF's traces";
    EXPECT_EQ(fleet.frame_field(81, "r0", "meandy"), "0.0000");

    auto frame = read_frame(fleet.output_path(81, "r0"));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().header.get_string("TRSHIFT").value_or(""), "continuum");
    EXPECT_NEAR(frame.value().header.get_double("MEANDX").value_or(99), meandx, 1e-4);
    EXPECT_EQ(frame.value().header.get_string("ORIG_PSF").value_or(""), fleet.psf_path("r0"));

    const std::string shifted =
        fs::path(fleet.output_path(81, "r0")).parent_path() / "psf-r0-00000081.fits";
    auto psf = read_psf(shifted);
    ASSERT_TRUE(psf.is_ok()) << psf.status().to_string();
    EXPECT_EQ(psf.value().psf_header.get_string("IN_PSF").value_or(""), fleet.psf_path("r0"));
    EXPECT_EQ(psf.value().psf_header.get_string("IN_IMAGE").value_or(""), preprocs[0]);
    expect_clean(fleet.check({81}, {"r0"}), "trace-shifted frame");
}

// desi_proc's choice for a SCIENCE frame is sky; the small frame (6000-6100 A) has no sky
// line: the rule is to extract with the input PSF and flag the frame in its header and in
// Redis, with the reason.
TEST(FleetTraceShifts, FrameWithoutSkyLinesIsFlaggedAndExtractedWithTheInputPsf)
{
    Fleet fleet("traceshift-fail");
    const auto preprocs = fleet.make_exposure(82, {"r0"});
    for (const char* role : {"reader", "worker", "writer"})
        fleet.start(role, std::string(role) + "-1");
    ASSERT_EQ(fleet.submit(82, "20261122", {"--trace-shifts", "auto"}), 0);
    ASSERT_TRUE(fleet.wait_exposure(82, 90));
    EXPECT_EQ(fleet.frame_field(82, "r0", "state"), "done");
    EXPECT_EQ(fleet.frame_field(82, "r0", "trace_shifts"), "failed");
    const std::string reason = fleet.frame_field(82, "r0", "trace_shift_error");
    EXPECT_NE(reason.find("no reference line"), std::string::npos) << reason;
    EXPECT_NE(reason.find(preprocs[0]), std::string::npos) << reason;

    auto frame = read_frame(fleet.output_path(82, "r0"));
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().header.get_string("TRSHIFT").value_or(""), "FAILED");
    EXPECT_FALSE(frame.value().header.get_string("TRSHFAIL").value_or("").empty());
    const std::string reference = fleet.dir() + "/reference-82.fits";
    ASSERT_EQ(extract_reference(fleet, preprocs[0], reference), 0);
    auto b = read_frame(reference);
    ASSERT_TRUE(b.is_ok());
    EXPECT_EQ(frame.value().flux, b.value().flux) << "extracted with the input PSF";
    EXPECT_GE(fleet.count_log_lines("trace-shifts failed"), 1);
}

}  // namespace
}  // namespace ex2d::fleet_test
