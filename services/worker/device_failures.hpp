// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The device failures of one host's device, kept in Redis so that they outlive the worker:
// a worker whose device failed exits for its supervisor to restart it, and the restarted
// worker counts what its predecessors recorded (docs/redis-schema.md, "Processes";
// docs/operations.md, "A failing GPU").

#include <string>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace ex2d::worker {

class DeviceFailureRecord {
public:
    /// `device`: the backend and its index on `host` ("cuda0", "standin0").
    DeviceFailureRecord(service::RedisClient& redis, const service::ControlPlane& plane,
                        const std::string& host, const std::string& device, double window_s);

    /// Records a failure now (`what`: the frame's job id and this process), forgets those
    /// older than the window.
    Status record(const std::string& what);
    /// The failures within the window, this one's predecessors' included.
    Result<long long> recent();
    const std::string& key() const { return key_; }

private:
    service::RedisClient& redis_;
    std::string key_;
    long long window_ms_;
};

}  // namespace ex2d::worker
