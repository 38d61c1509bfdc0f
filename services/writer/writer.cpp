// SPDX-License-Identifier: BSD-3-Clause
#include "writer.hpp"

#include <algorithm>

#include "ex2d/logging.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/service/zmq_util.hpp"

namespace ex2d::writer {

using service::Fence;
using service::Job;

using service::job_log_context;
using service::seconds;

Writer::Writer(service::ServiceContext& ctx)
    : ctx_(ctx), me_{ctx.name(), ctx.host(), ctx.pid()}, router_(zmq_context_, zmq::socket_type::router)
{
}

Status Writer::start()
{
    const service::Config& cfg = ctx_.config();
    if (cfg.get_int("writer.credit") > cfg.get_int("zmq.hwm")) {
        // More grants than the receive queue holds would stall the connection (and its
        // heartbeats) behind a full queue, which is what the credit exists to prevent.
        return Status::invalid("writer.credit " + std::to_string(cfg.get_int("writer.credit")) +
                               " exceeds zmq.hwm " + std::to_string(cfg.get_int("zmq.hwm")));
    }
    EX2D_ASSIGN_OR_RETURN(service::ControlConnection control, service::connect_control_plane(ctx_));
    redis_ = std::move(control.redis);
    plane_ = std::move(control.plane);
    temporaries_ = std::make_unique<RedisTemporaryLedger>(*redis_, *plane_, me_);

    service::configure_socket(router_, cfg, false);
    // A GRANT to a worker that has gone fails at once instead of vanishing.
    router_.set(zmq::sockopt::router_mandatory, 1);
    EX2D_ASSIGN_OR_RETURN(security_, service::SocketSecurity::from_config(cfg, &ctx_.metrics()));
    EX2D_ASSIGN_OR_RETURN(const bool curve,
                          security_->prepare_bind(zmq_context_, router_, cfg.get_string("zmq.bind")));
    std::string endpoint;
    try {
        endpoint = service::bind_socket(router_, cfg.get_string("zmq.bind"), ctx_.name());
    } catch (const zmq::error_t& e) {
        return Status::invalid("zmq.bind " + cfg.get_string("zmq.bind") + ": " + e.what());
    }
    keeper_ = std::make_unique<service::Keeper>(ctx_);
    keeper_->set_field("endpoint", endpoint);
    if (curve) keeper_->set_field("curve_key", security_->public_key());
    EX2D_RETURN_NOT_OK(keeper_->start());
    temporaries_->sweep();
    next_sweep_ = Clock::now() + seconds(cfg.get_double("writer.sweep_interval_s"));
    ctx_.set_ready(true);
    logger()->info("writer ready endpoint={} credit={}", endpoint, cfg.get_int("writer.credit"));
    return Status::ok();
}

void Writer::grant()
{
    const auto credit = std::size_t(ctx_.config().get_int("writer.credit"));
    while (granted_.size() < credit && !offers_.empty()) {
        const Offer offer = std::move(offers_.front());
        offers_.pop_front();
        wire::OutgoingMessage m;
        m.type = wire::MessageType::grant;
        m.job_id = offer.job;
        m.meta["writer"] = ctx_.name();
        m.meta["job"] = offer.job;
        auto parts = wire::encode(m);
        parts.insert(parts.begin(), zmq::message_t(offer.worker.data(), offer.worker.size()));
        // A worker that went away since its offer cannot be granted; its offer is dropped.
        if (service::try_send(router_, parts)) granted_[offer.worker] = Clock::now();
    }
}

void Writer::expire_grants()
{
    const auto timeout = seconds(ctx_.config().get_double("zmq.peer_timeout_s"));
    const auto now = Clock::now();
    for (auto it = granted_.begin(); it != granted_.end();) {
        if (now - it->second > timeout) {
            logger()->warn("grant lapsed: no result from a worker within {} s",
                           ctx_.config().get_double("zmq.peer_timeout_s"));
            it = granted_.erase(it);
        } else {
            ++it;
        }
    }
}

void Writer::receive(std::vector<zmq::message_t> parts)
{
    if (parts.size() < 2) return;
    const std::string worker = parts.front().to_string();
    parts.erase(parts.begin());
    auto message = service::decode_or_drop(
        std::move(parts), ctx_,
        {wire::MessageType::offer, wire::MessageType::result, wire::MessageType::decline});
    if (!message) return;
    switch (message->type) {
    case wire::MessageType::offer: {
        const bool waiting = granted_.count(worker) != 0 ||
                             std::any_of(offers_.begin(), offers_.end(),
                                         [&](const Offer& o) { return o.worker == worker; });
        if (!waiting) offers_.push_back({worker, message->job_id});
        break;
    }
    case wire::MessageType::decline:
        granted_.erase(worker);
        break;
    default:
        granted_.erase(worker);
        handle(std::move(*message));
    }
}

void Writer::handle(wire::IncomingMessage message)
{
    auto decoded = service::decode_result(message);
    if (!decoded.is_ok()) {
        ctx_.metrics().messages_dropped("malformed").Increment();
        logger()->warn("dropped message reason=malformed detail={}", decoded.status().message());
        return;
    }
    const service::FrameOutputs& out = decoded.value();
    const Job& job = out.job;
    service::ScopedLogContext lc(job_log_context(job));
    auto fence = plane_->advance(job, "writing", me_);
    if (!fence.is_ok() || fence.value() != Fence::applied) {
        ctx_.metrics().frames("stale").Increment();
        logger()->warn("result refused: {} worker={}",
                       fence.is_ok() ? service::to_string(fence.value()) : fence.status().message(),
                       out.worker);
        return;
    }
    keeper_->hold(job);
    logger()->info("result received from worker={}", out.worker);
    const auto start = Clock::now();
    auto still_ours = [&] {
        auto f = plane_->renew(job);
        return f.is_ok() && f.value() == Fence::applied;
    };
    auto outcome = write_output(out, me_, ctx_.config().get_bool("writer.fsync"), still_ours, *temporaries_);
    if (!outcome.is_ok()) {
        const Status& s = outcome.status();
        if (s.code() == StatusCode::invalid_argument) {
            // Fenced out: another holder has the job, and the system did what it should.
            ctx_.metrics().frames("stale").Increment();
            logger()->warn("write abandoned: {}", s.to_string());
        } else if (s.code() == StatusCode::io_error) {
            // A full or failing disk may recover: the job stays pending and is re-delivered
            // after its lease, up to max_deliveries.
            logger()->error("write failed: {}", s.to_string());
            ctx_.metrics().frames("failed").Increment();
            (void)plane_->note_error(job, s.to_string());
        } else {
            logger()->error("write failed: {}", s.to_string());
            ctx_.metrics().frames("failed").Increment();
            (void)plane_->fail(job, s.to_string(), me_);
        }
        keeper_->release(job);
        return;
    }
    const double write_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    auto done = plane_->finish(job, outcome.value().checksum, outcome.value().bytes, me_);
    keeper_->release(job);
    if (done.is_ok() && done.value() == Fence::gone) {
        // The reply to a finish that did run can be lost with a Redis connection; the retry
        // then finds the job acknowledged. The ledger says whether it was ours.
        auto frame = plane_->frame(job.campaign, job.expid, job.camera);
        if (frame.is_ok() && frame.value()["state"] == "done" &&
            frame.value()["checksum"] == outcome.value().checksum &&
            frame.value()["attempt"] == std::to_string(job.epoch)) {
            done = Fence::applied;
        }
    }
    if (!done.is_ok() || done.value() != Fence::applied) {
        ctx_.metrics().frames("stale").Increment();
        logger()->warn("finish refused: {}",
                       done.is_ok() ? service::to_string(done.value()) : done.status().message());
        return;
    }
    ctx_.metrics().stage_seconds("write").Observe(write_seconds);
    ctx_.metrics().frames(outcome.value().skipped ? "skipped" : "written").Increment();
    ++frames_done_;
    keeper_->set_field("frames", std::to_string(frames_done_));
    logger()->info("frame {} output={} bytes={} checksum={} write_s={:.2f} read_s={:.2f} "
                   "extract_s={:.2f} worker={}",
                   outcome.value().skipped ? "already written" : "written", job.output,
                   outcome.value().bytes, outcome.value().checksum, write_seconds, out.read_seconds,
                   out.extract_seconds, out.worker);
}

bool Writer::step()
{
    if (keeper_->drain_requested()) return false;
    if (Clock::now() >= next_sweep_) {
        temporaries_->sweep();
        next_sweep_ = Clock::now() + seconds(ctx_.config().get_double("writer.sweep_interval_s"));
    }
    expire_grants();
    grant();
    if (service::wait_readable(router_, 100)) {
        while (auto parts = service::try_recv(router_)) {
            receive(std::move(*parts));
            grant();
            if (ctx_.stop_requested()) break;
        }
    }
    const long long max_frames = ctx_.config().get_int("service.max_frames");
    return !(max_frames > 0 && frames_done_ >= max_frames);
}

void Writer::drain(Clock::time_point)
{
    // The frame in hand was finished inside step(); a result granted but not yet received is
    // left to its lease, which re-delivers it.
    router_.close();
    keeper_.reset();
}

}  // namespace ex2d::writer
