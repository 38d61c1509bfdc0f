// SPDX-License-Identifier: BSD-3-Clause
// The one place where the services name configuration keys; config_keys.cpp declares them.
// tests/service/test_settings.cpp checks that every declared key is read here.
#include "ex2d/service/settings.hpp"

namespace ex2d::service {

RedisSettings RedisSettings::from(const Config& config)
{
    RedisSettings s;
    s.host = config.get_string("redis.host");
    s.port = int(config.get_int("redis.port"));
    s.user = config.get_string("redis.user");
    s.password = config.get_string("redis.password");
    s.password_file = config.get_string("redis.password_file");
    s.key_namespace = config.get_string("redis.namespace");
    s.allow_unsafe = config.get_bool("redis.allow_unsafe");
    s.timeout_ms = int(config.get_int("redis.timeout_ms"));
    return s;
}

QueueSettings QueueSettings::from(const Config& config)
{
    QueueSettings s;
    s.lease_s = config.get_double("queue.lease_s");
    s.reaper_interval_s = config.get_double("queue.reaper_interval_s");
    s.max_deliveries = int(config.get_int("queue.max_deliveries"));
    return s;
}

ZmqSettings ZmqSettings::from(const Config& config)
{
    ZmqSettings s;
    s.bind = config.get_string("zmq.bind");
    s.hwm = int(config.get_int("zmq.hwm"));
    s.linger_ms = int(config.get_int("zmq.linger_ms"));
    s.max_message_bytes = config.get_int("zmq.max_message_bytes");
    s.heartbeat_ivl_ms = int(config.get_int("zmq.heartbeat_ivl_ms"));
    s.heartbeat_timeout_ms = int(config.get_int("zmq.heartbeat_timeout_ms"));
    s.discovery_interval_s = config.get_double("zmq.discovery_interval_s");
    s.peer_timeout_s = config.get_double("zmq.peer_timeout_s");
    s.curve_secret_key_file = config.get_string("zmq.curve_secret_key_file");
    s.curve_allowed_keys = config.get_string("zmq.curve_allowed_keys");
    s.allow_plaintext = config.get_bool("zmq.allow_plaintext");
    s.shm_dir = config.get_string("zmq.shm_dir");
    return s;
}

HttpSettings HttpSettings::from(const Config& config)
{
    HttpSettings s;
    s.host = config.get_string("service.http_host");
    s.port = int(config.get_int("service.http_port"));
    return s;
}

ServiceSettings ServiceSettings::from(const Config& config)
{
    ServiceSettings s;
    s.name = config.get_string("service.name");
    s.log_level = config.get_string("service.log_level");
    s.heartbeat_interval_s = config.get_double("service.heartbeat_interval_s");
    s.heartbeat_ttl_s = config.get_double("service.heartbeat_ttl_s");
    s.drain_timeout_s = config.get_double("service.drain_timeout_s");
    s.max_frames = config.get_int("service.max_frames");
    return s;
}

FleetSettings FleetSettings::from(const Config& config)
{
    return {RedisSettings::from(config), QueueSettings::from(config), ZmqSettings::from(config),
            HttpSettings::from(config), ServiceSettings::from(config)};
}

ReaderSettings ReaderSettings::from(const Config& config)
{
    ReaderSettings s;
    s.prefetch = int(config.get_int("reader.prefetch"));
    s.credit_hold_ms = int(config.get_int("reader.credit_hold_ms"));
    s.trace_shifts_in = config.get_string("reader.trace_shifts_in");
    s.input_read = config.get_string("reader.input_read");
    return s;
}

WorkerSettings WorkerSettings::from(const Config& config)
{
    WorkerSettings s;
    s.backend = config.get_string("worker.backend");
    s.threads = int(config.get_int("worker.threads"));
    s.device = int(config.get_int("worker.device"));
    s.gpu_memory_gib = config.get_double("worker.gpu_memory_gib");
    s.credit = int(config.get_int("worker.credit"));
    s.result_timeout_s = config.get_double("worker.result_timeout_s");
    s.standin_frame = config.get_string("worker.standin_frame");
    s.standin_delay_s = config.get_double("worker.standin_delay_s");
    s.standin_device_failure_at_batch =
        int(config.get_int("worker.standin_device_failure_at_batch"));
    s.max_device_failures = int(config.get_int("worker.max_device_failures"));
    s.device_failure_window_s = config.get_double("worker.device_failure_window_s");
    return s;
}

WriterSettings WriterSettings::from(const Config& config)
{
    WriterSettings s;
    s.fsync = config.get_bool("writer.fsync");
    s.credit = int(config.get_int("writer.credit"));
    s.write_threads = int(config.get_int("writer.write_threads"));
    s.sweep_interval_s = config.get_double("writer.sweep_interval_s");
    s.storage_retry_s = config.get_double("writer.storage_retry_s");
    s.storage_retry_max_s = config.get_double("writer.storage_retry_max_s");
    s.fibermap_columns = config.get_string("writer.fibermap_columns");
    return s;
}

}  // namespace ex2d::service
