// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/fleet_process.hpp"

#include <algorithm>

#include "ex2d/logging.hpp"
#include "ex2d/service/zmq_util.hpp"

namespace ex2d::service {

Result<ControlConnection> connect_control_plane(ServiceContext& ctx)
{
    const RedisSettings& settings = ctx.settings().redis;
    EX2D_ASSIGN_OR_RETURN(RedisOptions options, redis_options(settings));
    ControlConnection c;
    c.redis = std::make_unique<RedisClient>(options, [&ctx] {
        ctx.tick();
        return !ctx.stop_requested();
    });
    // A service started while Redis is down (a node booting, Redis restarting) waits for it
    // rather than exiting: its supervisor would only restart it into the same wait.
    EX2D_RETURN_NOT_OK(c.redis->connect());
    c.redis->on_reconnect([&ctx] { ctx.metrics().redis_reconnects().Increment(); });
    if (!settings.allow_unsafe) EX2D_RETURN_NOT_OK(check_redis_durability(*c.redis));
    c.plane = std::make_unique<ControlPlane>(*c.redis, settings.key_namespace);
    return c;
}

LogContext job_log_context(const Job& job)
{
    return {job.job, job.night, job.expid, job.camera, job.epoch};
}

void drop_message(ServiceContext& ctx, const std::string& reason, const std::string& detail)
{
    ctx.metrics().messages_dropped(reason).Increment();
    logger()->warn("dropped message reason={} detail={}", reason, detail);
}

std::optional<wire::IncomingMessage> decode_or_drop(
    std::vector<zmq::message_t>&& parts, ServiceContext& ctx,
    std::initializer_list<wire::MessageType> accepted, const wire::SlotResolver& slots)
{
    std::size_t bytes = 0;
    for (const auto& p : parts) bytes += p.size();
    wire::DecodeError error;
    auto message = wire::decode(std::move(parts), error, slots);
    if (!message) {
        drop_message(ctx, error.reason, error.detail);
        return std::nullopt;
    }
    if (std::find(accepted.begin(), accepted.end(), message->type) == accepted.end()) {
        drop_message(ctx, "bad_type",
                     "a " + ctx.role() + " does not take message type " +
                         std::to_string(int(message->type)));
        return std::nullopt;
    }
    ctx.metrics().bytes("received").Increment(double(bytes));
    if ((message->header.shm_flags & wire::kArraysInSlot) != 0) {
        std::size_t in_slot = 0;
        for (const auto& p : message->parts) in_slot += p.size();
        ctx.metrics().bytes("received_shm").Increment(double(in_slot));
    }
    return message;
}

void hand_back(ControlPlane& plane, Keeper& keeper, const Job& job, long long lease_ms,
               bool undelivered)
{
    auto fence = plane.hand_back(job, lease_ms, undelivered);
    keeper.release(job);
    logger()->info("handed back job={} attempt={} result={}", job.job, job.epoch,
                   fence.is_ok() ? to_string(fence.value()) : fence.status().message());
}

FleetService::FleetService(ServiceContext& ctx) : ctx_(ctx), me_{ctx.name(), ctx.host(), ctx.pid()}
{
}

Status FleetService::connect()
{
    EX2D_ASSIGN_OR_RETURN(ControlConnection control, connect_control_plane(ctx_));
    redis_ = std::move(control.redis);
    plane_ = std::move(control.plane);
    return Status::ok();
}

Status FleetService::load_socket_security()
{
    EX2D_ASSIGN_OR_RETURN(security_,
                          SocketSecurity::from_settings(ctx_.settings().zmq, &ctx_.metrics()));
    return Status::ok();
}

Result<std::string> FleetService::serve(zmq::socket_t& router)
{
    const std::string& address = ctx_.settings().zmq.bind;
    configure_socket(router, ctx_.settings().zmq, false);
    router.set(zmq::sockopt::router_mandatory, 1);
    EX2D_RETURN_NOT_OK(load_socket_security());
    EX2D_ASSIGN_OR_RETURN(const bool curve, security_->prepare_bind(zmq_context_, router, address));
    std::map<std::string, std::string> fields;
    try {
        fields["endpoint"] = bind_socket(router, address, ctx_.name());
    } catch (const zmq::error_t& e) {
        return Status::invalid("zmq.bind " + address + ": " + e.what());
    }
    if (curve) fields["curve_key"] = security_->public_key();
    EX2D_RETURN_NOT_OK(register_process(fields));
    return fields["endpoint"];
}

Status FleetService::register_process(const std::map<std::string, std::string>& fields)
{
    keeper_ = std::make_unique<Keeper>(ctx_);
    for (const auto& [field, value] : fields) keeper_->set_field(field, value);
    return keeper_->start();
}

void FleetService::hand_back(const Job& job, bool undelivered)
{
    service::hand_back(*plane_, *keeper_, job, ctx_.settings().queue.lease_ms(), undelivered);
}

void FleetService::drop_malformed(const Status& why)
{
    drop_message(ctx_, "malformed", why.message());
}

}  // namespace ex2d::service
