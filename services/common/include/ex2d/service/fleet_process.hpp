// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fleet_process.hpp
/// What the reader, the worker and the writer do alike: connect to the control plane (with
/// the durability check), tag log lines with the job, drop invalid messages with a count and
/// a reason, and hand a job back when draining.

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/json_log.hpp"
#include "ex2d/service/keeper.hpp"
#include "ex2d/service/service.hpp"
#include "ex2d/service/wire.hpp"

namespace ex2d::service {

struct ControlConnection {
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<ControlPlane> plane;
};

/// Connects to Redis (one attempt, so that a wrong address fails the start), counts later
/// reconnections in the metrics, keeps the health tick alive while Redis is away, and refuses
/// a Redis that can lose acknowledged work unless redis.allow_unsafe is set.
Result<ControlConnection> connect_control_plane(ServiceContext& ctx);

/// The log fields of a job (night, expid, camera, job id, attempt).
LogContext job_log_context(const Job& job);

/// Decodes a message; an invalid one, or one of a type other than `accepted`, is logged with
/// its reason, counted in ex2d_messages_dropped_total and dropped (nullopt).
std::optional<wire::IncomingMessage> decode_or_drop(
    std::vector<zmq::message_t>&& parts, ServiceContext& ctx,
    std::initializer_list<wire::MessageType> accepted);

/// Gives a job back at once (see ControlPlane::hand_back) and stops renewing its lease.
void hand_back(ControlPlane& plane, Keeper& keeper, const Job& job, const Config& config);

/// Seconds as a steady-clock duration.
inline std::chrono::steady_clock::duration seconds(double s)
{
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
}

}  // namespace ex2d::service
