// SPDX-License-Identifier: BSD-3-Clause
#include "writer.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ex2d/logging.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/service/zmq_util.hpp"
#include "ex2d/temporary_files.hpp"

namespace ex2d::writer {

using service::Fence;
using service::Job;

using service::job_log_context;
using service::seconds;

Writer::Writer(service::ServiceContext& ctx)
    : FleetService(ctx),
      settings_(service::WriterSettings::from(ctx.config())),
      router_(zmq_context_, zmq::socket_type::router)
{
}

Writer::~Writer()
{
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stop_writing_ = true;
    }
    queue_cv_.notify_all();
    retry_cv_.notify_all();
    for (std::thread& t : write_threads_) {
        if (t.joinable()) t.join();
    }
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status Writer::start()
{
    const int hwm = ctx_.settings().zmq.hwm;
    if (settings_.credit > hwm) {
        // More grants than the receive queue holds would stall the connection (and its
        // heartbeats) behind a full queue, which is what the credit exists to prevent.
        return Status::invalid("writer.credit " + std::to_string(settings_.credit) +
                               " exceeds zmq.hwm " + std::to_string(hwm));
    }
    const int threads = settings_.write_threads;
    if (!settings_.fibermap_columns.empty()) {
        EX2D_ASSIGN_OR_RETURN(FibermapColumns columns,
                              read_fibermap_columns_json(settings_.fibermap_columns));
        fibermap_columns_ = std::make_shared<const FibermapColumns>(std::move(columns));
    }
    EX2D_RETURN_NOT_OK(connect());
    EX2D_ASSIGN_OR_RETURN(service::ControlConnection ledger, service::connect_control_plane(ctx_));
    ledger_redis_ = std::move(ledger.redis);
    temporaries_ = std::make_unique<RedisTemporaryLedger>(*ledger_redis_, *ledger.plane, me_);
    for (int i = 0; i < threads; ++i) {
        EX2D_ASSIGN_OR_RETURN(service::ControlConnection c, service::connect_control_plane(ctx_));
        write_planes_.push_back(std::move(c));
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) return Status::io(std::string("eventfd: ") + std::strerror(errno));
    // A GRANT to a worker that has gone fails at once instead of vanishing (serve: mandatory).
    EX2D_ASSIGN_OR_RETURN(const std::string endpoint, serve(router_));
    temporaries_->sweep();
    next_sweep_ = Clock::now() + seconds(settings_.sweep_interval_s);
    keeper_->set_field("storage", "ok");
    ctx_.metrics().storage_ok().Set(1);
    // A slot is lent from its GRANT until a write thread has decoded the RESULT in it.
    result_slots_ = service::open_slot_pool(ctx_.settings().zmq.shm_dir,
                                            std::size_t(settings_.credit) + std::size_t(threads));
    writing_.assign(write_planes_.size(), std::nullopt);
    retrying_.assign(write_planes_.size(), false);
    for (std::size_t i = 0; i < write_planes_.size(); ++i) {
        write_threads_.emplace_back([this, i] { write_loop(i); });
    }
    ctx_.set_ready(true);
    logger()->info("writer ready endpoint={} credit={} write_threads={}", endpoint,
                   settings_.credit, threads);
    return Status::ok();
}

std::size_t Writer::queued() const
{
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return queue_.size();
}

bool Writer::busy() const
{
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return !queue_.empty() || std::any_of(writing_.begin(), writing_.end(),
                                          [](const auto& j) { return j.has_value(); });
}

bool Writer::waiting_on_storage() const
{
    if (storage_.ok()) return false;
    std::lock_guard<std::mutex> lock(queue_mutex_);
    for (std::size_t i = 0; i < writing_.size(); ++i) {
        if (writing_[i] && !retrying_[i]) return false;
    }
    return true;
}

void Writer::grant()
{
    // While the output storage fails, results are left to other writers (or wait in their
    // workers): one taken here could not be written either.
    if (!storage_.ok()) return;
    // A credit is room for one result beyond those the write threads hold: granted and not
    // yet arrived, or arrived and waiting for a thread.
    const auto credit = std::size_t(settings_.credit);
    while (granted_.size() + queued() < credit && !offers_.empty()) {
        const Offer offer = std::move(offers_.front());
        offers_.pop_front();
        wire::OutgoingMessage m;
        m.type = wire::MessageType::grant;
        m.job_id = offer.job;
        m.meta["writer"] = ctx_.name();
        m.meta["job"] = offer.job;
        // The OFFER's bytes count the header and meta too: room enough for the arrays' padding.
        result_slots_->require(offer.bytes + wire::kMaxParts * wire::kSlotAlignment);
        const auto slot = result_slots_->lend();
        if (slot) slot->add_to(m.meta);
        auto parts = wire::encode(m);
        parts.insert(parts.begin(), zmq::message_t(offer.worker.data(), offer.worker.size()));
        // A worker that went away since its offer cannot be granted; its offer is dropped.
        if (service::try_send(router_, parts)) {
            granted_[offer.worker] = {Clock::now(), slot};
        } else if (slot) {
            result_slots_->release(slot->token, slot->generation);
        }
    }
}

void Writer::expire_grants()
{
    const double timeout_s = ctx_.settings().zmq.peer_timeout_s;
    const auto timeout = seconds(timeout_s);
    const auto now = Clock::now();
    for (auto it = granted_.begin(); it != granted_.end();) {
        if (now - it->second.at > timeout) {
            logger()->warn("grant lapsed: no result from a worker within {} s", timeout_s);
            // The worker may still be copying into the slot: it is not lent again.
            if (it->second.slot) result_slots_->retire(it->second.slot->token);
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
        {wire::MessageType::offer, wire::MessageType::result, wire::MessageType::decline},
        result_slots_->resolver());
    if (!message) return;
    if (message->type == wire::MessageType::offer) {
        const bool waiting = granted_.count(worker) != 0 ||
                             std::any_of(offers_.begin(), offers_.end(),
                                         [&](const Offer& o) { return o.worker == worker; });
        const auto bytes = message->meta.find("bytes");
        const std::size_t size = bytes != message->meta.end() && bytes->is_number_unsigned()
                                     ? bytes->get<std::size_t>()
                                     : 0;
        if (!waiting) offers_.push_back({worker, message->job_id, size});
        return;
    }
    granted_.erase(worker);
    const std::uint64_t slot = message->header.shm_token;
    const std::uint32_t generation = message->header.shm_generation;
    const bool in_slot = (message->header.shm_flags & wire::kArraysInSlot) != 0;
    // A DECLINE, or a RESULT that came over the socket, returns its slot at once; a RESULT in
    // the slot keeps it until a write thread has decoded it.
    if (message->type == wire::MessageType::result && in_slot) {
        accept_result(std::move(*message), slot, generation);
        return;
    }
    if (slot != 0) result_slots_->release(slot, generation);
    if (message->type == wire::MessageType::result) accept_result(std::move(*message), 0, 0);
}

void Writer::accept_result(wire::IncomingMessage message, std::uint64_t slot,
                           std::uint32_t slot_generation)
{
    // A result refused here gives its slot back with it.
    struct SlotReturn {
        service::SlotPool& pool;
        std::uint64_t token;
        std::uint32_t generation;
        ~SlotReturn()
        {
            if (token != 0) pool.release(token, generation);
        }
    } slot_return{*result_slots_, slot, slot_generation};
    // Only the job is read here (a few hundred bytes of JSON); the arrays are decoded by the
    // write thread. The fence and the lease are taken at once, so that a result waiting in
    // the queue is this writer's and its lease is renewed.
    auto job = service::job_from_message(message);
    if (!job.is_ok()) {
        drop_malformed(job.status());
        return;
    }
    const std::string worker = message.meta.value("worker", "");
    service::ScopedLogContext lc(job_log_context(job.value()));
    auto fence = plane_->advance(job.value(), "writing", me_);
    if (!fence.is_ok() || fence.value() != Fence::applied) {
        ctx_.metrics().frames("stale").Increment();
        logger()->warn("result refused: {} worker={}",
                       fence.is_ok() ? service::to_string(fence.value()) : fence.status().message(),
                       worker);
        return;
    }
    keeper_->hold(job.value());
    logger()->info("result received from worker={}", worker);
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queue_.push_back({std::move(job).value(), std::move(message), slot, slot_generation});
    }
    slot_return.token = 0;
    queue_cv_.notify_one();
}

void Writer::write_loop(std::size_t index)
{
    service::ControlPlane& plane = *write_planes_[index].plane;
    for (;;) {
        Received received;
        {
            std::unique_lock<std::mutex> lock(queue_mutex_);
            queue_cv_.wait(lock, [&] { return stop_writing_ || !queue_.empty(); });
            if (stop_writing_) return;
            received = std::move(queue_.front());
            queue_.pop_front();
            writing_[index] = received.job;
        }
        // The result left the queue: its credit is free for the next GRANT.
        const std::uint64_t one = 1;
        (void)!::write(wake_fd_, &one, sizeof one);
        write_result(std::move(received), index, plane);
        std::lock_guard<std::mutex> lock(queue_mutex_);
        writing_[index].reset();
    }
}

bool Writer::step()
{
    if (keeper_->drain_requested()) return false;
    if (Clock::now() >= next_sweep_) {
        temporaries_->sweep();
        next_sweep_ = Clock::now() + seconds(settings_.sweep_interval_s);
    }
    expire_grants();
    grant();
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    if (service::wait_any(items, 2, 100)) {
        if (items[1].revents & ZMQ_POLLIN) {
            std::uint64_t signals = 0;
            (void)!::read(wake_fd_, &signals, sizeof signals);
        }
        while (auto parts = service::try_recv(router_)) {
            receive(std::move(*parts));
            grant();
            if (ctx_.stop_requested()) break;
        }
    }
    return !ctx_.settings().service.max_frames_reached(frames_done_);
}

void Writer::drain(Clock::time_point deadline)
{
    // No grant from here; a result granted but not yet received is left to its lease, which
    // re-delivers it. The results in hand are written while the deadline allows, unless the
    // output storage fails: then they are handed back at once.
    service::close_dropping_unsent(router_);
    while (busy() && !waiting_on_storage() && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ctx_.tick();
    }
    std::vector<Job> unfinished;
    bool still_writing = false;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stop_writing_ = true;
        for (const Received& r : queue_) unfinished.push_back(r.job);
        queue_.clear();
        for (std::size_t i = 0; i < writing_.size(); ++i) {
            // A thread waiting to retry hands its job back itself when woken.
            if (!writing_[i] || retrying_[i]) continue;
            unfinished.push_back(*writing_[i]);
            still_writing = true;
        }
    }
    queue_cv_.notify_all();
    retry_cv_.notify_all();
    for (const Job& job : unfinished) hand_back(job);
    if (still_writing) {
        // A write thread cannot be interrupted inside CFITSIO or the compressor: its job is
        // handed back above, its temporary files removed here, and the process ends now. The
        // keeper stays (the thread may still call it); the registration expires by itself.
        // remove_temporary_files() takes the file being compressed and keeps any new one from
        // starting; the ledger holds this writer's own temporary, complete and waiting for
        // its fsync or rename, which would otherwise stay until another writer's sweep.
        logger()->warn("drain deadline reached during a write; exiting without it");
        remove_temporary_files();
        const int removed = temporaries_->remove_own();
        logger()->info("removed {} temporary file(s) of the unfinished write", removed);
        logger()->flush();
        std::_Exit(0);
    }
    for (std::thread& t : write_threads_) t.join();
    write_threads_.clear();
    keeper_.reset();
}

}  // namespace ex2d::writer
