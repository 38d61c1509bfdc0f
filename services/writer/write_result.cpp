// SPDX-License-Identifier: BSD-3-Clause
// A write thread's result: written, or kept and tried again while the output storage fails
// (docs/operations.md, "Output storage failing").
#include <chrono>

#include "ex2d/logging.hpp"
#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "writer.hpp"

namespace ex2d::writer {

using service::Fence;
using service::Job;
using service::job_log_context;

void Writer::write_result(Received received, std::size_t index, service::ControlPlane& plane)
{
    const Job& job = received.job;
    service::ScopedLogContext lc(job_log_context(job));
    auto decoded = service::decode_result(received.message);
    received.message = {};
    if (received.slot != 0) result_slots_->release(received.slot, received.slot_generation);
    if (!decoded.is_ok()) {
        drop_malformed(decoded.status());
        service::hand_back(plane, *keeper_, job, ctx_.settings().queue.lease_ms());
        return;
    }
    const service::FrameOutputs& out = decoded.value();
    auto still_ours = [&] {
        auto f = plane.renew(job);
        return f.is_ok() && f.value() == Fence::applied;
    };
    // A failed write on the storage keeps the frame here, leased, instead of letting its lease
    // lapse: a re-delivery would extract it again and count towards queue.max_deliveries, and
    // an outage of an hour would turn frames dead.
    for (int failures = 1;; ++failures) {
        const auto start = Clock::now();
        auto outcome =
            write_output(out, me_, settings_.fsync, still_ours, *temporaries_, fibermap_columns_);
        if (outcome.is_ok() || outcome.status().code() != StatusCode::io_error) {
            conclude(job, out, outcome, start, plane);
            return;
        }
        const double delay_s = note_storage_failure(job, outcome.status(), failures, plane);
        if (!wait_to_retry(index, delay_s)) {
            logger()->warn("stopping while the output storage fails: frame handed back");
            service::hand_back(plane, *keeper_, job, ctx_.settings().queue.lease_ms());
            return;
        }
        if (keeper_->lost(job)) {
            ctx_.metrics().frames("stale").Increment();
            logger()->warn("write abandoned: lease lost while the output storage failed");
            keeper_->release(job);
            return;
        }
    }
}

void Writer::conclude(const Job& job, const service::FrameOutputs& out,
                      const Result<WriteOutcome>& outcome, Clock::time_point start,
                      service::ControlPlane& plane)
{
    if (!outcome.is_ok()) {
        const Status& s = outcome.status();
        if (s.code() == StatusCode::invalid_argument) {
            // Fenced out: another holder has the job, and the system did what it should.
            ctx_.metrics().frames("stale").Increment();
            logger()->warn("write abandoned: {}", s.to_string());
        } else {
            logger()->error("write failed: {}", s.to_string());
            ctx_.metrics().frames("failed").Increment();
            (void)plane.fail(job, s.to_string(), me_);
        }
        keeper_->release(job);
        return;
    }
    note_storage_recovered();
    const double write_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    auto done = plane.finish(job, outcome.value().checksum, outcome.value().bytes, me_);
    keeper_->release(job);
    if (done.is_ok() && done.value() == Fence::gone) {
        // The reply to a finish that did run can be lost with a Redis connection; the retry
        // then finds the job acknowledged. The ledger says whether it was ours.
        auto frame = plane.frame(job.campaign, job.expid, job.camera);
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
    keeper_->set_field("frames", std::to_string(++frames_done_));
    logger()->info(
        "frame {} output={} bytes={} checksum={} write_s={:.2f} read_s={:.2f} "
        "extract_s={:.2f} worker={} badcolumn_mask={} badcolumn_bins={} badamp_fibers={}",
        outcome.value().skipped ? "already written" : "written", job.output, outcome.value().bytes,
        outcome.value().checksum, write_seconds, out.read_seconds, out.extract_seconds, out.worker,
        out.badcolumn_mask, out.badcolumn_bins, out.badcolumn_badamp_fibers);
}

double Writer::note_storage_failure(const service::Job& job, const Status& status, int failures,
                                    service::ControlPlane& plane)
{
    const double delay_s =
        storage_retry_delay_s(failures, settings_.storage_retry_s, settings_.storage_retry_max_s);
    const std::string kind = storage_error_kind(status.message());
    const long long now_ms = service::unix_ms();
    logger()->error("storage failing ({}), retrying in {:.1f} s (try {}): {}", kind, delay_s,
                    failures, status.message());
    ctx_.metrics().storage_errors(kind).Increment();
    ctx_.metrics().storage_ok().Set(0);
    if (storage_.failed(status.message(), now_ms)) {
        keeper_->set_field("storage", "failing");
        keeper_->set_field("storage_since", std::to_string(now_ms));
    }
    keeper_->set_field("storage_error", status.message());
    // The frame stays `writing`; its error says why, for ex2dctl status and the QA report.
    (void)plane.note_error(job, "output storage failing: " + status.message());
    return delay_s;
}

void Writer::note_storage_recovered()
{
    const auto outage = storage_.recovered();
    if (!outage) return;
    ctx_.metrics().storage_ok().Set(1);
    keeper_->set_field("storage", "ok");
    keeper_->set_field("storage_since", "");
    keeper_->set_field("storage_error", "");
    logger()->info("storage recovered after {:.1f} s; last error: {}",
                   double(service::unix_ms() - outage->since_ms) / 1000.0, outage->error);
}

bool Writer::wait_to_retry(std::size_t index, double delay_s)
{
    std::unique_lock<std::mutex> lock(queue_mutex_);
    retrying_[index] = true;
    const bool stopping = retry_cv_.wait_for(lock, std::chrono::duration<double>(delay_s),
                                             [&] { return stop_writing_; });
    retrying_[index] = false;
    return !stopping;
}

}  // namespace ex2d::writer
