// SPDX-License-Identifier: BSD-3-Clause
// The writer's output storage failing for real (docs/operations.md, "Output storage failing"):
// a tmpfs too small for a frame (ENOSPC), remounted read-only (EROFS), an exposure folder
// replaced by a file (ENOTDIR). While it fails the frame is not done, no file is left behind,
// the writer says so (log, metric, process hash, ex2dctl status, the frame's error) and keeps
// the frame without re-delivery; once the storage is back every frame completes once,
// identical to `ex2d extract`. Mounting needs root: the tests skip without it. ENOSPC in the
// fsync of the file or of the folder, which a tmpfs never reports, comes from a test hook
// (EX2D_TEST_FAIL_FSYNC_FILE, _DIR) while a flag file exists.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fleet_expect.hpp"
#include "fleet_harness.hpp"
#include "test_hooks.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kCameras = {"b0", "r0", "z0"};

/// A tmpfs mounted at a folder for the life of the object, unmounted (lazily, so that a
/// process still holding a file in it cannot keep it) also when the test fails.
class TmpfsMount {
public:
    TmpfsMount(const std::string& path, const std::string& options) : path_(path)
    {
        fs::create_directories(path_);
        if (::mount("ex2d-test", path_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
            error_ = std::string("mount -t tmpfs -o ") + options + " " + path_ + ": " +
                     std::strerror(errno);
        }
    }
    ~TmpfsMount()
    {
        if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
    }
    TmpfsMount(const TmpfsMount&) = delete;
    TmpfsMount& operator=(const TmpfsMount&) = delete;

    /// Empty when mounted, else why not.
    const std::string& error() const { return error_; }
    /// mount -o remount,OPTIONS (read_only: remount,ro); an error message or empty.
    std::string remount(const std::string& options, bool read_only = false) const
    {
        unsigned long flags = MS_REMOUNT;
        if (read_only) flags |= MS_RDONLY;
        if (::mount(nullptr, path_.c_str(), nullptr, flags, options.c_str()) != 0) {
            return "remount " + options + ": " + std::strerror(errno);
        }
        return {};
    }

private:
    std::string path_;
    std::string error_;
};

/// A folder bind-mounted read-only onto itself: the folder made unwritable, even for root
/// (whom file modes do not stop). Unmounted (lazily) at the end of the object's life or by
/// release().
class ReadOnlyFolder {
public:
    explicit ReadOnlyFolder(const std::string& path) : path_(path)
    {
        fs::create_directories(path_);
        if (::mount(path_.c_str(), path_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
            error_ = "mount --bind " + path_ + ": " + std::strerror(errno);
            return;
        }
        mounted_ = true;
        if (::mount(nullptr, path_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) !=
            0) {
            error_ = "mount -o remount,bind,ro " + path_ + ": " + std::strerror(errno);
        }
    }
    ~ReadOnlyFolder() { release(); }
    ReadOnlyFolder(const ReadOnlyFolder&) = delete;
    ReadOnlyFolder& operator=(const ReadOnlyFolder&) = delete;

    const std::string& error() const { return error_; }
    void release()
    {
        if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
        mounted_ = false;
    }

private:
    std::string path_;
    std::string error_;
    bool mounted_ = false;
};

#define EX2D_REQUIRE_ROOT()                                                                     \
    do {                                                                                        \
        if (::geteuid() != 0) {                                                                 \
            GTEST_SKIP() << "mounting a tmpfs needs root (CAP_SYS_ADMIN); run the fleet tests " \
                            "as root to test the writer's storage faults";                      \
        }                                                                                       \
    } while (0)

/// The sum of a counter's series named `name` in a writer's /metrics.
double metric_sum(Fleet& fleet, const std::string& process, const std::string& name)
{
    const std::string address = fleet.redis({"HGET", "ex2d:proc:" + process, "http"}).str;
    std::istringstream in(http_get(address, "/metrics"));
    double sum = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name, 0) != 0) continue;
        const char next = line.size() > name.size() ? line[name.size()] : '\0';
        if (next != '{' && next != ' ') continue;
        sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
}

/// Files anywhere under `dir` that are not frames (temporaries, parts).
int stray_files(const std::string& dir)
{
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && (name.find(".tmp-") != std::string::npos ||
                                    name.find(".replaced-") != std::string::npos)) {
            ++n;
        }
    }
    return n;
}

/// What a storage fault test saw while the storage failed.
struct DuringFault {
    double errors = 0;             ///< ex2d_storage_errors_total
    double storage_ok = 1;         ///< ex2d_storage_ok
    std::string storage;           ///< the writer's process hash `storage`
    std::string storage_error;     ///< and `storage_error`
    std::string status;            ///< ex2dctl status's text
    std::vector<std::string> err;  ///< each frame's `error`
    int done = 0;                  ///< frames done during the fault
    int strays = 0;                ///< temporary files under out/
};

/// Waits for the writer to report the fault, holds it `hold_s` (longer than several leases,
/// so that a frame given up to its lease would be re-delivered), and records what is seen.
DuringFault observe_fault(Fleet& fleet, int expid, double hold_s)
{
    DuringFault seen;
    EXPECT_TRUE(eventually(60, [&] {
        return fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str == "failing";
    })) << "the writer never said its storage fails";
    std::this_thread::sleep_for(std::chrono::duration<double>(hold_s));
    seen.errors = metric_sum(fleet, "writer-1", "ex2d_storage_errors_total");
    seen.storage_ok = metric_sum(fleet, "writer-1", "ex2d_storage_ok");
    seen.storage = fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str;
    seen.storage_error = fleet.redis({"HGET", "ex2d:proc:writer-1", "storage_error"}).str;
    fleet.ctl({"status"}, &seen.status);
    for (const auto& cam : kCameras) {
        seen.err.push_back(fleet.frame_field(expid, cam, "error"));
        seen.done += fleet.frame_field(expid, cam, "state") == "done";
    }
    seen.strays = stray_files(fleet.dir() + "/out");
    return seen;
}

void expect_fault_reported(const DuringFault& seen, const std::string& errno_text)
{
    std::printf(
        "during the fault: %g storage errors, ex2d_storage_ok %g, storage '%s' (%s), "
        "%d of 3 frames done, %d temporary files\n",
        seen.errors, seen.storage_ok, seen.storage.c_str(), seen.storage_error.c_str(), seen.done,
        seen.strays);
    EXPECT_GT(seen.errors, 0);
    EXPECT_EQ(seen.storage_ok, 0);
    EXPECT_EQ(seen.storage, "failing");
    EXPECT_NE(seen.storage_error.find(errno_text), std::string::npos) << seen.storage_error;
    EXPECT_NE(seen.status.find("storage failing since"), std::string::npos) << seen.status;
    EXPECT_EQ(seen.done, 0);
    EXPECT_EQ(seen.strays, 0);
    int with_error = 0;
    for (const auto& e : seen.err) with_error += e.find(errno_text) != std::string::npos;
    EXPECT_GE(with_error, 1) << "no frame's error names " << errno_text;
}

/// Seconds from now until every frame of the exposure is done (-1 past `timeout_s`).
double seconds_until_done(Fleet& fleet, int expid, double timeout_s)
{
    const auto back = Clock::now();
    const bool done = eventually(timeout_s, [&] {
        for (const auto& cam : kCameras) {
            if (fleet.frame_field(expid, cam, "state") != "done") return false;
        }
        return true;
    });
    return done ? std::chrono::duration<double>(Clock::now() - back).count() : -1;
}

/// After the storage is back: all frames done once, at their first delivery, no partial
/// file, identical to `ex2d extract`; the writer's storage ok again. `earlier`: exposures
/// written before the fault, whose files are in the same output tree.
void expect_recovered(Fleet& fleet, int expid, const std::vector<std::string>& preprocs,
                      const char* what, std::vector<int> earlier = {})
{
    ASSERT_TRUE(fleet.wait_exposure(expid, 60));
    earlier.push_back(expid);
    const Outcome o = fleet.check(earlier, kCameras);
    expect_clean(o, what);
    EXPECT_EQ(o.done, 3 * int(earlier.size()));
    EXPECT_EQ(o.dead, 0);
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:exposure:nightly:" + expid8(expid), "state"}).str, "done");
    for (const auto& cam : kCameras) {
        SCOPED_TRACE(cam);
        // Delivered and extracted once: the outage used none of queue.max_deliveries.
        EXPECT_EQ(fleet.frame_field(expid, cam, "attempt"), "1");
        EXPECT_EQ(fleet.frame_field(expid, cam, "tries"), "1");
        EXPECT_EQ(fleet.frame_field(expid, cam, "error"), "");
    }
    EXPECT_EQ(temporaries_under(fleet.dir() + "/out"), 0);
    EXPECT_TRUE(eventually(5, [&] {
        return fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str == "ok";
    }));
    EXPECT_EQ(metric_sum(fleet, "writer-1", "ex2d_storage_ok"), 1);
    EXPECT_EQ(fleet.count_log_lines("storage recovered after"), 1);
    expect_matches_extract(fleet, expid, kCameras, preprocs);
}

/// Retries every 0.2 s doubling to 1 s, so that recovery is measured in about a second.
const std::map<std::string, std::string> kFastRetry = {{"writer.storage_retry_s", "0.2"},
                                                       {"writer.storage_retry_max_s", "1"}};

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
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", kFastRetry);
    ASSERT_EQ(fleet.submit(expid), 0);

    expect_fault_reported(observe_fault(fleet, expid, 15), std::strerror(ENOSPC));
    ASSERT_EQ(out.remount("size=64m"), "");
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("ENOSPC: storage back -> all 3 frames done in %.2f s\n", recovery_s);
    EXPECT_GE(recovery_s, 0);
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
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", kFastRetry);
    ASSERT_EQ(fleet.submit(82), 0);
    ASSERT_TRUE(fleet.wait_exposure(82, 60));

    ASSERT_EQ(out.remount("", true), "");
    ASSERT_EQ(fleet.submit(83), 0);
    expect_fault_reported(observe_fault(fleet, 83, 6), std::strerror(EROFS));
    ASSERT_EQ(out.remount(""), "");
    const double recovery_s = seconds_until_done(fleet, 83, 60);
    std::printf("EROFS: storage back -> all 3 frames done in %.2f s\n", recovery_s);
    EXPECT_GE(recovery_s, 0);
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
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", kFastRetry);
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    fs::remove(folder);
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("ENOTDIR: folder back -> all 3 frames done in %.2f s\n", recovery_s);
    // create_directories() reports the file in the way as "File exists" or "Not a directory".
    const bool named = seen.storage_error.find(std::strerror(ENOTDIR)) != std::string::npos ||
                       seen.storage_error.find(std::strerror(EEXIST)) != std::string::npos;
    EXPECT_TRUE(named) << seen.storage_error;
    expect_fault_reported(seen, "cannot create the output folder");
    EXPECT_GE(recovery_s, 0);
    expect_recovered(fleet, expid, preprocs, "storage ENOTDIR");
}

/// ENOSPC in the writer's fsync of `what` (FILE: its temporary file; DIR: the exposure folder
/// after the rename) for 6 s, through the test hook, then the flag file is removed.
void fsync_fails_then_recovers(const std::string& what, int expid)
{
    Fleet fleet("storage-fsync-" + what);
    const auto preprocs = fleet.make_exposure(expid, kCameras);
    const std::string flag = fleet.dir() + "/storage-full";
    std::ofstream(flag) << "full\n";
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", kFastRetry, {{"EX2D_TEST_FAIL_FSYNC_" + what, flag}});
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    fs::remove(flag);
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("ENOSPC in the fsync (%s): storage back -> all 3 frames done in %.2f s\n",
                what.c_str(), recovery_s);
    expect_fault_reported(seen, "fsync failed: " + std::string(std::strerror(ENOSPC)));
    EXPECT_GE(recovery_s, 0);
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
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1", {{"worker.result_timeout_s", "1"}});
    fleet.start("writer", "writer-1", kFastRetry);
    ASSERT_EQ(fleet.submit(expid), 0);

    expect_fault_reported(observe_fault(fleet, expid, 15), std::strerror(ENOSPC));
    ASSERT_EQ(out.remount("size=64m"), "");
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("ENOSPC, results handed back: storage back -> all 3 frames done in %.2f s\n",
                recovery_s);
    EXPECT_GE(recovery_s, 0);
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
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1");
    fleet.start("writer", "writer-1", kFastRetry);
    ASSERT_EQ(fleet.submit(expid), 0);

    const DuringFault seen = observe_fault(fleet, expid, 6);
    folder.release();
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("unwritable folder: writable again -> all 3 frames done in %.2f s\n", recovery_s);
    expect_fault_reported(seen, "cannot create the file: " + std::string(std::strerror(EROFS)));
    EXPECT_GE(recovery_s, 0);
    expect_recovered(fleet, expid, preprocs, "storage: unwritable exposure folder");
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
    const double recovery_s = seconds_until_done(fleet, expid, 60);
    std::printf("folder removed mid-write -> all 3 frames done in %.2f s\n", recovery_s);
    EXPECT_GE(recovery_s, 0);
    EXPECT_GE(fleet.count_log_lines("storage failing (enoent)"), 1);
    EXPECT_GE(fleet.count_log_lines(std::string("cannot rename the temporary file: ") +
                                    std::strerror(ENOENT)),
              1);
    EXPECT_GT(metric_sum(fleet, "writer-1", "ex2d_storage_errors_total"), 0);
    expect_recovered(fleet, expid, preprocs, "storage: exposure folder removed mid-write");
}

}  // namespace
}  // namespace ex2d::fleet_test
