// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The writer's view of its output storage (docs/operations.md, "Output storage failing"): a
// write that fails on the file system is an outage of the storage, not of the frame. The
// writer keeps the frame and tries again with a growing delay, granting nothing meanwhile.

#include <mutex>
#include <optional>
#include <string>

namespace ex2d::writer {

/// The metric label of a failed write's error, from the errno text its message ends with:
/// enospc, edquot, erofs, eio, enoent, enotdir, eacces or other.
std::string storage_error_kind(const std::string& message);

/// The wait before try `failures` + 1 of a write that failed `failures` (>= 1) times in a row:
/// `first_s` doubling, at most `max_s`.
double storage_retry_delay_s(int failures, double first_s, double max_s);

/// Whether the output storage fails, shared by the write threads and the main loop.
class StorageHealth {
public:
    struct Outage {
        long long since_ms = 0;  ///< Unix ms of the outage's first failure
        std::string error;       ///< the last failure
    };
    /// Records a failure; true when it starts an outage.
    bool failed(const std::string& error, long long now_ms);
    /// Ends the outage, if any: the outage it ends.
    std::optional<Outage> recovered();
    bool ok() const;

private:
    mutable std::mutex mutex_;
    std::optional<Outage> outage_;
};

}  // namespace ex2d::writer
