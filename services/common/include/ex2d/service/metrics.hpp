// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file metrics.hpp
/// The metrics every fleet process exports on /metrics (Prometheus text format 0.0.4, through
/// prometheus-cpp's registry and serializer). Names start with ex2d_; counters end in _total,
/// durations are histograms in seconds; no label holds an exposure, frame or job id.

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace ex2d::service {

class Metrics {
public:
    explicit Metrics(const std::string& role);

    prometheus::Registry& registry() { return *registry_; }
    /// The exposition text of every family.
    std::string serialize() const;

    /// ex2d_frames_total{role,state}: frames this process moved into `state`
    /// (read, extracted, written, skipped, failed, dead, stale).
    prometheus::Counter& frames(const std::string& state);
    /// ex2d_stage_seconds{stage}: histogram of read, queue_wait, transfer, extract, write,
    /// trace_shifts and trace_shift_wait (a worker's trace-shift step and the wait for it).
    prometheus::Histogram& stage_seconds(const std::string& stage);
    /// ex2d_bytes_total{direction}: bytes sent or received over ZeroMQ.
    prometheus::Counter& bytes(const std::string& direction);
    /// ex2d_messages_dropped_total{reason}: invalid messages dropped.
    prometheus::Counter& messages_dropped(const std::string& reason);
    /// ex2d_leases_total{event}: renewed, expired (reclaimed by this reaper), lost (renewal refused).
    prometheus::Counter& leases(const std::string& event);
    /// ex2d_queue_depth{lane}: jobs waiting in the lane's streams (gauge).
    prometheus::Gauge& queue_depth(const std::string& lane);
    /// ex2d_redis_reconnects_total.
    prometheus::Counter& redis_reconnects();
    /// ex2d_frames_in_memory: frames this process holds (gauge).
    prometheus::Gauge& frames_in_memory();
    /// ex2d_device_memory_bytes: device memory held by the worker's backend (gauge).
    prometheus::Gauge& device_memory_bytes();
    /// ex2d_up{role}: 1 while the process is ready, 0 while starting or draining.
    prometheus::Gauge& ready();
    /// ex2d_device_failures_total: frames a worker's device failed in the middle of (each
    /// handed back; the worker then exits with kExitDevice).
    prometheus::Counter& device_failures();
    /// ex2d_zap_requests_total{result}: CURVE handshakes the ZAP handler accepted or refused.
    prometheus::Counter& zap_requests(const std::string& result);
    /// ex2d_peers_refused_total{reason}: peers a worker did not connect to (plaintext_peer,
    /// curve_required, untrusted_key, bad_key), counted once per peer and advertisement, and
    /// CURVE handshakes servers refused (handshake_refused).
    prometheus::Counter& peers_refused(const std::string& reason);
    /// ex2d_storage_errors_total{kind}: writes that failed on the output file system, by
    /// errno (enospc, edquot, erofs, eio, enoent, enotdir, eacces, other).
    prometheus::Counter& storage_errors(const std::string& kind);
    /// ex2d_storage_ok: writer only (made at its first call), 1 while writes succeed.
    prometheus::Gauge& storage_ok();

private:
    std::string role_;
    std::shared_ptr<prometheus::Registry> registry_;
    prometheus::Family<prometheus::Counter>* frames_;
    prometheus::Family<prometheus::Histogram>* stage_;
    prometheus::Family<prometheus::Counter>* bytes_;
    prometheus::Family<prometheus::Counter>* dropped_;
    prometheus::Family<prometheus::Counter>* leases_;
    prometheus::Family<prometheus::Gauge>* queue_depth_;
    prometheus::Counter* reconnects_;
    prometheus::Gauge* in_memory_;
    prometheus::Gauge* device_memory_;
    prometheus::Gauge* ready_;
    prometheus::Counter* device_failures_;
    prometheus::Family<prometheus::Counter>* zap_;
    prometheus::Family<prometheus::Counter>* peers_refused_;
    prometheus::Family<prometheus::Counter>* storage_errors_;
    prometheus::Family<prometheus::Gauge>* storage_ok_;
};

}  // namespace ex2d::service
