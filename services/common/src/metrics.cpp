// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/metrics.hpp"

#include <prometheus/text_serializer.h>

namespace ex2d::service {

namespace {

/// Seconds, from a 10 ms decode to a 5 min extraction.
const prometheus::Histogram::BucketBoundaries kStageBuckets = {0.01, 0.03, 0.1, 0.3, 1,
                                                               3,    10,   30,  100, 300};

}  // namespace

Metrics::Metrics(const std::string& role)
    : role_(role), registry_(std::make_shared<prometheus::Registry>())
{
    // role is a constant label of every family, so each series carries it.
    const prometheus::Labels role_label = {{"role", role}};
    auto& registry = *registry_;
    frames_ = &prometheus::BuildCounter()
                   .Name("ex2d_frames_total")
                   .Help("Frames this process moved into a state")
                   .Labels(role_label)
                   .Register(registry);
    stage_ = &prometheus::BuildHistogram()
                  .Name("ex2d_stage_seconds")
                  .Help("Duration of one stage of a frame's processing, seconds")
                  .Labels(role_label)
                  .Register(registry);
    bytes_ = &prometheus::BuildCounter()
                  .Name("ex2d_bytes_total")
                  .Help("Bytes sent or received over ZeroMQ")
                  .Labels(role_label)
                  .Register(registry);
    dropped_ = &prometheus::BuildCounter()
                    .Name("ex2d_messages_dropped_total")
                    .Help("Invalid messages dropped, by reason")
                    .Labels(role_label)
                    .Register(registry);
    leases_ = &prometheus::BuildCounter()
                   .Name("ex2d_leases_total")
                   .Help("Lease events: renewed, expired, lost")
                   .Labels(role_label)
                   .Register(registry);
    queue_depth_ = &prometheus::BuildGauge()
                        .Name("ex2d_queue_depth")
                        .Help("Jobs waiting in a lane's streams")
                        .Labels(role_label)
                        .Register(registry);
    reconnects_ = &prometheus::BuildCounter()
                       .Name("ex2d_redis_reconnects_total")
                       .Help("Reconnections to Redis")
                       .Labels(role_label)
                       .Register(registry)
                       .Add({});
    in_memory_ = &prometheus::BuildGauge()
                      .Name("ex2d_frames_in_memory")
                      .Help("Frames this process holds in memory")
                      .Labels(role_label)
                      .Register(registry)
                      .Add({});
    device_memory_ = &prometheus::BuildGauge()
                          .Name("ex2d_device_memory_bytes")
                          .Help("Device memory held by the worker's backend, bytes")
                          .Labels(role_label)
                          .Register(registry)
                          .Add({});
    ready_ = &prometheus::BuildGauge()
                  .Name("ex2d_up")
                  .Help("1 while the process is ready, 0 while starting or draining")
                  .Labels(role_label)
                  .Register(registry)
                  .Add({});
    device_failures_ = &prometheus::BuildCounter()
                            .Name("ex2d_device_failures_total")
                            .Help("Frames the worker's device failed in the middle of")
                            .Labels(role_label)
                            .Register(registry)
                            .Add({});
    zap_ = &prometheus::BuildCounter()
                .Name("ex2d_zap_requests_total")
                .Help("CURVE handshakes answered by the ZAP handler: accepted or refused")
                .Labels(role_label)
                .Register(registry);
    peers_refused_ = &prometheus::BuildCounter()
                          .Name("ex2d_peers_refused_total")
                          .Help("Peers not connected for want of matching CURVE keys, by reason")
                          .Labels(role_label)
                          .Register(registry);
    storage_errors_ = &prometheus::BuildCounter()
                           .Name("ex2d_storage_errors_total")
                           .Help("Writes that failed on the output file system, by errno")
                           .Labels(role_label)
                           .Register(registry);
    storage_ok_ = &prometheus::BuildGauge()
                       .Name("ex2d_storage_ok")
                       .Help("1 while the writer's writes succeed, 0 while its storage fails")
                       .Labels(role_label)
                       .Register(registry);
    prometheus::BuildGauge()
        .Name("ex2d_build_info")
        .Help("Build of this process; the value is always 1")
        .Register(registry)
        .Add({{"version", EX2D_VERSION}})
        .Set(1);
}

std::string Metrics::serialize() const
{
    return prometheus::TextSerializer().Serialize(registry_->Collect());
}

prometheus::Counter& Metrics::frames(const std::string& state)
{
    return frames_->Add({{"state", state}});
}

prometheus::Histogram& Metrics::stage_seconds(const std::string& stage)
{
    return stage_->Add({{"stage", stage}}, kStageBuckets);
}

prometheus::Counter& Metrics::bytes(const std::string& direction)
{
    return bytes_->Add({{"direction", direction}});
}

prometheus::Counter& Metrics::messages_dropped(const std::string& reason)
{
    return dropped_->Add({{"reason", reason}});
}

prometheus::Counter& Metrics::leases(const std::string& event)
{
    return leases_->Add({{"event", event}});
}

prometheus::Gauge& Metrics::queue_depth(const std::string& lane)
{
    return queue_depth_->Add({{"lane", lane}});
}

prometheus::Counter& Metrics::zap_requests(const std::string& result)
{
    return zap_->Add({{"result", result}});
}

prometheus::Counter& Metrics::peers_refused(const std::string& reason)
{
    return peers_refused_->Add({{"reason", reason}});
}

prometheus::Counter& Metrics::storage_errors(const std::string& kind)
{
    return storage_errors_->Add({{"kind", kind}});
}

prometheus::Gauge& Metrics::storage_ok()
{
    return storage_ok_->Add({});
}

prometheus::Counter& Metrics::redis_reconnects()
{
    return *reconnects_;
}

prometheus::Gauge& Metrics::frames_in_memory()
{
    return *in_memory_;
}

prometheus::Gauge& Metrics::device_memory_bytes()
{
    return *device_memory_;
}

prometheus::Gauge& Metrics::ready()
{
    return *ready_;
}

prometheus::Counter& Metrics::device_failures()
{
    return *device_failures_;
}

}  // namespace ex2d::service
