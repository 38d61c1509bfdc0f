// SPDX-License-Identifier: BSD-3-Clause
// The writer's output storage failing for real (docs/operations.md, "Output storage failing"):
// a tmpfs too small for a frame (ENOSPC), remounted read-only (EROFS), an exposure folder
// replaced by a file (ENOTDIR). While it fails the frame is not done, no file is left behind,
// the writer says so (log, metric, process hash, ex2dctl status, the frame's error) and keeps
// the frame without re-delivery; once the storage is back every frame completes once,
// identical to `ex2d extract`. Mounting needs root: the tests skip without it. The faults a
// mount cannot make are in test_fleet_storage_hooks.cpp.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "storage_faults.hpp"

namespace ex2d::fleet_test {
namespace {

using namespace storage_faults;

// The output root on a 64 KiB tmpfs, smaller than one frame: every write ends in ENOSPC for
// 15 s (more than queue.max_deliveries x the 2 s lease), then the tmpfs grows to 64 MiB.
TEST(FleetStorage, FullFileSystemLosesNothingAndUsesNoDelivery)
{
    EX2D_REQUIRE_ROOT();
    Fleet fleet("storage-enospc");
    const int expid = 81;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    TmpfsMount out(fleet.dir() + "/out", "size=64k");
    ASSERT_EQ(out.error(), "");
    start_roles(fleet);
    ASSERT_EQ(fleet.submit(expid), 0);

    expect_fault_reported(observe_fault(fleet, expid, 15), std::strerror(ENOSPC));
    ASSERT_EQ(out.remount("size=64m"), "");
    timed_recovery(fleet, expid, "ENOSPC: storage back");
    expect_recovered(fleet, expid, preprocs, "storage ENOSPC");
}

// The output tmpfs remounted read-only after a first exposure: the second one's writes end in
// EROFS for 6 s, then the tmpfs is remounted read-write.
TEST(FleetStorage, ReadOnlyFileSystemLosesNothing)
{
    EX2D_REQUIRE_ROOT();
    Fleet fleet("storage-erofs");
    fleet.make_exposure(82, kCameras);
    const auto preprocs = fleet.make_exposure(83, kCameras);
    TmpfsMount out(fleet.dir() + "/out", "size=64m");
    ASSERT_EQ(out.error(), "");
    start_roles(fleet);
    ASSERT_EQ(fleet.submit(82), 0);
    ASSERT_TRUE(fleet.wait_exposure(82, 60));

    ASSERT_EQ(out.remount("", true), "");
    ASSERT_EQ(fleet.submit(83), 0);
    expect_fault_reported(observe_fault(fleet, 83, 6), std::strerror(EROFS));
    ASSERT_EQ(out.remount(""), "");
    timed_recovery(fleet, 83, "EROFS: storage back");
    expect_recovered(fleet, 83, preprocs, "storage EROFS", {82});
}

// The exposure's output folder is a file (a mistaken copy, another tool's output): creating
// it fails with ENOTDIR for 6 s; the file is then removed.
TEST(FleetStorage, ExposureFolderReplacedByAFileLosesNothing)
{
    EX2D_REQUIRE_ROOT();
    Fleet fleet("storage-enotdir");
    const int expid = 84;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    TmpfsMount out(fleet.dir() + "/out", "size=64m");
    ASSERT_EQ(out.error(), "");
    const fs::path folder = fs::path(fleet.output_path(expid, "b0")).parent_path();
    fs::create_directories(folder.parent_path());
    std::ofstream(folder) << "not a folder\n";
    start_roles(fleet);
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    fs::remove(folder);
    timed_recovery(fleet, expid, "ENOTDIR: folder back");
    // create_directories() reports the file in the way as "File exists" or "Not a directory".
    const bool named = seen.storage_error.find(std::strerror(ENOTDIR)) != std::string::npos ||
                       seen.storage_error.find(std::strerror(EEXIST)) != std::string::npos;
    EXPECT_TRUE(named) << seen.storage_error;
    expect_fault_reported(seen, "cannot create the output folder");
    expect_recovered(fleet, expid, preprocs, "storage ENOTDIR");
}

// ENOSPC for 15 s while the worker gives up on a result after 1 s (worker.result_timeout_s):
// the frames behind the one the writer holds are handed back and extracted again many times,
// more than queue.max_deliveries (5); those extractions are `undelivered`, not charged, and
// no frame goes dead.
TEST(FleetStorage, OutageLongerThanTheResultTimeoutKillsNoFrame)
{
    EX2D_REQUIRE_ROOT();
    Fleet fleet("storage-undelivered");
    const int expid = 87;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    TmpfsMount out(fleet.dir() + "/out", "size=64k");
    ASSERT_EQ(out.error(), "");
    start_roles(fleet, {{"worker.result_timeout_s", "1"}});
    ASSERT_EQ(fleet.submit(expid), 0);

    expect_fault_reported(observe_fault(fleet, expid, 15), std::strerror(ENOSPC));
    // The outage lasts until a frame has been extracted more often than queue.max_deliveries
    // (5): 15 s is enough at full speed, not under ThreadSanitizer (5 tries there once).
    EXPECT_TRUE(eventually(60, [&] {
        for (const auto& cam : kCameras) {
            const std::string tries = fleet.frame_field(expid, cam, "tries");
            if (!tries.empty() && std::stoll(tries) > 5) return true;
        }
        return false;
    })) << "no frame was extracted more than 5 times during the outage";
    ASSERT_EQ(out.remount("size=64m"), "");
    timed_recovery(fleet, expid, "ENOSPC, results handed back: storage back");
    ASSERT_TRUE(fleet.wait_exposure(expid, 60));
    const Outcome o = fleet.check({expid}, kCameras);
    expect_clean(o, "storage ENOSPC, results handed back");
    EXPECT_EQ(o.done, 3);
    EXPECT_EQ(o.dead, 0);
    long long most_tries = 0;
    for (const auto& cam : kCameras) {
        SCOPED_TRACE(cam);
        const long long tries = std::stoll(fleet.frame_field(expid, cam, "tries"));
        const std::string undelivered = fleet.frame_field(expid, cam, "undelivered");
        std::printf("%s: attempt %s, tries %lld, undelivered %s\n", cam.c_str(),
                    fleet.frame_field(expid, cam, "attempt").c_str(), tries, undelivered.c_str());
        // Every extraction but the one written found no writer.
        EXPECT_EQ(tries - std::stoll(undelivered.empty() ? "0" : undelivered), 1);
        most_tries = std::max(most_tries, tries);
    }
    EXPECT_GT(most_tries, 5) << "no frame was extracted more often than queue.max_deliveries";
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
    expect_matches_extract(fleet, expid, kCameras, preprocs);
}

// The exposure's output folder made unwritable (bind-mounted read-only onto itself) for 6 s:
// creating the temporary file fails with EROFS; then the bind mount is removed.
TEST(FleetStorage, UnwritableExposureFolderLosesNothing)
{
    EX2D_REQUIRE_ROOT();
    Fleet fleet("storage-unwritable");
    const int expid = 88;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    ReadOnlyFolder folder(fs::path(fleet.output_path(expid, "b0")).parent_path().string());
    ASSERT_EQ(folder.error(), "");
    start_roles(fleet);
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    folder.release();
    timed_recovery(fleet, expid, "unwritable folder: writable again");
    expect_fault_reported(seen, "cannot create the file: " + std::string(std::strerror(EROFS)));
    expect_recovered(fleet, expid, preprocs, "storage: unwritable exposure folder");
}

}  // namespace
}  // namespace ex2d::fleet_test
