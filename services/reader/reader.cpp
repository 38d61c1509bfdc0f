// SPDX-License-Identifier: BSD-3-Clause
#include "reader.hpp"

#include <algorithm>

#include "ex2d/logging.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/service/zmq_util.hpp"
#include "load_frame.hpp"
#include "trace_shift_step.hpp"

namespace ex2d::reader {

using service::Fence;
using service::Job;

using service::job_log_context;
using service::seconds;

Reader::Reader(service::ServiceContext& ctx)
    : FleetService(ctx),
      settings_(service::ReaderSettings::from(ctx.config())),
      // reader.input_read is one of the choices parse_input_read knows (config_keys.cpp).
      loader_(ctx.name(), settings_.trace_shifts_in,
              parse_input_read(settings_.input_read).value()),
      router_(zmq_context_, zmq::socket_type::router),
      worker_slots_(ctx.settings().zmq.shm_dir)
{
}

Status Reader::start()
{
    const service::FleetSettings& fleet = ctx_.settings();
    EX2D_RETURN_NOT_OK(connect());
    EX2D_RETURN_NOT_OK(plane_->ensure_group(plane_->nightly_stream()));
    EX2D_ASSIGN_OR_RETURN(const std::string endpoint, serve(router_));
    EX2D_ASSIGN_OR_RETURN(service::RedisOptions feed_redis, service::redis_options(fleet.redis));
    feed_ = std::make_unique<JobFeed>(feed_redis, fleet.redis.key_namespace, me_, *keeper_);
    EX2D_RETURN_NOT_OK(feed_->start());

    // A restart under the same name finishes its own pending jobs first (their epochs bumped).
    EX2D_ASSIGN_OR_RETURN(std::vector<std::string> streams, plane_->lane_streams());
    for (const auto& stream : streams) {
        EX2D_ASSIGN_OR_RETURN(std::vector<Job> own, plane_->take_own_pending(stream, me_));
        for (auto& job : own) {
            logger()->info("re-delivering own pending job={} attempt={}", job.job, job.epoch);
            keeper_->hold(job);
            claimed_.push_back(std::move(job));
        }
    }
    next_reap_ = Clock::now();
    next_depth_ = Clock::now();
    ctx_.set_ready(true);
    logger()->info("reader ready endpoint={} prefetch={} lease_s={} trace_shifts_in={}", endpoint,
                   settings_.prefetch, fleet.queue.lease_s, settings_.trace_shifts_in);
    return Status::ok();
}

void Reader::receive_messages(long wait_ms, bool wants_job)
{
    // Wakes for a worker's message or, when a job is wanted, a job from the feed.
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, feed_->fd(), ZMQ_POLLIN, 0}};
    if (!service::wait_any(items, wants_job ? 2 : 1, wait_ms)) return;
    while (auto parts = service::try_recv(router_)) {
        if (parts->empty()) continue;
        std::string identity = parts->front().to_string();
        parts->erase(parts->begin());
        if (auto credit =
                service::decode_or_drop(std::move(*parts), ctx_, {wire::MessageType::credit})) {
            credits_.push_back(
                {std::move(identity), Clock::now(), service::SlotLoan::from_meta(credit->meta)});
        }
    }
}

bool Reader::dispatch()
{
    bool sent_any = false;
    while (!credits_.empty() && !ready_.empty()) {
        Loaded& frame = ready_.front();
        if (keeper_->lost(frame.job)) {
            logger()->warn("dropping loaded frame job={} attempt={}: its lease was lost",
                           frame.job.job, frame.job.epoch);
            keeper_->release(frame.job);
            ready_.pop_front();
            continue;
        }
        bool in_slot = false;
        std::vector<zmq::message_t> out = frame_for(credits_.front(), frame.parts, in_slot);
        std::size_t bytes = 0;
        for (std::size_t i = 1; i < out.size(); ++i) bytes += out[i].size();
        if (!service::try_send(router_, out)) {
            // The worker has gone (or its queue is full): its credit is void, the frame waits.
            if (!in_slot) {
                for (std::size_t i = 1; i < out.size(); ++i) frame.parts[i - 1] = std::move(out[i]);
            }
            credits_.pop_front();
            continue;
        }
        service::ScopedLogContext lc(job_log_context(frame.job));
        ctx_.metrics().bytes("sent").Increment(double(bytes));
        if (in_slot)
            ctx_.metrics()
                .bytes("sent_shm")
                .Increment(double(wire::slot_bytes_needed(frame.parts)));
        ctx_.metrics().frames("sent").Increment();
        ctx_.metrics()
            .stage_seconds("queue_wait")
            .Observe(std::chrono::duration<double>(Clock::now() - frame.loaded_at).count());
        logger()->info("frame sent to worker via={} bytes={}", in_slot ? "shm" : "socket", bytes);
        // From here the worker renews the lease.
        keeper_->release(frame.job);
        credits_.pop_front();
        ready_.pop_front();
        ++frames_sent_;
        keeper_->set_field("frames", std::to_string(frames_sent_));
        sent_any = true;
    }
    return sent_any;
}

std::vector<zmq::message_t> Reader::frame_for(const Credit& credit,
                                              std::vector<zmq::message_t>& parts, bool& in_slot)
{
    std::vector<zmq::message_t> out;
    out.emplace_back(credit.identity);
    auto placed = worker_slots_.place(parts, credit.slot);
    in_slot = placed.has_value();
    // Over the socket otherwise; the header still returns the worker's slot, if it lent one.
    for (auto& p : in_slot ? *placed : parts) out.push_back(std::move(p));
    return out;
}

std::optional<Job> Reader::next_job()
{
    if (!claimed_.empty()) {
        Job job = std::move(claimed_.front());
        claimed_.pop_front();
        return job;
    }
    if (auto job = feed_->take()) return job;
    feed_->want();
    return std::nullopt;
}

long Reader::sleep_ms() const
{
    using std::chrono::duration_cast;
    using std::chrono::milliseconds;
    const auto now = Clock::now();
    long wait = 500;
    wait = std::min(wait, long(duration_cast<milliseconds>(next_reap_ - now).count()));
    if (!credits_.empty()) {
        const auto hold = milliseconds(settings_.credit_hold_ms);
        wait = std::min(
            wait,
            long(duration_cast<milliseconds>(credits_.front().received_at + hold - now).count()));
    }
    return std::max(wait, 0L);
}

bool Reader::load_next()
{
    std::optional<Job> job = next_job();
    if (!job) return false;
    service::ScopedLogContext lc(job_log_context(*job));
    logger()->info("reading preproc={} psf={}", job->preproc, job->psf);
    auto loaded_frame = loader_.load(*job);
    if (!loaded_frame.is_ok()) {
        const std::string error = loaded_frame.status().to_string();
        logger()->error("frame failed: {}", error);
        auto fence = plane_->fail(*job, error, me_);
        if (fence.is_ok() && fence.value() != Fence::applied) {
            logger()->warn("failure not recorded: {}", service::to_string(fence.value()));
        }
        ctx_.metrics().frames("failed").Increment();
        keeper_->release(*job);
        return true;
    }
    if (!loaded_frame.value().trace_shift_fields.empty()) {
        service::note_trace_shifts(*plane_, *job, loaded_frame.value().trace_shift_fields);
    }
    ctx_.metrics().stage_seconds("read").Observe(loaded_frame.value().read_seconds);
    ctx_.metrics().frames("read").Increment();
    Loaded loaded{*job, wire::encode(loaded_frame.value().message), Clock::now()};
    ready_.push_back(std::move(loaded));
    return true;
}

void Reader::reap()
{
    auto streams = plane_->lane_streams();
    if (!streams.is_ok()) return;
    const service::QueueSettings& queue = ctx_.settings().queue;
    for (const auto& stream : streams.value()) {
        std::vector<Job> dead;
        auto reclaimed = plane_->reap(stream, me_, queue.lease_ms(), queue.max_deliveries, dead);
        if (!reclaimed.is_ok()) continue;
        for (const auto& job : dead) {
            service::ScopedLogContext lc(job_log_context(job));
            logger()->error("dead-lettered after {} deliveries", job.epoch);
            ctx_.metrics().frames("dead").Increment();
        }
        for (auto& job : reclaimed.value()) {
            service::ScopedLogContext lc(job_log_context(job));
            logger()->warn("lease expired, re-delivering");
            ctx_.metrics().leases("expired").Increment();
            keeper_->hold(job);
            claimed_.push_back(std::move(job));
        }
    }
}

bool Reader::step()
{
    if (keeper_->drain_requested()) return false;
    if (ctx_.settings().service.max_frames_reached(frames_sent_)) return false;

    const auto prefetch = std::size_t(settings_.prefetch);
    // Re-delivered jobs are loaded at once; otherwise sleep until a message, a job from the
    // feed, a credit's deadline or the reaper.
    const bool wants_job = ready_.size() < prefetch || (!credits_.empty() && ready_.empty());
    receive_messages(wants_job && !claimed_.empty() ? 0 : sleep_ms(), wants_job);
    dispatch();
    if (!credits_.empty() && ready_.empty()) {
        if (load_next()) dispatch();
    } else if (ready_.size() < prefetch) {
        load_next();
    }
    // A credit we cannot serve goes back, so the worker can ask another reader.
    const auto hold = std::chrono::milliseconds(settings_.credit_hold_ms);
    while (!credits_.empty() && ready_.empty() &&
           Clock::now() - credits_.front().received_at > hold) {
        wire::OutgoingMessage m;
        m.type = wire::MessageType::no_work;
        m.meta["reader"] = ctx_.name();
        if (const auto& slot = credits_.front().slot) {
            m.answers_slot = slot->token;
            m.answers_generation = slot->generation;
        }
        std::vector<zmq::message_t> out;
        out.emplace_back(credits_.front().identity);
        for (auto& p : wire::encode(m)) out.push_back(std::move(p));
        service::try_send(router_, out);
        credits_.pop_front();
    }
    const auto now = Clock::now();
    if (now >= next_reap_) {
        reap();
        next_reap_ = now + seconds(ctx_.settings().queue.reaper_interval_s);
    }
    if (now >= next_depth_) {
        next_depth_ = now + seconds(5);
        auto lag = redis_->command({"XINFO", "GROUPS", plane_->nightly_stream()});
        if (lag.is_ok() && !lag.value().elements.empty()) {
            for (const auto& [k, v] : lag.value().elements[0].pairs()) {
                if (k == "lag")
                    ctx_.metrics().queue_depth("nightly").Set(double(std::atoll(v.c_str())));
            }
        }
    }
    ctx_.metrics().frames_in_memory().Set(double(ready_.size()));
    return true;
}

void Reader::drain(Clock::time_point)
{
    for (const auto& job : feed_->stop()) hand_back(job);
    for (const auto& frame : ready_) hand_back(frame.job);
    for (const auto& job : claimed_) hand_back(job);
    ready_.clear();
    claimed_.clear();
    credits_.clear();
    service::close_dropping_unsent(router_);
    keeper_.reset();
}

}  // namespace ex2d::reader
