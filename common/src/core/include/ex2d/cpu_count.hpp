// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file cpu_count.hpp
/// How many worker threads a batch job should run: the CPUs it may actually use, which on a
/// cluster node is set by the CPU affinity mask (Slurm, taskset) and the cgroup CPU quota
/// (containers), not by the machine's core count.

#include <optional>
#include <string>

namespace ex2d {

/// CPUs allowed by a cgroup v2 cpu.max text ("max 100000" or "QUOTA PERIOD"); nullopt for
/// "max" (no limit) or text that cannot be parsed.
std::optional<double> parse_cgroup_v2_cpu_max(const std::string& text);

/// CPUs allowed by cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us texts; nullopt for a
/// quota of -1 (no limit) or texts that cannot be parsed.
std::optional<double> parse_cgroup_v1_quota(const std::string& quota_text,
                                            const std::string& period_text);

/// min(affinity CPUs, ceil(quota)), at least 1; `affinity_cpus` <= 0 means unknown.
int threads_for(int affinity_cpus, std::optional<double> quota_cpus);

/// threads_for() of this process: sched_getaffinity and the cgroup quota under `cgroup_root`
/// (v2 cpu.max first, else v1 cpu/cpu.cfs_*), falling back to the machine's core count.
int default_thread_count(const std::string& cgroup_root = "/sys/fs/cgroup");

/// A configured thread count: `configured` where it is > 0, else default_thread_count().
/// Every place that turns "0 threads" into a number (ex2d's --threads, worker.threads, the
/// CPU backend) goes through it, so a worker in a container runs as many threads as
/// `ex2d extract` would there.
int resolve_thread_count(int configured);

}  // namespace ex2d
