// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fleet_process.hpp
/// What the reader, the worker and the writer do alike: start up (FleetService: the control
/// plane with the durability check, sockets, CURVE, bind, the keeper), tag log lines with the
/// job, drop invalid messages with a count and a reason, and hand a job back when draining.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/curve.hpp"
#include "ex2d/service/json_log.hpp"
#include "ex2d/service/keeper.hpp"
#include "ex2d/service/service.hpp"
#include "ex2d/service/wire.hpp"

namespace ex2d::service {

struct ControlConnection {
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<ControlPlane> plane;
};

/// Connects to Redis (waiting while it cannot be reached; a refused password fails at once),
/// counts later reconnections in the metrics, keeps the health tick alive while Redis is away,
/// and refuses a Redis that can lose acknowledged work unless redis.allow_unsafe is set.
Result<ControlConnection> connect_control_plane(ServiceContext& ctx);

/// The log fields of a job (night, expid, camera, job id, attempt).
LogContext job_log_context(const Job& job);

/// Logs a message refused for `reason` with `detail` and counts it in
/// ex2d_messages_dropped_total{reason}.
void drop_message(ServiceContext& ctx, const std::string& reason, const std::string& detail);

/// Decodes a message; an invalid one, or one of a type other than `accepted`, is logged with
/// its reason, counted in ex2d_messages_dropped_total and dropped (nullopt). `slots` accepts
/// arrays in the shared-memory slots this process lent (none by default).
std::optional<wire::IncomingMessage> decode_or_drop(
    std::vector<zmq::message_t>&& parts, ServiceContext& ctx,
    std::initializer_list<wire::MessageType> accepted, const wire::SlotResolver& slots = {});

/// Gives a job back at once (ControlPlane::hand_back: its idle time set past `lease_ms`, so
/// the next reaper pass re-delivers it) and stops renewing its lease. `undelivered`: its
/// result found no writer (ControlPlane::hand_back).
void hand_back(ControlPlane& plane, Keeper& keeper, const Job& job, long long lease_ms,
               bool undelivered = false);

/// The start-up the reader, the worker and the writer share, and what it leaves them. In
/// start(), a process calls connect() first; a reader or writer then serve() for the socket
/// workers connect to, a worker load_socket_security() and register_process(). Members are
/// destroyed in the reverse of their order, after the derived class's: its sockets close
/// before the ZeroMQ context ends, the CURVE handler (a socket of that context) before the
/// context, and the keeper outlives whatever still holds jobs.
class FleetService : public Service {
protected:
    explicit FleetService(ServiceContext& ctx);

    /// Connects to the control plane (connect_control_plane): redis_ and plane_.
    Status connect();
    /// Reads the CURVE keys (zmq.curve_*) into security_; a missing or malformed file fails.
    Status load_socket_security();
    /// The ROUTER workers connect to: configured from zmq.*, with mandatory routing (a message
    /// to a worker that has gone fails at once, so what it carried stays here), a CURVE server
    /// where a secret key is set, bound to zmq.bind. Then registers the process with the
    /// endpoint bound and its CURVE public key, for workers to discover. Returns the endpoint.
    Result<std::string> serve(zmq::socket_t& router);
    /// Starts the keeper (heartbeat, lease renewal, drain requests) with `fields` in the
    /// process hash (docs/redis-schema.md).
    Status register_process(const std::map<std::string, std::string>& fields);
    /// hand_back() over the main loop's connection.
    void hand_back(const Job& job, bool undelivered = false);
    /// Drops a message that decoded but whose content cannot be used (reason=malformed).
    void drop_malformed(const Status& why);

    ServiceContext& ctx_;
    Actor me_;
    std::unique_ptr<RedisClient> redis_;
    std::unique_ptr<ControlPlane> plane_;
    std::unique_ptr<Keeper> keeper_;
    zmq::context_t zmq_context_;
    std::unique_ptr<SocketSecurity> security_;  ///< after the context: closed first
};

/// Seconds as a steady-clock duration.
inline std::chrono::steady_clock::duration seconds(double s)
{
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s));
}

}  // namespace ex2d::service
