// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fleet_sim.hpp
/// The simulated fleet of ex2d-queue-bench: jobs that look like real frames, workers that make
/// a frame's whole sequence of control-plane calls around a no-op extraction, a reaper.

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "ex2d/service/control_plane.hpp"

namespace ex2d::bench {

struct BenchOptions {
    long long jobs = 100000;
    int workers = 300;
    int submitters = 8;
    double die_fraction = 0.001;  ///< of jobs whose first holder drops them
    long long lease_ms = 2000;
    int reap_interval_ms = 500;
    int max_deliveries = 5;
    int work_ms = 0;  ///< the no-op extraction's sleep
    std::string lane = "campaign";
    double progress_s = 5;
    double max_seconds = 1800;  ///< gives up (and reports the jobs lost) past this
};

constexpr int kCameras = 30;
constexpr long long kExpidBase = 300000;

/// Job number `index` of the benchmark: exposure index / 30, camera index % 30 (b0..z9).
service::Job make_job(long long index, const std::string& lane, const std::string& campaign,
                      const std::string& stream);
/// The inverse of make_job, from the job's expid and camera; -1 when it is not one of ours.
long long job_index(const service::Job& job);

/// State shared by the simulated processes of one run.
class Fleet {
public:
    Fleet(const BenchOptions& options, const service::RedisOptions& redis, std::string ns,
          std::string stream);

    /// One simulated reader + worker + writer chain, on its own connection, until stop.
    void run_worker(int number, OpTimes& times);
    /// Reaps expired leases every reap_interval_ms and hands the jobs to the workers.
    void run_reaper(OpTimes& times);
    /// Tries to finish every dropped job that was re-delivered and finished, with the epoch its
    /// dead holder had; returns how many the control plane accepted (each a fencing failure).
    long long finish_as_zombies();

    std::atomic<bool> stop{false};
    std::atomic<long long> finished{0};     ///< distinct jobs finished
    std::atomic<long long> duplicates{0};   ///< finishes applied to a job already finished
    std::atomic<long long> redelivered{0};  ///< jobs handed out again by the reaper
    std::atomic<long long> died{0};         ///< jobs dropped by a "dying" holder
    std::atomic<long long> dead_lettered{0};
    std::atomic<long long> fence_refused{0};  ///< live holders refused (lease lost)
    std::atomic<long long> empty_polls{0};
    std::atomic<long long> errors{0};
    std::atomic<long long> t_first_us{-1}, t_10_us{-1}, t_90_us{-1}, t_last_us{-1};
    Clock::time_point t0;

private:
    std::optional<service::Job> next_redelivered();
    void process(service::ControlPlane& plane, service::Job job, int number, OpTimes& times);
    void record_finish(long long index);

    BenchOptions options_;
    service::RedisOptions redis_;
    std::string ns_, stream_, host_;
    int pid_ = 0;
    std::unique_ptr<std::atomic<int>[]> finishes_;  ///< applied finishes per job
    std::mutex mutex_;
    std::deque<service::Job> redeliver_;
    std::vector<service::Job> zombies_;  ///< dropped jobs, with their old epoch
};

}  // namespace ex2d::bench
