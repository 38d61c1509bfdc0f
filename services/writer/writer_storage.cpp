// SPDX-License-Identifier: BSD-3-Clause
// The writer while its output storage fails (docs/operations.md, "Output storage failing").
#include <chrono>

#include "ex2d/logging.hpp"
#include "ex2d/service/control_plane.hpp"
#include "writer.hpp"

namespace ex2d::writer {

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
