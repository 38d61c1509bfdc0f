// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Assertions the fleet tests share (GoogleTest; the chaos soak uses the harness without it).

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ex2d/frame_io.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {

/// Expects no lost, duplicated or partial frame in `o`, printing its report under `what`.
inline void expect_clean(const Outcome& o, const char* what)
{
    std::printf("%s: %s\n", what, o.report().c_str());
    EXPECT_EQ(o.lost, 0) << what;
    EXPECT_EQ(o.duplicates, 0) << what;
    EXPECT_EQ(o.partial, 0) << what;
}

/// Each frame of the exposure (`cameras`, from `preprocs`, with the small frames' options) is
/// what `ex2d extract` writes for its preproc, bit for bit. The reference names the workers'
/// backend (cpu, config/ex2d.yaml): the tool's default, auto, takes a device wherever one is
/// found (the CUDA emulation's build has one), and the device's frames differ in the last bits.
inline void expect_matches_extract(Fleet& fleet, int expid, const std::vector<std::string>& cameras,
                                   const std::vector<std::string>& preprocs)
{
    for (std::size_t i = 0; i < cameras.size(); ++i) {
        const std::string reference =
            fleet.dir() + "/reference-" + std::to_string(expid) + "-" + cameras[i] + ".fits";
        Process tool(
            "extract",
            {EX2D_TOOL_PATH, "extract", "-i", preprocs[i], "-p", fleet.psf_path(cameras[i]), "-o",
             reference, "-w", "6000,6100,0.8", "-n", "25", "--threads", "1", "--backend", "cpu",
             "--psferr", cameras[i][0] == 'b' ? "0.04" : "0.01"},
            {}, fleet.dir() + "/logs/extract.log");
        ASSERT_EQ(tool.wait(60), 0);
        auto a = read_frame(fleet.output_path(expid, cameras[i]));
        auto b = read_frame(reference);
        ASSERT_TRUE(a.is_ok()) << a.status().to_string();
        ASSERT_TRUE(b.is_ok()) << b.status().to_string();
        EXPECT_EQ(a.value().flux, b.value().flux) << cameras[i];
        EXPECT_EQ(a.value().ivar, b.value().ivar) << cameras[i];
        EXPECT_EQ(a.value().mask, b.value().mask) << cameras[i];
        EXPECT_EQ(a.value().resolution, b.value().resolution) << cameras[i];
        EXPECT_EQ(a.value().chi2pix, b.value().chi2pix) << cameras[i];
        EXPECT_EQ(a.value().wave, b.value().wave) << cameras[i];
        EXPECT_EQ(a.value().hdu_names, b.value().hdu_names) << cameras[i];
        EXPECT_EQ(a.value().header.get_string("EX2DJOB").value_or(""),
                  "nightly/" + expid8(expid) + "/" + cameras[i]);
        EXPECT_EQ(a.value().header.get_string("CAMERA").value_or(""), cameras[i]);
    }
}

}  // namespace ex2d::fleet_test
