// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Where writers record the temporary files they create, so that the temporaries of a writer
// that died (or stopped and lost its registration) are removed by any live writer within a
// bounded time, whichever output folder they are in (docs/redis-schema.md, "Temporary files").

#include <mutex>
#include <set>
#include <string>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace ex2d::writer {

/// What write_output needs of the ledger; tests substitute their own.
class TemporaryLedger {
public:
    virtual ~TemporaryLedger() = default;
    /// Records `path` before the file is created; a failure means the file must not be made.
    virtual Status record(const std::string& path) = 0;
    /// Forgets `path` once the file has been renamed or removed.
    virtual void forget(const std::string& path) = 0;
};

/// The ledger in Redis: hash {ns}:temporaries, path -> "{owner} {host} {pid} {created_ms}".
/// Safe to share between threads: every call holds a lock for as long as it uses `redis`, which
/// nothing else may use.
class RedisTemporaryLedger : public TemporaryLedger {
public:
    RedisTemporaryLedger(service::RedisClient& redis, const service::ControlPlane& plane,
                         service::Actor me);
    Status record(const std::string& path) override;
    void forget(const std::string& path) override;

    /// Removes the files of entries whose owner is gone: its registration has expired, names
    /// another process (a restart under the same name), or is this writer while the file is
    /// not one of its own in flight (left by its previous life). Returns the files removed.
    int sweep();

    /// Removes the files this process has recorded and not yet forgotten, and their entries:
    /// for a writer that exits in the middle of a write, whose write thread will never get to
    /// remove its temporary file. Returns the files removed.
    int remove_own();

private:
    bool owner_alive(const std::string& owner, const std::string& host, const std::string& pid);

    std::mutex mutex_;
    service::RedisClient& redis_;
    std::string key_;
    std::string proc_prefix_;
    service::Actor me_;
    std::set<std::string> mine_;  ///< recorded by this process and not yet forgotten
};

/// True for names that writers give their temporary files (".tmp-" or ".replaced-" before
/// the suffix): the sweep never removes anything else, whatever the ledger says.
bool is_temporary_name(const std::string& path);

}  // namespace ex2d::writer
