// SPDX-License-Identifier: BSD-3-Clause
#include "worker.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include "ex2d/arms.hpp"
#include "ex2d/cpu_count.hpp"
#include "ex2d/exit_codes.hpp"
#include "ex2d/extraction.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/psf_io.hpp"
#include "ex2d/service/fault_injection.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/wire.hpp"
#include "ex2d/service/zmq_util.hpp"

namespace ex2d::worker {

using service::Fence;
using service::Job;

using service::job_log_context;
using service::seconds;

namespace {

/// desi_proc's bad-column step on the finished frame (datamodel 4.7), by the function that
/// `ex2d extract --badcolumns` calls, so that both write the same MASK and FIBERMAP. The
/// worker applies it because it holds the PSF's traces and the frame.
Status apply_badcolumn_step(const service::FrameInputs& in, const GaussHermitePsf& psf,
                            service::FrameOutputs& out)
{
    out.badcolumn_mask = in.badcolumn_table == "read" ? "applied" : in.badcolumn_table;
    if (in.badcolumn_table != "read") return Status::ok();
    EX2D_ASSIGN_OR_RETURN(Arm arm, parse_arm(in.job.camera));
    StoredFrame& f = out.frame;
    const BadColumnFrame target{&psf.xtrace,   &f.wave,       f.specmin,      f.nspec,
                                f.mask.data(), &out.fibermap, arm_letter(arm)};
    EX2D_ASSIGN_OR_RETURN(BadColumnOutcome outcome, apply_badcolumn_mask(in.badcolumns, target));
    out.badcolumn_bins = outcome.masked_bins;
    out.badcolumn_badamp_fibers = long(outcome.flagged_spectra.size());
    logger()->info(
        "badcolumn mask file={} columns={} masked_bins={} masked_fibers={} "
        "badamp_fibers={}",
        in.job.badcolumns, in.badcolumns.column.size(), outcome.masked_bins, outcome.masked_fibers,
        outcome.flagged_spectra.size());
    return Status::ok();
}

/// Whether the frame's PSF is one the reader shifted for it alone (no other frame has it).
bool shifted_by_reader(const service::FrameInputs& in)
{
    if (in.trace_shifts_in != "reader") return false;
    const std::string method = in.image_header.get_string("TRSHIFT").value_or("none");
    return method != "none" && method != "FAILED";
}

double seconds_since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Worker::Worker(service::ServiceContext& ctx)
    : FleetService(ctx),
      settings_(service::WorkerSettings::from(ctx.config())),
      dealer_(zmq_context_, zmq::socket_type::dealer),
      writers_(zmq_context_, zmq::socket_type::router)
{
}

Worker::~Worker()
{
    if (extraction_.valid()) extraction_.wait();
    if (trace_shift_.valid()) trace_shift_.wait();
    if (extraction_done_fd_ >= 0) ::close(extraction_done_fd_);
    if (trace_shift_done_fd_ >= 0) ::close(trace_shift_done_fd_);
}

Status Worker::start()
{
    const service::ZmqSettings& sockets = ctx_.settings().zmq;
    EX2D_RETURN_NOT_OK(connect());

    CudaBackendOptions cuda;
    cuda.device = settings_.device;
    cuda.memory_budget_bytes = std::size_t(settings_.gpu_memory_gib * double(1 << 30));
    StandinBackendOptions standin;
    standin.frame_path = settings_.standin_frame;
    standin.delay_s = settings_.standin_delay_s;
    standin.device_failure_at_batch = settings_.standin_device_failure_at_batch;
    // worker.threads 0 resolves here, as ex2d extract's --threads 0 does: the CPUs this
    // container or Slurm step may use, not the node's core count.
    const int threads = resolve_thread_count(settings_.threads);
    auto backend = make_backend(settings_.backend, threads, cuda, standin);
    if (!backend.is_ok())
        return Status(backend.status().code(), "worker.backend: " + backend.status().message());
    backend_ = std::move(backend).value();
    const DeviceReport report = backend_->device_report();
    device_ = report.device_name.empty() ? "cpu" : report.device_name;
    ctx_.metrics().device_memory_bytes().Set(double(report.held_bytes));

    service::configure_socket(dealer_, sockets, true);
    service::configure_socket(writers_, sockets, true);
    // A message to a writer no connection leads to fails at once instead of vanishing. Not
    // ZMQ_IMMEDIATE here: with it libzmq 4.3 never routes to a connect routing id
    // (EHOSTUNREACH for good); the RESULT itself only follows a GRANT over a live connection.
    writers_.set(zmq::sockopt::router_mandatory, 1);
    writers_.set(zmq::sockopt::immediate, 0);
    EX2D_RETURN_NOT_OK(load_socket_security());
    readers_ = std::make_unique<PeerConnections>(dealer_, *security_, "reader", false);
    writer_links_ = std::make_unique<PeerConnections>(writers_, *security_, "writer", true);
    // One slot per credit: a slot is lent from the CREDIT until its FRAME is decoded.
    frame_slots_ = service::open_slot_pool(sockets.shm_dir, std::size_t(settings_.credit));
    writer_slots_ = std::make_unique<service::SlotMappings>(sockets.shm_dir);
    delivery_ = std::make_unique<ResultDelivery>(writers_, *writer_links_, *writer_slots_,
                                                 ctx_.name(), seconds(sockets.peer_timeout_s),
                                                 seconds(settings_.result_timeout_s));
    if (security_->curve_enabled()) {
        dealer_handshakes_ = std::make_unique<service::HandshakeMonitor>(zmq_context_, dealer_,
                                                                         "reader", &ctx_.metrics());
        writer_handshakes_ = std::make_unique<service::HandshakeMonitor>(zmq_context_, writers_,
                                                                         "writer", &ctx_.metrics());
        logger()->info("curve client key={} trusted_server_keys={}",
                       service::key_fingerprint(security_->public_key()),
                       security_->allowed().empty() ? std::string("any advertised")
                                                    : std::to_string(security_->allowed().size()));
    }
    // The main loop sleeps in poll() until a message or the end of an extraction or of a
    // trace-shift step wakes it.
    extraction_done_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    trace_shift_done_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (extraction_done_fd_ < 0 || trace_shift_done_fd_ < 0)
        return Status::io(std::string("eventfd: ") + std::strerror(errno));
    EX2D_RETURN_NOT_OK(register_process({{"backend", backend_->name()}, {"device", device_}}));
    max_spare_planes_ = 2 * (std::size_t(settings_.credit) + 1);
    device_failures_ = std::make_unique<DeviceFailureRecord>(
        *redis_, *plane_, ctx_.host(), backend_->name() + std::to_string(settings_.device),
        settings_.device_failure_window_s);
    if (device_retired()) return Status::ok();
    discover();
    ctx_.set_ready(true);
    logger()->info("worker ready backend={} device={} credit={} threads={}", backend_->name(),
                   device_, settings_.credit, threads);
    return Status::ok();
}

void Worker::discover()
{
    next_discovery_ = Clock::now() + seconds(ctx_.settings().zmq.discovery_interval_s);
    auto peers = redis_->command({"HGETALL", plane_->key("endpoints")});
    if (!peers.is_ok()) return;
    const long long now = service::unix_ms();
    const long long ttl_ms = ctx_.settings().service.heartbeat_ttl_ms();
    PeerMap live_readers, live_writers, kept_readers, kept_writers;
    for (const auto& [name, value] : peers.value().pairs()) {
        // "role state heartbeat_ms endpoint [curve_public_key]"
        std::istringstream in(value);
        std::string role, state;
        Peer peer;
        long long heartbeat = 0;
        in >> role >> state >> heartbeat >> peer.endpoint >> peer.key;
        if (now - heartbeat > 10 * ttl_ms) {
            (void)redis_->command({"HDEL", plane_->key("endpoints"), name});
            continue;
        }
        if (state == "draining" || peer.endpoint.empty()) continue;
        if (role == "reader") kept_readers[name] = peer;
        if (role == "writer") kept_writers[name] = peer;
        if (now - heartbeat > ttl_ms) continue;
        if (role == "reader") live_readers[name] = peer;
        if (role == "writer") live_writers[name] = peer;
    }
    readers_->sync(live_readers, kept_readers);
    writer_links_->sync(live_writers, kept_writers);
}

void Worker::ask_for_frames()
{
    const auto now = Clock::now();
    // A reader that died holding our credit never answers: forget such credits.
    const auto timeout = seconds(ctx_.settings().zmq.peer_timeout_s);
    while (!credits_out_.empty() && now - credits_out_.front() > timeout) credits_out_.pop_front();
    // Their slots too: a reader stopped in its copy may wake and write on (docs/protocol.md).
    frame_slots_->retire_lent_before(now - timeout);
    if (readers_->empty() || keeper_->drain_requested()) return;
    const long in_hand =
        long(waiting_.size()) + (extracting_job_ ? 1 : 0) + (delivery_->busy() ? 1 : 0);
    const long promised = frames_done_ + in_hand + long(credits_out_.size());
    if (ctx_.settings().service.max_frames_reached(promised)) return;
    const long credit = settings_.credit;
    while (long(credits_out_.size()) + in_hand < credit) {
        wire::OutgoingMessage m;
        m.type = wire::MessageType::credit;
        m.meta["worker"] = ctx_.name();
        m.meta["credits"] = 1;
        const auto slot = frame_slots_->lend();
        if (slot) slot->add_to(m.meta);
        auto parts = wire::encode(m);
        if (!service::try_send(dealer_, parts)) {
            if (slot) frame_slots_->release(slot->token, slot->generation);
            return;
        }
        credits_out_.push_back(now);
    }
}

void Worker::receive_messages(long wait_ms)
{
    zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0},
                               {writers_.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, extraction_done_fd_, ZMQ_POLLIN, 0},
                               {nullptr, trace_shift_done_fd_, ZMQ_POLLIN, 0}};
    if (!service::wait_any(items, 4, wait_ms)) return;
    if (items[1].revents & ZMQ_POLLIN) receive_from_writers();
    while (auto parts = service::try_recv(dealer_)) {
        auto message = service::decode_or_drop(
            std::move(*parts), ctx_, {wire::MessageType::frame, wire::MessageType::no_work},
            frame_slots_->resolver());
        if (!message) continue;
        // Either answer returns the credit it was sent for, and the slot lent with it once
        // the frame is decoded out of it.
        if (!credits_out_.empty()) credits_out_.pop_front();
        const std::uint64_t slot = message->header.shm_token;
        const std::uint32_t generation = message->header.shm_generation;
        if (message->type == wire::MessageType::frame) {
            // A frame that came over the socket sizes the slots lent from now on.
            if ((message->header.shm_flags & wire::kArraysInSlot) == 0) {
                frame_slots_->require(wire::slot_bytes_needed(message->header));
            }
            accept_frame(std::move(*message));
        }
        if (slot != 0) frame_slots_->release(slot, generation);
    }
}

void Worker::receive_from_writers()
{
    while (auto parts = service::try_recv(writers_)) {
        if (parts->size() < 2) continue;
        const std::string writer = parts->front().to_string();
        parts->erase(parts->begin());
        auto message = service::decode_or_drop(std::move(*parts), ctx_, {wire::MessageType::grant});
        if (!message) continue;
        if (delivery_->on_message(writer, *message) == ResultDelivery::Progress::sent) {
            ctx_.metrics()
                .bytes(delivery_->sent_in_slot() ? "sent_shm" : "sent")
                .Increment(double(delivery_->bytes()));
            service::ScopedLogContext lc(job_log_context(delivery_->job()));
            logger()->info("result sent via={} bytes={} writer={}",
                           delivery_->sent_in_slot() ? "shm" : "socket", delivery_->bytes(),
                           writer);
            // The writer renews the lease from here.
            keeper_->release(delivery_->job());
            delivery_->clear();
            ++frames_done_;
            keeper_->set_field("frames", std::to_string(frames_done_));
        }
    }
}

LargeArray<double> Worker::take_spare_plane()
{
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spare_planes_.empty()) return {};
    LargeArray<double> plane = std::move(spare_planes_.back());
    spare_planes_.pop_back();
    return plane;
}

void Worker::return_spare_plane(LargeArray<double> plane)
{
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (spare_planes_.size() < max_spare_planes_) spare_planes_.push_back(std::move(plane));
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): it owns the message (worker.hpp)
void Worker::accept_frame(wire::IncomingMessage message)
{
    auto inputs = service::decode_frame(message, take_spare_plane(), take_spare_plane());
    if (!inputs.is_ok()) {
        drop_malformed(inputs.status());
        return;
    }
    const Job& job = inputs.value().job;
    service::ScopedLogContext lc(job_log_context(job));
    // Take over the lease now; the state moves to extracting when the extraction starts, so
    // a frame that only waits here is not charged if another frame kills this worker.
    auto fence = plane_->renew(job);
    if (!fence.is_ok() || fence.value() != Fence::applied) {
        ctx_.metrics().frames("stale").Increment();
        logger()->warn("frame refused: {}", fence.is_ok() ? service::to_string(fence.value())
                                                          : fence.status().message());
        return;
    }
    keeper_->hold(job);
    ctx_.metrics().frames("received").Increment();
    logger()->info("frame received from reader={}", inputs.value().reader);
    WaitingFrame waiting;
    waiting.job = job;
    if (inputs.value().trace_shifts_in == "worker") {
        if (service::trace_shift_method(job, inputs.value().image_header) == "none") {
            // Nothing to measure: recorded at once, as the reader records it.
            const service::TraceShiftOutcome none;
            service::record_trace_shifts(none, inputs.value().image_header);
            service::note_trace_shifts(*plane_, job, service::trace_shift_fields(none));
        } else {
            waiting.step_pending = true;
            waiting.step_here = true;
        }
    }
    waiting.inputs = std::move(inputs).value();
    waiting_.push_back(std::move(waiting));
}

Result<std::shared_ptr<const GaussHermitePsf>> Worker::psf_for(const service::FrameInputs& in)
{
    const bool keep = !shifted_by_reader(in);
    if (keep) {
        std::lock_guard<std::mutex> lock(psf_mutex_);
        if (const auto* cached = psf_cache_.find(in.psf_checksum)) return *cached;
    }
    EX2D_ASSIGN_OR_RETURN(GaussHermitePsf psf, read_psf_bytes(in.psf_file, in.job.psf));
    auto shared = std::make_shared<const GaussHermitePsf>(std::move(psf));
    if (keep) {
        std::lock_guard<std::mutex> lock(psf_mutex_);
        psf_cache_.put(in.psf_checksum, shared);
    }
    return shared;
}

void Worker::start_trace_shifts()
{
    if (trace_shift_.valid()) return;
    for (WaitingFrame& waiting : waiting_) {
        if (!waiting.step_pending) continue;
        waiting.step_pending = false;
        trace_shift_ =
            std::async(std::launch::async, [this, in = std::move(*waiting.inputs)]() mutable {
                TraceShiftDone done = shift_traces(std::move(in));
                const std::uint64_t one = 1;
                (void)!::write(trace_shift_done_fd_, &one, sizeof one);
                return done;
            });
        waiting.inputs.reset();
        return;
    }
}

Worker::TraceShiftDone Worker::shift_traces(service::FrameInputs in)
{
    service::ScopedLogContext lc(job_log_context(in.job));
    const auto start = Clock::now();
    service::test_delay("TRACE_SHIFTS");
    TraceShiftDone done;
    // The input PSF, which the frames of its camera share: from the cache.
    auto psf = psf_for(in);
    if (!psf.is_ok()) {
        done.status = psf.status();
    } else if (in.planes_f32) {
        step_image_.assign(in.image.begin(), in.image.end());
        step_weights_.assign(in.weights.begin(), in.weights.end());
        const Float32ImageView view{in.ny, in.nx, step_image_.data(), step_weights_.data()};
        done.outcome =
            service::run_trace_shift_step(in.job, in.image_header, view, *psf.value(), in.psf_file);
    } else {
        const ImageView view{in.ny, in.nx, in.image.data(), in.weights.data()};
        done.outcome =
            service::run_trace_shift_step(in.job, in.image_header, view, *psf.value(), in.psf_file);
    }
    if (psf.is_ok()) {
        service::record_trace_shifts(done.outcome, in.image_header);
        if (!done.outcome.failed && done.outcome.method != "none") {
            // As the reader sends it: the checksum of the PSF the frame is extracted with.
            in.psf_checksum = wire::hex64(wire::checksum64(in.psf_file.data(), in.psf_file.size()));
            auto shifted = read_psf_bytes(in.psf_file, in.job.psf);
            if (shifted.is_ok()) {
                done.shifted_psf =
                    std::make_shared<const GaussHermitePsf>(std::move(shifted).value());
            } else {
                done.status = shifted.status();
            }
        }
    }
    done.seconds = seconds_since(start);
    done.inputs = std::move(in);
    return done;
}

void Worker::collect_trace_shifts()
{
    if (!trace_shift_.valid()) return;
    if (trace_shift_.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) return;
    std::uint64_t signals = 0;
    (void)!::read(trace_shift_done_fd_, &signals, sizeof signals);
    TraceShiftDone done = trace_shift_.get();
    const Job job = done.inputs.job;
    const auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const WaitingFrame& w) {
        return !w.inputs && w.job.job == job.job && w.job.epoch == job.epoch;
    });
    // Handed back while its step ran (a drain): another worker has the frame now.
    if (it == waiting_.end()) return;
    service::ScopedLogContext lc(job_log_context(job));
    ctx_.metrics().stage_seconds("trace_shifts").Observe(done.seconds);
    if (!done.status.is_ok()) {
        logger()->error("trace-shift step failed: {}", done.status.to_string());
        fail_frame(job, done.status.to_string());
        waiting_.erase(it);
        return;
    }
    service::note_trace_shifts(*plane_, job, service::trace_shift_fields(done.outcome));
    logger()->info("trace-shift step done on the worker wall_s={:.3f} cpu_s={:.3f}", done.seconds,
                   done.outcome.cpu_seconds);
    it->inputs = std::move(done.inputs);
    it->shifted_psf = std::move(done.shifted_psf);
}

Result<service::FrameOutputs> Worker::extract(service::FrameInputs& in,
                                              std::shared_ptr<const GaussHermitePsf> psf)
{
    service::ScopedLogContext lc(job_log_context(in.job));
    const auto start = Clock::now();
    service::test_delay("EXTRACT");
    if (!psf) {
        EX2D_ASSIGN_OR_RETURN(psf, psf_for(in));
    }
    EX2D_ASSIGN_OR_RETURN(ExtractionOptions opt, service::options_from_json(in.job.options));
    const ImageView view{in.ny, in.nx, in.image.data(), in.weights.data()};
    EX2D_ASSIGN_OR_RETURN(ExtractedFrame frame, extract_frame(view, *psf, opt, *backend_));
    service::FrameOutputs out;
    out.job = in.job;
    out.worker = ctx_.name();
    out.device = device_;
    out.image_header = std::move(in.image_header);
    out.psf_header = psf->psf_header;
    out.fibermap = std::move(in.fibermap);
    out.preproc_checksum = in.preproc_checksum;
    out.psf_checksum = in.psf_checksum;
    out.options = opt;
    out.npatch = frame.npatch;
    out.npatch_retried = frame.npatch_retried;
    out.npatch_failed = frame.npatch_failed;
    // Narrowed to the file's float32 here, SCORES from the float64 values: the writer gets
    // what it writes and no more (xflux and pixmask_fraction are not in a frame file).
    out.frame = to_stored_frame(frame, opt.dw);
    EX2D_RETURN_NOT_OK(apply_badcolumn_step(in, *psf, out));
    out.read_seconds = in.read_seconds;
    out.extract_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    logger()->info("extracted patches={} retried={} failed={} extract_s={:.2f}", out.npatch,
                   out.npatch_retried, out.npatch_failed, out.extract_seconds);
    return out;
}

bool Worker::front_ready() const
{
    return !waiting_.empty() && waiting_.front().inputs && !waiting_.front().step_pending;
}

void Worker::start_extraction()
{
    if (extracting_job_ || delivery_->busy() || waiting_.empty()) return;
    if (!front_ready()) {
        // Its trace-shift step has not ended: the extraction waits for it (the step's thread
        // wakes the main loop when it ends).
        if (!waiting_.front().needed_at) waiting_.front().needed_at = Clock::now();
        return;
    }
    WaitingFrame waiting = std::move(waiting_.front());
    waiting_.pop_front();
    service::FrameInputs& in = *waiting.inputs;
    if (keeper_->lost(in.job)) {
        keeper_->release(in.job);
        return;
    }
    service::ScopedLogContext lc(job_log_context(in.job));
    auto fence = plane_->advance(in.job, "extracting", me_);
    if (!fence.is_ok() || fence.value() != Fence::applied) {
        ctx_.metrics().frames("stale").Increment();
        logger()->warn(
            "frame dropped before extraction: {}",
            fence.is_ok() ? service::to_string(fence.value()) : fence.status().message());
        keeper_->release(in.job);
        return;
    }
    if (service::test_poisoned(in.job.job)) {
        logger()->critical("EX2D_TEST_POISON_JOB matches job={}: killing this worker", in.job.job);
        ::raise(SIGKILL);
    }
    if (waiting.step_here) {
        // 0 when the step ended before the extraction thread was free for the frame.
        const double wait = waiting.needed_at ? seconds_since(*waiting.needed_at) : 0.0;
        ctx_.metrics().stage_seconds("trace_shift_wait").Observe(wait);
        logger()->info("extraction started trace_shift_wait_s={:.3f}", wait);
    } else {
        logger()->info("extraction started");
    }
    keeper_->set_field("current", in.job.job);
    extracting_job_ = in.job;
    extraction_ = std::async(std::launch::async, [this, in = std::move(in),
                                                  psf = std::move(waiting.shifted_psf)]() mutable {
        auto result = [&]() -> Result<service::FrameOutputs> {
            try {
                return extract(in, std::move(psf));
            } catch (const DeviceFailure& e) {
                return Status(StatusCode::device_failed, e.what());
            }
        }();
        return_spare_plane(std::move(in.image));
        return_spare_plane(std::move(in.weights));
        const std::uint64_t one = 1;
        (void)!::write(extraction_done_fd_, &one, sizeof one);
        return result;
    });
}

void Worker::collect_extraction()
{
    if (!extracting_job_ || !extraction_.valid()) return;
    if (extraction_.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) return;
    std::uint64_t signals = 0;
    (void)!::read(extraction_done_fd_, &signals, sizeof signals);
    Job job = *extracting_job_;
    extracting_job_.reset();
    keeper_->set_field("current", "");
    ctx_.metrics().device_memory_bytes().Set(double(backend_->device_report().held_bytes));
    service::ScopedLogContext lc(job_log_context(job));
    auto result = extraction_.get();
    if (!result.is_ok() && result.status().code() == StatusCode::device_failed) {
        device_failed(job, result.status().message());
        return;
    }
    if (!result.is_ok()) {
        const std::string error = result.status().to_string();
        logger()->error("extraction failed: {}", error);
        fail_frame(job, error);
        return;
    }
    ctx_.metrics().stage_seconds("extract").Observe(result.value().extract_seconds);
    ctx_.metrics().frames("extracted").Increment();
    delivery_->start(job, wire::encode(service::encode_result(std::move(result).value())));
}

void Worker::fail_frame(const Job& job, const std::string& error)
{
    ctx_.metrics().frames("failed").Increment();
    auto fence = plane_->fail(job, error, me_);
    if (fence.is_ok() && fence.value() != Fence::applied) {
        logger()->warn("failure not recorded: {}", service::to_string(fence.value()));
    }
    keeper_->release(job);
}

void Worker::device_failed(const Job& job, const std::string& error)
{
    ctx_.metrics().device_failures().Increment();
    hand_back(job);
    const Status recorded = device_failures_->record(job.job + " " + ctx_.name());
    logger()->error(
        "device {} failed mid-frame: {}; the frame goes back to the queue and this worker exits "
        "with code {} for its supervisor to restart it{}",
        device_, error, int(kExitDevice),
        recorded.is_ok() ? "" : " (the failure is not recorded: " + recorded.message() + ")");
    device_has_failed_ = true;
    exit_code_ = kExitDevice;
}

bool Worker::device_retired()
{
    auto recent = device_failures_->recent();
    if (!recent.is_ok()) {
        logger()->warn("device failures not read ({}): taking work", recent.status().message());
        return false;
    }
    if (recent.value() < settings_.max_device_failures) return false;
    retired_ = true;
    keeper_->retire();
    logger()->error(
        "device {} ({}) of host {} failed {} times within {} s (worker.max_device_failures {}): "
        "this worker takes no work; it stays up, not ready, as state retired, and exits 0 on "
        "SIGTERM. Check the device (nvidia-smi -q, Xid lines in the kernel log); the failures "
        "are in {} and count until they are older than worker.device_failure_window_s",
        device_, backend_->name() + std::to_string(settings_.device), ctx_.host(), recent.value(),
        settings_.device_failure_window_s, settings_.max_device_failures, device_failures_->key());
    return true;
}

void Worker::send_result()
{
    if (!delivery_->busy()) return;
    const Job job = delivery_->job();
    if (keeper_->lost(job)) {
        logger()->warn("dropping result job={} attempt={}: its lease was lost", job.job, job.epoch);
        ctx_.metrics().frames("stale").Increment();
        keeper_->release(job);
        delivery_->clear();
        return;
    }
    if (delivery_->advance() != ResultDelivery::Progress::timed_out) return;
    // No writer took it in time: holding it longer would hold the frame for ever if the
    // writers are gone or unreachable. Another worker extracts it again; the frame is not
    // charged for it (a writer whose storage fails grants nothing for as long as it fails).
    service::ScopedLogContext lc(job_log_context(job));
    logger()->warn(
        "result not delivered: no writer granted room within {} s; handing the frame back",
        settings_.result_timeout_s);
    ctx_.metrics().frames("undelivered").Increment();
    delivery_->clear();
    hand_back(job, true);
}

bool Worker::step()
{
    if (keeper_->drain_requested() || device_has_failed_) return false;
    if (retired_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return true;
    }
    if (Clock::now() >= next_discovery_) discover();
    if (dealer_handshakes_) dealer_handshakes_->poll();
    if (writer_handshakes_) writer_handshakes_->poll();
    collect_trace_shifts();
    collect_extraction();
    // Nothing more starts on a device that failed: the drain hands the waiting frames back.
    if (device_has_failed_) return false;
    send_result();
    start_extraction();
    start_trace_shifts();
    ask_for_frames();
    // Nothing to do until a message, the end of the extraction or of a trace-shift step (their
    // eventfds) or a timer: a frame that waits while a result waits for a writer's grant, or
    // for its step, is no reason to spin.
    const bool can_start = front_ready() && !extracting_job_ && !delivery_->busy();
    receive_messages(can_start ? 0 : 100);
    ctx_.metrics().frames_in_memory().Set(
        double(waiting_.size() + (extracting_job_ ? 1 : 0) + (delivery_->busy() ? 1 : 0)));
    return !ctx_.settings().service.max_frames_reached(frames_done_);
}

void Worker::drain(Clock::time_point deadline)
{
    // No new credit from here. Frames not started go back at once, one whose trace-shift step
    // runs too (the step's thread ends on its own and its outcome is dropped); the one
    // extracting is finished and sent if the deadline allows, else handed back.
    for (const auto& waiting : waiting_) hand_back(waiting.job);
    waiting_.clear();
    while (Clock::now() < deadline && (extracting_job_ || delivery_->busy())) {
        collect_extraction();
        send_result();
        receive_from_writers();
        if (Clock::now() >= next_discovery_) discover();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ctx_.tick();
    }
    if (delivery_->busy()) {
        hand_back(delivery_->job());
        delivery_->clear();
    }
    if (extracting_job_) {
        hand_back(*extracting_job_);
        logger()->warn("drain deadline reached during an extraction; exiting without it");
        logger()->flush();
        keeper_.reset();
        std::_Exit(0);
    }
    service::close_dropping_unsent(dealer_);
    // The last RESULT may still be queued: the linger lets it reach its writer. The libzmq
    // defect close_dropping_unsent avoids needs a writer to send during that linger (a GRANT
    // for an offer already served elsewhere) and then reset, which is rare; the cost of
    // dropping the RESULT instead would be a frame extracted again at every drain.
    writers_.close();
    keeper_.reset();
}

}  // namespace ex2d::worker
