// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file bench_support.hpp
/// Pieces of ex2d-queue-bench that are not the simulated fleet: a throw-away redis-server,
/// INFO snapshots (CPU, memory, per-command calls) and per-operation latency records.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace ex2d::bench {

using Clock = std::chrono::steady_clock;

/// A redis-server on a free loopback port in a temporary folder, with the production settings
/// (AOF fsync every second, noeviction, no RDB snapshots). Stopped and removed by the destructor.
class LocalRedis {
public:
    LocalRedis() = default;
    ~LocalRedis() { stop(); }
    LocalRedis(const LocalRedis&) = delete;
    LocalRedis& operator=(const LocalRedis&) = delete;

    /// `config`: extra "name=value" settings for the server.
    Status start(const std::string& server_binary, const std::vector<std::string>& config);
    void stop();
    int port() const { return port_; }
    const std::string& dir() const { return dir_; }

private:
    pid_t pid_ = -1;
    int port_ = 0;
    std::string dir_;
};

/// What the server says about itself at one moment.
struct Snapshot {
    double cpu_all = 0;   ///< used_cpu_sys + used_cpu_user (all threads of the process)
    double cpu_main = 0;  ///< the same for the main thread, the one that saturates
    double cpu_main_user = 0;
    double cpu_children = 0;  ///< forked children (AOF rewrites)
    long long used_memory = 0;
    long long aof_size = 0;
    long long aof_rewrites = 0;
    bool aof_rewriting = false;
    /// cmdstat_* name -> {calls, usec}; calls made inside scripts are counted too.
    std::map<std::string, std::pair<long long, long long>> commands;

    /// Calls of the commands that clients send themselves (never from inside a script).
    long long client_calls() const;
    long long all_calls() const;
    static bool is_client_command(const std::string& cmdstat_name);
};

Result<Snapshot> snapshot(service::RedisClient& redis);

/// Bytes appended to the AOF per job. aof_current_size drops at every rewrite (the production
/// settings keep auto-rewrite on), so only intervals between samples without a rewrite count.
class AofMeter {
public:
    void sample(const Snapshot& s, long long jobs_done);
    double bytes_per_job() const { return jobs_ > 0 ? double(bytes_) / double(jobs_) : 0.0; }

private:
    bool have_ = false;
    Snapshot last_;
    long long last_jobs_ = 0, bytes_ = 0, jobs_ = 0;
};

/// The operations whose latency is recorded.
enum Op { op_submit, op_take, op_take_empty, op_advance, op_renew, op_finish, op_reap, op_count };
const char* op_name(int op);

/// One thread's latencies in microseconds, merged after the threads are joined.
struct OpTimes {
    std::array<std::vector<std::uint32_t>, op_count> us;

    void add(int op, Clock::time_point start);
    void merge(const OpTimes& other);
};

/// The q-quantile (0..1) in milliseconds; sorts `values`.
double quantile_ms(std::vector<std::uint32_t>& values, double q);

/// A short deterministic hash (splitmix64), for choosing which jobs die and fake checksums.
std::uint64_t mix(std::uint64_t x);

}  // namespace ex2d::bench
