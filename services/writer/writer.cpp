// SPDX-License-Identifier: BSD-3-Clause
#include "writer.hpp"

#include "ex2d/logging.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/service/zmq_util.hpp"

namespace ex2d::writer {

using service::Fence;
using service::Job;

using service::job_log_context;

Writer::Writer(service::ServiceContext& ctx)
    : ctx_(ctx), me_{ctx.name(), ctx.host(), ctx.pid()}, pull_(zmq_context_, zmq::socket_type::pull)
{
}

Status Writer::start()
{
    const service::Config& cfg = ctx_.config();
    EX2D_ASSIGN_OR_RETURN(service::ControlConnection control, service::connect_control_plane(ctx_));
    redis_ = std::move(control.redis);
    plane_ = std::move(control.plane);

    service::configure_socket(pull_, cfg, false);
    EX2D_ASSIGN_OR_RETURN(security_, service::SocketSecurity::from_config(cfg, &ctx_.metrics()));
    EX2D_ASSIGN_OR_RETURN(const bool curve,
                          security_->prepare_bind(zmq_context_, pull_, cfg.get_string("zmq.bind")));
    std::string endpoint;
    try {
        endpoint = service::bind_socket(pull_, cfg.get_string("zmq.bind"), ctx_.name());
    } catch (const zmq::error_t& e) {
        return Status::invalid("zmq.bind " + cfg.get_string("zmq.bind") + ": " + e.what());
    }
    keeper_ = std::make_unique<service::Keeper>(ctx_);
    keeper_->set_field("endpoint", endpoint);
    if (curve) keeper_->set_field("curve_key", security_->public_key());
    EX2D_RETURN_NOT_OK(keeper_->start());
    ctx_.set_ready(true);
    logger()->info("writer ready endpoint={}", endpoint);
    return Status::ok();
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
    auto outcome = write_output(out, me_, ctx_.config().get_bool("writer.fsync"), still_ours);
    if (!outcome.is_ok()) {
        const Status& s = outcome.status();
        logger()->error("write failed: {}", s.to_string());
        ctx_.metrics().frames("failed").Increment();
        if (s.code() == StatusCode::io_error) {
            // A full or failing disk may recover: the job stays pending and is re-delivered
            // after its lease, up to max_deliveries.
            auto noted = plane_->note_error(job, s.to_string());
            (void)noted;
        } else if (s.code() != StatusCode::invalid_argument) {
            auto failed = plane_->fail(job, s.to_string(), me_);
            (void)failed;
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
    if (service::wait_readable(pull_, 100)) {
        while (auto parts = service::try_recv(pull_)) {
            auto message = service::decode_or_drop(std::move(*parts), ctx_, {wire::MessageType::result});
            if (!message) continue;
            handle(std::move(*message));
            if (ctx_.stop_requested()) break;
        }
    }
    const long long max_frames = ctx_.config().get_int("service.max_frames");
    return !(max_frames > 0 && frames_done_ >= max_frames);
}

void Writer::drain(Clock::time_point)
{
    // The frame in hand was finished inside step(); what still sits in the socket is left to
    // its lease, which re-delivers it.
    pull_.close();
    keeper_.reset();
}

}  // namespace ex2d::writer
