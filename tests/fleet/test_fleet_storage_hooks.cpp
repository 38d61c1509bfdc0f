// SPDX-License-Identifier: BSD-3-Clause
// The writer's storage faults that a mount cannot make, through the test hooks: ENOSPC in the
// fsync of the temporary file or of the folder (EX2D_TEST_FAIL_FSYNC_FILE, _DIR, while a flag
// file exists; a tmpfs never fails an fsync), the exposure folder removed while the writer
// waits before its rename (EX2D_TEST_DELAY_WRITE_MS), and a writer stopped while its storage
// fails.
#include <csignal>
#include <fstream>

#include "storage_faults.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

using namespace storage_faults;

/// ENOSPC in the writer's fsync of `what` (FILE: its temporary file; DIR: the exposure folder
/// after the rename) for 6 s, through the test hook, then the flag file is removed.
void fsync_fails_then_recovers(const std::string& what, int expid)
{
    Fleet fleet("storage-fsync-" + what);
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    const std::string flag = fleet.dir() + "/storage-full";
    std::ofstream(flag) << "full\n";
    start_roles(fleet, {}, {{"EX2D_TEST_FAIL_FSYNC_" + what, flag}});
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    fs::remove(flag);
    timed_recovery(fleet, expid, "ENOSPC in the fsync (" + what + "): storage back");
    expect_fault_reported(seen, "fsync failed: " + std::string(std::strerror(ENOSPC)));
    expect_recovered(fleet, expid, preprocs, ("storage ENOSPC in fsync " + what).c_str());
}

// The temporary file's fsync fails: it is removed each time, and the frame written after.
TEST(FleetStorage, FsyncOfTheFileFailingLosesNothing)
{
    EX2D_REQUIRE_TEST_HOOKS();
    fsync_fails_then_recovers("FILE", 85);
}

// The folder's fsync after the rename fails: the frame is in place but not durable, so it is
// not done; the next try finds it (same provenance), fsyncs the folder and finishes it.
TEST(FleetStorage, FsyncOfTheFolderFailingLosesNothing)
{
    EX2D_REQUIRE_TEST_HOOKS();
    fsync_fails_then_recovers("DIR", 86);
}

// The exposure's output folder removed while the writer waits before its rename (test hook,
// 1.5 s): the temporary file goes with it and the rename fails with ENOENT; the next try
// makes the folder again. The storage comes back by itself: the recovery time is from the
// removal to the exposure done.
TEST(FleetStorage, ExposureFolderRemovedMidWriteLosesNothing)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("storage-enoent");
    const int expid = 89;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    Process& writer =
        fleet.start("writer", "writer-1", kFastRetry, {{"EX2D_TEST_DELAY_WRITE_MS", "1500"}});
    ASSERT_EQ(fleet.submit(expid), 0);

    ASSERT_TRUE(eventually(60, [&] {
        return writer.log().find("EX2D_TEST_DELAY_WRITE_MS: sleeping") != std::string::npos;
    }));
    const fs::path folder = fs::path(fleet.output_path(expid, "b0")).parent_path();
    // The first frame's temporary file is the folder's only file: nothing done is removed.
    std::error_code ec;
    EXPECT_EQ(std::distance(fs::directory_iterator(folder, ec), fs::directory_iterator()), 1);
    fs::remove_all(folder);
    timed_recovery(fleet, expid, "folder removed mid-write");
    EXPECT_GE(fleet.count_log_lines("storage failing (enoent)"), 1);
    EXPECT_GE(fleet.count_log_lines(std::string("cannot rename the temporary file: ") +
                                    std::strerror(ENOENT)),
              1);
    EXPECT_GT(metric_sum(fleet, "writer-1", "ex2d_storage_errors_total"), 0);
    expect_recovered(fleet, expid, preprocs, "storage: exposure folder removed mid-write");
}

// SIGTERM to a writer whose temporary file's fsync keeps failing, with a drain deadline of
// 20 s: it does not wait for a write that cannot succeed, hands its frame back and exits 0 at
// once, leaving no file; a writer started once the storage is back writes the exposure.
TEST(FleetStorage, WriterStoppedWhileItsStorageFailsHandsItsFrameBack)
{
    EX2D_REQUIRE_TEST_HOOKS();
    Fleet fleet("storage-drain");
    const int expid = 90;
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    const std::string flag = fleet.dir() + "/storage-full";
    std::ofstream(flag) << "full\n";
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    std::map<std::string, std::string> settings = kFastRetry;
    settings["service.drain_timeout_s"] = "20";
    Process& first =
        fleet.start("writer", "writer-1", settings, {{"EX2D_TEST_FAIL_FSYNC_FILE", flag}});
    ASSERT_EQ(fleet.submit(expid), 0);
    ASSERT_TRUE(eventually(60, [&] {
        return fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str == "failing";
    }));

    const auto term = std::chrono::steady_clock::now();
    first.signal(SIGTERM);
    const int code = first.wait(25);
    const double exit_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - term).count();
    std::printf("writer stopped while its storage fails exited %d after %.2f s\n", code, exit_s);
    EXPECT_EQ(code, 0);
    EXPECT_LT(exit_s, 5.0) << "it waited for a write that cannot succeed";
    EXPECT_NE(first.log().find("stopping while the output storage fails: frame handed back"),
              std::string::npos)
        << first.log();
    EXPECT_NE(first.log().find("result=applied"), std::string::npos);
    EXPECT_EQ(first.log().find("drain deadline reached"), std::string::npos);
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
    EXPECT_EQ(fleet.redis({"HLEN", "ex2d:temporaries"}).integer, 0);

    fs::remove(flag);
    fleet.start("writer", "writer-2");
    ASSERT_TRUE(fleet.wait_exposure(expid, 60));
    const Outcome o = fleet.check({expid}, kCameras);
    expect_clean(o, "writer stopped while its storage fails");
    EXPECT_EQ(o.done, 3);
    EXPECT_EQ(o.dead, 0);
    expect_matches_extract(fleet, expid, kCameras, preprocs);
}

}  // namespace
}  // namespace ex2d::fleet_test
