// SPDX-License-Identifier: BSD-3-Clause
// Every configuration key of the fleet, declared once. config/ex2d.yaml lists the same keys
// with the same defaults and comments (tests/service/test_config.cpp checks that).
#include "ex2d/service/config.hpp"

namespace ex2d::service {
namespace {

constexpr double kMaxPort = 65535;

ConfigKey key(std::string name, ConfigType type, std::string default_value, std::string help,
              double min = -1e300, double max = 1e300)
{
    ConfigKey k;
    k.name = std::move(name);
    k.type = type;
    k.default_value = std::move(default_value);
    k.help = std::move(help);
    k.min = min;
    k.max = max;
    return k;
}

ConfigKey string_key(std::string name, std::string default_value, std::string help)
{
    return key(std::move(name), ConfigType::string, std::move(default_value), std::move(help));
}

ConfigKey choice_key(std::string name, std::string default_value, std::string help,
                     std::vector<std::string> choices)
{
    ConfigKey k = string_key(std::move(name), std::move(default_value), std::move(help));
    k.choices = std::move(choices);
    return k;
}

ConfigKey secret_key(std::string name, std::string help)
{
    ConfigKey k = string_key(std::move(name), "", std::move(help));
    k.secret = true;
    return k;
}

ConfigKey int_key(std::string name, std::string default_value, std::string help, double min,
                  double max = 1e18)
{
    return key(std::move(name), ConfigType::integer, std::move(default_value), std::move(help), min,
               max);
}

ConfigKey number_key(std::string name, std::string default_value, std::string help, double min,
                     double max = 1e9)
{
    return key(std::move(name), ConfigType::number, std::move(default_value), std::move(help), min,
               max);
}

ConfigKey bool_key(std::string name, std::string default_value, std::string help)
{
    return key(std::move(name), ConfigType::boolean, std::move(default_value), std::move(help));
}

std::vector<ConfigKey> make_keys()
{
    return {
        string_key("redis.host", "127.0.0.1", "Redis host"),
        int_key("redis.port", "6379", "Redis TCP port", 1, kMaxPort),
        string_key("redis.password_file", "",
                   "file holding the Redis password for this role's ACL user; empty = no AUTH"),
        secret_key("redis.password",
                   "Redis password given directly (discouraged: prefer password_file)"),
        string_key("redis.user", "", "Redis ACL user name; empty = default user"),
        string_key("redis.namespace", "ex2d", "prefix of every key (docs/redis-schema.md)"),
        bool_key("redis.allow_unsafe", "false",
                 "start even when Redis has no AOF or may evict keys"),
        int_key("redis.timeout_ms", "5000", "socket timeout of Redis commands", 1, 3600000),

        number_key("queue.lease_s", "120", "a job's lease; its holder renews it every lease/3", 1,
                   86400),
        number_key("queue.reaper_interval_s", "10",
                   "how often expired leases are looked for and reclaimed", 0.1, 3600),
        int_key("queue.max_deliveries", "5", "deliveries before a job is dead-lettered", 1, 1000),

        string_key("zmq.bind", "tcp://127.0.0.1:*",
                   "where readers and writers bind (ipc:// on one node, tcp:// between nodes; "
                   "* = any free port)"),
        int_key("zmq.hwm", "2", "send high-water mark of the fleet's sockets, in messages", 1,
                1000000),
        int_key("zmq.linger_ms", "1000",
                "how long a worker's close waits for its last result to leave (readers and "
                "writers close at once)",
                0, 2000),
        int_key("zmq.max_message_bytes", "1073741824",
                "largest message part accepted (ZMQ_MAXMSGSIZE)", 1, 1e18),
        int_key("zmq.heartbeat_ivl_ms", "1000", "ZMTP heartbeat interval", 1, 3600000),
        int_key("zmq.heartbeat_timeout_ms", "3000", "a peer silent for this long is disconnected",
                1, 3600000),
        number_key("zmq.discovery_interval_s", "1", "how often peers are looked up in Redis", 0.01,
                   3600),
        number_key("zmq.peer_timeout_s", "10",
                   "a peer with no traffic for this long is dropped and its credit returned", 0.1,
                   86400),
        string_key("zmq.curve_secret_key_file", "",
                   "this process's CURVE secret key file (ex2dctl keygen); set = CURVE on tcp://"),
        string_key("zmq.curve_allowed_keys", "",
                   "file or folder of CURVE public keys: workers admitted by readers and "
                   "writers, servers trusted by workers"),
        bool_key("zmq.allow_plaintext", "false",
                 "allow tcp:// without CURVE beyond loopback (isolated networks only)"),
        string_key("zmq.shm_dir", "/dev/shm",
                   "folder of the shared-memory slots that carry frames and results between "
                   "processes of one node; empty = always over the socket"),

        string_key("service.name", "",
                   "process name in Redis and logs; empty = {role}-{host}-{pid}"),
        string_key("service.http_host", "127.0.0.1",
                   "/healthz /readyz /metrics bind address (0.0.0.0 in pods)"),
        int_key("service.http_port", "0", "HTTP port; 0 = any free port (advertised in Redis)", 0,
                kMaxPort),
        choice_key("service.log_level", "info", "trace, debug, info, warning, error or critical",
                   {"trace", "debug", "info", "warning", "warn", "error", "critical"}),
        number_key("service.heartbeat_interval_s", "5",
                   "how often the process refreshes its registration in Redis", 0.1, 3600),
        number_key("service.heartbeat_ttl_s", "15",
                   "registration expires this long after the last heartbeat", 0.1, 86400),
        number_key("service.drain_timeout_s", "25",
                   "time allowed to finish in-flight work after SIGTERM (< 30 s grace)", 0, 3600),
        int_key("service.max_frames", "0", "exit after this many frames (0 = run until stopped)",
                0),

        int_key("reader.prefetch", "1", "frames read ahead of the workers' credit", 0, 1000),
        int_key("reader.credit_hold_ms", "500",
                "how long a worker's credit waits for a frame before no_work is sent", 0, 3600000),
        choice_key("reader.input_read", "auto",
                   "how a preproc file is read: auto (O_DIRECT where it is not in the page cache, "
                   "else mapped), mmap or direct",
                   {"auto", "mmap", "direct"}),
        choice_key("reader.trace_shifts_in", "reader",
                   "where each frame's trace shifts are measured: reader (on the planes it reads) "
                   "or worker (on its host side, while its device extracts the frame before)",
                   {"reader", "worker"}),

        choice_key("worker.backend", "cpu",
                   "extraction backend: cpu, cuda or auto (standin: test builds only)",
                   {"cpu", "cuda", "auto", "standin"}),
        int_key("worker.threads", "0",
                "CPU threads, 0 = the CPUs this process may use (affinity, cgroup quota)", 0, 4096),
        int_key("worker.device", "0", "CUDA device index", 0, 1024),
        number_key("worker.gpu_memory_gib", "3", "device memory budget of one worker, GiB", 0,
                   4096),
        int_key("worker.credit", "2", "frames a worker asks for ahead of the one in hand", 1, 1000),
        number_key("worker.result_timeout_s", "120",
                   "an extracted frame no writer takes within this long is handed back", 1, 86400),
        string_key("worker.standin_frame", "",
                   "frame file (from ex2d extract) the standin backend returns"),
        number_key("worker.standin_delay_s", "0.5",
                   "seconds the standin backend sleeps per frame, as a GPU would extract it", 0,
                   3600),
        int_key("worker.standin_device_failure_at_batch", "0",
                "the standin backend's Nth batch fails as a device would, 0 = never (tests)", 0,
                1000000),
        int_key("worker.max_device_failures", "3",
                "device failures on this host and device within the window after which a "
                "worker takes no work",
                1, 1000),
        number_key("worker.device_failure_window_s", "3600",
                   "how long a device failure counts against the device", 1, 30 * 86400),

        bool_key("writer.fsync", "true", "fsync files and directories before acknowledging"),
        int_key("writer.credit", "1", "results a writer grants ahead of the ones it writes", 1,
                1000),
        int_key("writer.write_threads", "1",
                "threads that decode and write results, each holding one beyond the credit", 1, 64),
        number_key("writer.sweep_interval_s", "10",
                   "how often temporary files of writers that are gone are removed", 0.1, 86400),
        number_key("writer.storage_retry_s", "1",
                   "first wait before a write that failed on the output storage is tried again",
                   0.01, 3600),
        number_key("writer.storage_retry_max_s", "30",
                   "longest wait between tries while the output storage fails (doubling)", 0.01,
                   86400),
        string_key("writer.fibermap_columns", "",
                   "JSON table of FIBERMAP units and descriptions (python3 -m "
                   "ex2d_desi.fibermap_columns exports desispec's); empty: ex2d's own"),
    };
}

}  // namespace

const std::vector<ConfigKey>& config_keys()
{
    static const std::vector<ConfigKey> keys = make_keys();
    return keys;
}

}  // namespace ex2d::service
