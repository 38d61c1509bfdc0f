// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file settings.hpp
/// The configuration as typed values, read once at start. Each struct's from() is the only
/// place its keys are named (settings.cpp), so a misspelt key in a service is a compile error
/// rather than an exception in a loop, and the main loops read plain fields. The values are
/// those Config::load produced (defaults, YAML, EX2D_* variables, flags), already checked
/// against config_keys(), so from() cannot fail.
///
///   const FleetSettings& s = ctx.settings();      // redis, queue, zmq, http, service
///   const WorkerSettings w = WorkerSettings::from(ctx.config());

#include <string>

#include "ex2d/service/config.hpp"

namespace ex2d::service {

/// redis.*: where the control plane is and how to log in.
struct RedisSettings {
    std::string host;
    int port = 0;
    std::string user;           ///< ACL user; empty = default user
    std::string password;       ///< given directly (secret)
    std::string password_file;  ///< read when connecting (redis_options); empty = none
    std::string key_namespace;  ///< redis.namespace, prefix of every key
    bool allow_unsafe = false;  ///< start without AOF or with an evicting policy
    int timeout_ms = 0;

    static RedisSettings from(const Config& config);
};

/// queue.*: leases, the reaper and dead-lettering.
struct QueueSettings {
    double lease_s = 0;
    double reaper_interval_s = 0;
    int max_deliveries = 0;

    long long lease_ms() const { return (long long)(lease_s * 1000); }
    static QueueSettings from(const Config& config);
};

/// zmq.*: sockets, discovery and CURVE.
struct ZmqSettings {
    std::string bind;  ///< readers and writers; {name} is the process name
    int hwm = 0;
    int linger_ms = 0;
    long long max_message_bytes = 0;
    int heartbeat_ivl_ms = 0;
    int heartbeat_timeout_ms = 0;
    double discovery_interval_s = 0;
    double peer_timeout_s = 0;
    std::string curve_secret_key_file;  ///< set = CURVE on tcp://
    std::string curve_allowed_keys;     ///< file or folder of public keys
    bool allow_plaintext = false;
    std::string shm_dir;  ///< shared-memory slots on one node; empty = off

    static ZmqSettings from(const Config& config);
};

/// service.http_*: the /healthz, /readyz and /metrics endpoint.
struct HttpSettings {
    std::string host;
    int port = 0;  ///< 0 = any free port

    static HttpSettings from(const Config& config);
};

/// service.* other than the endpoint: the process's name, logging and lifecycle.
struct ServiceSettings {
    std::string name;  ///< empty = {role}-{host}-{pid}
    std::string log_level;
    double heartbeat_interval_s = 0;
    double heartbeat_ttl_s = 0;
    double drain_timeout_s = 0;
    long long max_frames = 0;  ///< 0 = run until stopped

    long long heartbeat_ttl_ms() const { return (long long)(heartbeat_ttl_s * 1000); }
    /// Whether a process that has finished `frames` frames is done (service.max_frames).
    bool max_frames_reached(long long frames) const
    {
        return max_frames > 0 && frames >= max_frames;
    }
    static ServiceSettings from(const Config& config);
};

/// What every fleet process reads (ServiceContext::settings(); ex2dctl reads it too).
struct FleetSettings {
    RedisSettings redis;
    QueueSettings queue;
    ZmqSettings zmq;
    HttpSettings http;
    ServiceSettings service;

    static FleetSettings from(const Config& config);
};

/// reader.*
struct ReaderSettings {
    int prefetch = 0;  ///< frames read ahead of the workers' credit
    int credit_hold_ms = 0;
    /// Where the trace-shift step runs: "reader" (the reader, before it sends the frame) or
    /// "worker" (the FRAME carries the input PSF and the worker runs it).
    std::string trace_shifts_in;
    /// How a preproc file comes into memory: "auto" (O_DIRECT where it is not in the page
    /// cache, else mapped), "mmap" or "direct".
    std::string input_read;

    static ReaderSettings from(const Config& config);
};

/// worker.*
struct WorkerSettings {
    std::string backend;  ///< cpu, cuda, auto or standin
    int threads = 0;      ///< 0 = the CPUs this process may use
    int device = 0;
    double gpu_memory_gib = 0;
    int credit = 0;
    double result_timeout_s = 0;
    std::string standin_frame;
    double standin_delay_s = 0;
    int standin_device_failure_at_batch = 0;
    /// A worker whose host and device saw this many device failures within the window takes
    /// no work (docs/operations.md, "A failing GPU").
    int max_device_failures = 0;
    double device_failure_window_s = 0;

    static WorkerSettings from(const Config& config);
};

/// writer.*
struct WriterSettings {
    bool fsync = true;
    int credit = 0;
    int write_threads = 0;
    double sweep_interval_s = 0;
    /// While the output storage fails: the first wait before a retry, doubling up to the max.
    double storage_retry_s = 0;
    double storage_retry_max_s = 0;
    std::string fibermap_columns;  ///< JSON table of FIBERMAP units and descriptions; "" = built-in

    static WriterSettings from(const Config& config);
};

}  // namespace ex2d::service
