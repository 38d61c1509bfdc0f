// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file keeper.hpp
/// A process's background duties towards Redis, on their own thread and connection so that
/// a long extraction never lets them lapse: the heartbeat (the process hash with its TTL),
/// the renewal of every lease the process holds (every lease/3), and watching for a drain
/// request from ex2dctl. A lease whose renewal is refused (stale epoch or gone) is marked
/// lost, so its holder drops the job instead of finishing it.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/service.hpp"

namespace ex2d::service {

class Keeper {
public:
    explicit Keeper(ServiceContext& ctx);
    ~Keeper();  ///< stops the thread and deletes the process hash
    Keeper(const Keeper&) = delete;
    Keeper& operator=(const Keeper&) = delete;

    /// Fields published in the process hash (endpoint, backend, device, state, current, ...).
    void set_field(const std::string& field, const std::string& value);
    /// Starts the thread; the first heartbeat is written before this returns.
    Status start();

    /// Renews `job`'s lease until release(job) is called.
    void hold(const Job& job);
    void release(const Job& job);
    /// True once a renewal of the job was refused.
    bool lost(const Job& job) const;
    /// True once `ex2dctl drain` asked this process to drain.
    bool drain_requested() const { return drain_requested_; }
    /// From now on the process hash's `state` is `retired`: up, but taking no work.
    void retire() { retired_ = true; }

private:
    void run();
    void heartbeat(ControlPlane& plane, RedisClient& redis);
    std::string lifecycle_state() const;

    ServiceContext& ctx_;
    std::unique_ptr<RedisClient> redis_;
    std::unique_ptr<ControlPlane> plane_;
    mutable std::mutex mutex_;
    std::map<std::string, std::string> fields_;
    std::map<std::string, Job> held_;  ///< by stream_id
    std::set<std::string> lost_;       ///< stream_id + epoch
    std::string published_state_;      ///< keeper thread only
    std::atomic<bool> stop_{false};
    std::atomic<bool> drain_requested_{false};
    std::atomic<bool> retired_{false};
    std::thread thread_;
};

}  // namespace ex2d::service
