// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/cpu_count.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace ex2d {

namespace {

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

/// A whole-text integer (surrounding white space allowed), else nullopt.
std::optional<long long> parse_integer(const std::string& text)
{
    std::istringstream in(text);
    long long value = 0;
    std::string rest;
    if (!(in >> value) || (in >> rest)) return std::nullopt;
    return value;
}

}  // namespace

std::optional<double> parse_cgroup_v2_cpu_max(const std::string& text)
{
    std::istringstream in(text);
    std::string quota;
    long long period = 0;
    std::string rest;
    if (!(in >> quota >> period) || (in >> rest) || period <= 0 || quota == "max") {
        return std::nullopt;
    }
    const auto q = parse_integer(quota);
    if (!q || *q <= 0) return std::nullopt;
    return double(*q) / double(period);
}

std::optional<double> parse_cgroup_v1_quota(const std::string& quota_text,
                                            const std::string& period_text)
{
    const auto quota = parse_integer(quota_text);
    const auto period = parse_integer(period_text);
    if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
    return double(*quota) / double(*period);
}

int threads_for(int affinity_cpus, std::optional<double> quota_cpus)
{
    int n = affinity_cpus > 0 ? affinity_cpus : int(std::thread::hardware_concurrency());
    // A quota of 1.5 CPUs still lets two threads make progress; rounding down would leave
    // half a CPU idle.
    if (quota_cpus && *quota_cpus > 0) n = std::min(n, int(std::ceil(*quota_cpus)));
    return std::max(n, 1);
}

int default_thread_count(const std::string& cgroup_root)
{
    int affinity = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) affinity = CPU_COUNT(&set);
    std::optional<double> quota = parse_cgroup_v2_cpu_max(read_text(cgroup_root + "/cpu.max"));
    if (!quota) {
        quota = parse_cgroup_v1_quota(read_text(cgroup_root + "/cpu/cpu.cfs_quota_us"),
                                      read_text(cgroup_root + "/cpu/cpu.cfs_period_us"));
    }
    return threads_for(affinity, quota);
}

int resolve_thread_count(int configured)
{
    return configured > 0 ? configured : default_thread_count();
}

}  // namespace ex2d
