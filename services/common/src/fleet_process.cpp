// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/fleet_process.hpp"

#include <algorithm>

#include "ex2d/logging.hpp"

namespace ex2d::service {

Result<ControlConnection> connect_control_plane(ServiceContext& ctx)
{
    const Config& cfg = ctx.config();
    EX2D_ASSIGN_OR_RETURN(RedisOptions options, redis_options_from_config(cfg));
    ControlConnection c;
    c.redis = std::make_unique<RedisClient>(options, [&ctx] {
        ctx.tick();
        return !ctx.stop_requested();
    });
    // A service started while Redis is down (a node booting, Redis restarting) waits for it
    // rather than exiting: its supervisor would only restart it into the same wait.
    EX2D_RETURN_NOT_OK(c.redis->connect());
    c.redis->on_reconnect([&ctx] { ctx.metrics().redis_reconnects().Increment(); });
    if (!cfg.get_bool("redis.allow_unsafe")) EX2D_RETURN_NOT_OK(check_redis_durability(*c.redis));
    c.plane = std::make_unique<ControlPlane>(*c.redis, cfg.get_string("redis.namespace"));
    return c;
}

LogContext job_log_context(const Job& job)
{
    return {job.job, job.night, job.expid, job.camera, job.epoch};
}

std::optional<wire::IncomingMessage> decode_or_drop(
    std::vector<zmq::message_t>&& parts, ServiceContext& ctx,
    std::initializer_list<wire::MessageType> accepted)
{
    std::size_t bytes = 0;
    for (const auto& p : parts) bytes += p.size();
    wire::DecodeError error;
    auto message = wire::decode(std::move(parts), error);
    if (!message) {
        ctx.metrics().messages_dropped(error.reason).Increment();
        logger()->warn("dropped message reason={} detail={}", error.reason, error.detail);
        return std::nullopt;
    }
    if (std::find(accepted.begin(), accepted.end(), message->type) == accepted.end()) {
        ctx.metrics().messages_dropped("bad_type").Increment();
        logger()->warn("dropped message reason=bad_type detail=a {} does not take message type {}",
                       ctx.role(), int(message->type));
        return std::nullopt;
    }
    ctx.metrics().bytes("received").Increment(double(bytes));
    return message;
}

void hand_back(ControlPlane& plane, Keeper& keeper, const Job& job, const Config& config)
{
    auto fence = plane.hand_back(job, (long long)(config.get_double("queue.lease_s") * 1000));
    keeper.release(job);
    logger()->info("handed back job={} attempt={} result={}", job.job, job.epoch,
                   fence.is_ok() ? to_string(fence.value()) : fence.status().message());
}

}  // namespace ex2d::service
