// SPDX-License-Identifier: BSD-3-Clause
#include "fleet_sim.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace ex2d::bench {

using service::ControlPlane;
using service::Fence;
using service::Job;

namespace {

const char* const kArms = "brz";

// desi_proc's wavelength grid of each arm, so that the options field has its real length.
const char* options_for_arm(char arm)
{
    if (arm == 'b') return R"({"wavelength":"3600.0,5800.0,0.8","psferr":0.01,"nspec":500})";
    if (arm == 'r') return R"({"wavelength":"5760.0,7620.0,0.8","psferr":0.01,"nspec":500})";
    return R"({"wavelength":"7520.0,9824.0,0.8","psferr":0.01,"nspec":500})";
}

std::string hex16(std::uint64_t x)
{
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)x);
    return buf;
}

// The reader's next_job(): the lane streams in priority order, the first one with a job wins.
// For a campaign job that is SMEMBERS, an empty XREADGROUP on the nightly stream, then the
// campaign's XREADGROUP and the take script, as in the real fleet.
Result<std::optional<Job>> take_like_reader(ControlPlane& plane, const service::Actor& reader)
{
    EX2D_ASSIGN_OR_RETURN(std::vector<std::string> streams, plane.lane_streams());
    for (const auto& stream : streams) {
        EX2D_ASSIGN_OR_RETURN(std::optional<Job> job, plane.take_new(stream, reader));
        if (job) return job;
    }
    return std::optional<Job>();
}

long long since_us(Clock::time_point t0)
{
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

}  // namespace

Job make_job(long long index, const std::string& lane, const std::string& campaign,
             const std::string& stream)
{
    const long long exposure = index / kCameras;
    const int cam = int(index % kCameras);
    char expid[32], night[32];
    std::snprintf(expid, sizeof expid, "%08lld", kExpidBase + exposure);
    // About 30 exposures a night, nights on a simple 12 x 28-day calendar: only the lengths
    // and the grouping matter here.
    const long long day = exposure / 30;
    std::snprintf(night, sizeof night, "%04lld%02lld%02lld", 2026 + day / 336, 1 + (day / 28) % 12,
                  1 + day % 28);
    Job j;
    j.camera = std::string(1, kArms[cam / 10]) + char('0' + cam % 10);
    j.lane = lane;
    j.campaign = campaign;
    j.expid = expid;
    j.night = night;
    j.job = campaign + "/" + j.expid + "/" + j.camera;
    const std::string specprod = lane == "nightly" ? std::string("daily") : campaign;
    const std::string root = "/global/cfs/cdirs/desi/spectro/redux/" + specprod;
    const std::string tail = j.camera + "-" + j.expid;
    j.preproc = root + "/preproc/" + j.night + "/" + j.expid + "/preproc-" + tail + ".fits.gz";
    j.psf = root + "/exposures/" + j.night + "/" + j.expid + "/psf-" + tail + ".fits";
    j.output = root + "/exposures/" + j.night + "/" + j.expid + "/frame-" + tail + ".fits.gz";
    j.options = options_for_arm(j.camera[0]);
    j.stream = stream;
    return j;
}

long long job_index(const Job& job)
{
    if (job.camera.size() != 2 || job.expid.size() != 8) return -1;
    const char* arm = std::strchr(kArms, job.camera[0]);
    if (!arm || *arm == '\0' || job.camera[1] < '0' || job.camera[1] > '9') return -1;
    const long long exposure = std::atoll(job.expid.c_str()) - kExpidBase;
    return exposure * kCameras + (arm - kArms) * 10 + (job.camera[1] - '0');
}

Fleet::Fleet(const BenchOptions& options, const service::RedisOptions& redis, std::string ns,
             std::string stream)
    : options_(options),
      redis_(redis),
      ns_(std::move(ns)),
      stream_(std::move(stream)),
      pid_(int(::getpid())),
      finishes_(new std::atomic<int>[std::size_t(options.jobs)])
{
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    host_ = host;
    for (long long i = 0; i < options_.jobs; ++i) finishes_[std::size_t(i)] = 0;
    t0 = Clock::now();
}

std::optional<Job> Fleet::next_redelivered()
{
    std::lock_guard<std::mutex> lock(mutex_);
    if (redeliver_.empty()) return std::nullopt;
    Job job = std::move(redeliver_.front());
    redeliver_.pop_front();
    return job;
}

void Fleet::run_worker(int number, OpTimes& times)
{
    service::RedisClient redis(redis_);
    ControlPlane plane(redis, ns_);
    const service::Actor reader{"bench-reader-" + std::to_string(number), host_, pid_};
    // An idle worker backs off, so that the tail (jobs waiting for the reaper) does not turn
    // into a storm of empty polls that would be counted against the control plane.
    int idle_ms = 2;
    while (!stop) {
        std::optional<Job> job = next_redelivered();
        if (!job) {
            const auto start = Clock::now();
            auto taken = take_like_reader(plane, reader);
            if (!taken.is_ok()) {
                ++errors;
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                continue;
            }
            if (!taken.value()) {
                times.add(op_take_empty, start);
                ++empty_polls;
                std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
                idle_ms = std::min(idle_ms * 2, 200);
                continue;
            }
            times.add(op_take, start);
            idle_ms = 2;
            job = std::move(taken.value());
        }
        process(plane, std::move(*job), number, times);
    }
}

void Fleet::process(ControlPlane& plane, Job job, int number, OpTimes& times)
{
    const long long index = job_index(job);
    if (index < 0 || index >= options_.jobs) {
        ++errors;
        return;
    }
    const service::Actor worker{"bench-worker-" + std::to_string(number), host_, pid_};
    const service::Actor writer{"bench-writer-" + std::to_string(number), host_, pid_};
    // Only a first delivery dies, so that the re-delivered copy completes; where the holder
    // dies cycles through the three states a frame can be held in.
    const bool dies =
        job.epoch == 1 && double(mix(std::uint64_t(index)) % 1000000) < options_.die_fraction * 1e6;
    const int dies_after = int(mix(std::uint64_t(index) + 1) % 3);
    auto drop = [&] {
        ++died;
        std::lock_guard<std::mutex> lock(mutex_);
        zombies_.push_back(job);
    };
    auto step = [&](int op, auto&& call) {
        const auto start = Clock::now();
        Result<Fence> fence = call();
        times.add(op, start);
        if (!fence.is_ok())
            ++errors;
        else if (fence.value() != Fence::applied)
            ++fence_refused;
        return fence.is_ok() && fence.value() == Fence::applied;
    };
    if (dies && dies_after == 0) return drop();
    if (!step(op_advance, [&] { return plane.advance(job, "extracting", worker); })) return;
    if (options_.work_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.work_ms));
    }
    if (dies && dies_after == 1) return drop();
    if (!step(op_advance, [&] { return plane.advance(job, "writing", writer); })) return;
    if (dies && dies_after == 2) return drop();
    if (!step(op_renew, [&] { return plane.renew(job); })) return;
    const auto key = std::uint64_t(index);
    const std::string checksum = hex16(mix(key)) + hex16(mix(~key));
    const long long bytes = 31457280 + index % 4096;
    if (!step(op_finish, [&] { return plane.finish(job, checksum, bytes, writer); })) return;
    record_finish(index);
}

void Fleet::record_finish(long long index)
{
    if (finishes_[std::size_t(index)].fetch_add(1) != 0) {
        ++duplicates;
        return;
    }
    const long long n = ++finished;
    const long long us = since_us(t0);
    if (n == 1) t_first_us = us;
    if (n == std::max(1LL, options_.jobs / 10)) t_10_us = us;
    if (n == std::max(1LL, options_.jobs * 9 / 10)) t_90_us = us;
    if (n == options_.jobs) {
        t_last_us = us;
        stop = true;
    }
}

void Fleet::run_reaper(OpTimes& times)
{
    service::RedisClient redis(redis_);
    ControlPlane plane(redis, ns_);
    const service::Actor me{"bench-reaper", host_, pid_};
    while (!stop) {
        for (int slept = 0; slept < options_.reap_interval_ms && !stop; slept += 50) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const auto start = Clock::now();
        std::vector<Job> dead;
        auto jobs = plane.reap(stream_, me, options_.lease_ms, options_.max_deliveries, dead);
        times.add(op_reap, start);
        if (!jobs.is_ok()) {
            ++errors;
            continue;
        }
        dead_lettered += (long long)dead.size();
        redelivered += (long long)jobs.value().size();
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& job : jobs.value()) redeliver_.push_back(std::move(job));
    }
}

long long Fleet::finish_as_zombies()
{
    service::RedisClient redis(redis_);
    ControlPlane plane(redis, ns_);
    const service::Actor ghost{"bench-zombie", host_, pid_};
    long long accepted = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Job& job : zombies_) {
        // A job nobody else finished (a run cut short) still belongs to its old epoch.
        if (finishes_[std::size_t(job_index(job))] == 0) continue;
        auto fence = plane.finish(job, "stale", 0, ghost);
        if (fence.is_ok() && fence.value() == Fence::applied) ++accepted;
    }
    return accepted;
}

}  // namespace ex2d::bench
