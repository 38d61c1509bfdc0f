// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// What the tests of the writer's storage faults share (test_fleet_storage*.cpp): mounts made
// and undone by the test, and what is asserted while the storage fails and after it is back.

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fleet_expect.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test::storage_faults {

namespace fs = std::filesystem;

inline const std::vector<std::string> kCameras = {"b0", "r0", "z0"};

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
inline double metric_sum(Fleet& fleet, const std::string& process, const std::string& name)
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
inline int stray_files(const std::string& dir)
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
    /// The fewest temporary files under out/ in samples 50 ms apart over the hold: a try's own
    /// temporary exists while it is written (and its fsync fails), one left behind by a failed
    /// try is in every sample.
    int strays = 0;
    int strays_most = 0;  ///< the most in one sample (the tries in progress)
};

/// Waits for the writer to report the fault, holds it `hold_s` (longer than several leases,
/// so that a frame given up to its lease would be re-delivered), and records what is seen.
inline DuringFault observe_fault(Fleet& fleet, int expid, double hold_s)
{
    DuringFault seen;
    EXPECT_TRUE(eventually(60, [&] {
        return fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str == "failing";
    })) << "the writer never said its storage fails";
    const auto hold_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(hold_s);
    seen.strays = std::numeric_limits<int>::max();
    while (std::chrono::steady_clock::now() < hold_end) {
        const int now = stray_files(fleet.dir() + "/out");
        seen.strays = std::min(seen.strays, now);
        seen.strays_most = std::max(seen.strays_most, now);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    seen.errors = metric_sum(fleet, "writer-1", "ex2d_storage_errors_total");
    seen.storage_ok = metric_sum(fleet, "writer-1", "ex2d_storage_ok");
    seen.storage = fleet.redis({"HGET", "ex2d:proc:writer-1", "storage"}).str;
    seen.storage_error = fleet.redis({"HGET", "ex2d:proc:writer-1", "storage_error"}).str;
    fleet.ctl({"status"}, &seen.status);
    for (const auto& cam : kCameras) {
        seen.err.push_back(fleet.frame_field(expid, cam, "error"));
        seen.done += fleet.frame_field(expid, cam, "state") == "done";
    }
    return seen;
}

inline void expect_fault_reported(const DuringFault& seen, const std::string& errno_text)
{
    std::printf(
        "during the fault: %g storage errors, ex2d_storage_ok %g, storage '%s' (%s), "
        "%d of 3 frames done, temporary files %d to %d (the fewest must be 0)\n",
        seen.errors, seen.storage_ok, seen.storage.c_str(), seen.storage_error.c_str(), seen.done,
        seen.strays, seen.strays_most);
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
inline double seconds_until_done(Fleet& fleet, int expid, double timeout_s)
{
    const auto back = std::chrono::steady_clock::now();
    const bool done = eventually(timeout_s, [&] {
        for (const auto& cam : kCameras) {
            if (fleet.frame_field(expid, cam, "state") != "done") return false;
        }
        return true;
    });
    return done ? std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count()
                : -1;
}

/// After the storage is back: all frames done once, at their first delivery, no partial
/// file, identical to `ex2d extract`; the writer's storage ok again. `earlier`: exposures
/// written before the fault, whose files are in the same output tree.
inline void expect_recovered(Fleet& fleet, int expid, const std::vector<std::string>& preprocs,
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
inline const std::map<std::string, std::string> kFastRetry = {{"writer.storage_retry_s", "0.2"},
                                                              {"writer.storage_retry_max_s", "1"}};

/// reader-1, worker-1 with `worker_settings` and writer-1 retrying fast (kFastRetry), with
/// `writer_env`.
inline void start_roles(Fleet& fleet,
                        const std::map<std::string, std::string>& worker_settings = {},
                        const std::map<std::string, std::string>& writer_env = {})
{
    fleet.start("reader", "reader-1");
    fleet.start("worker", "worker-1", worker_settings);
    fleet.start("writer", "writer-1", kFastRetry, writer_env);
}

/// Prints the seconds from now until every frame of `expid` is done after `what` (the event
/// the recovery counts from), and expects them to come within 60 s.
inline void timed_recovery(Fleet& fleet, int expid, const std::string& what)
{
    const double seconds = seconds_until_done(fleet, expid, 60);
    std::printf("%s -> all 3 frames done in %.2f s\n", what.c_str(), seconds);
    EXPECT_GE(seconds, 0) << what;
}

}  // namespace ex2d::fleet_test::storage_faults
