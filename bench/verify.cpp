// SPDX-License-Identifier: BSD-3-Clause
#include "verify.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "ex2d/service/control_plane.hpp"
#include "fleet_sim.hpp"

namespace ex2d::bench {

using service::RedisClient;
using service::RedisValue;

namespace {

long long memory_usage(RedisClient& redis, const std::string& key)
{
    // SAMPLES 0 walks the whole value; for a stream of 100,000 entries that is still quick.
    auto v = redis.command({"MEMORY", "USAGE", key, "SAMPLES", "0"});
    return v.is_ok() ? v.value().as_int(0) : 0;
}

long long integer_reply(RedisClient& redis, const std::vector<std::string>& args)
{
    auto v = redis.command(args);
    return v.is_ok() ? v.value().as_int(0) : 0;
}

// Frames [begin, end) of the run, one HMGET each.
Status check_frames(const service::RedisOptions& options, const std::string& ns,
                    const std::string& lane, const std::string& campaign, long long begin,
                    long long end, std::atomic<long long>& not_done, std::atomic<long long>& later)
{
    RedisClient redis(options);
    service::ControlPlane plane(redis, ns);
    for (long long i = begin; i < end; ++i) {
        const service::Job job = make_job(i, lane, campaign, "");
        const std::string key = plane.frame_key(campaign, job.expid, job.camera);
        EX2D_ASSIGN_OR_RETURN(RedisValue v, redis.command({"HMGET", key, "state", "attempt"}));
        if (v.elements.size() != 2 || v.elements[0].str != "done") {
            ++not_done;
            continue;
        }
        if (v.elements[1].as_int(0) > 1) ++later;
    }
    return Status::ok();
}

}  // namespace

Result<Verification> verify(const service::RedisOptions& options, const std::string& ns,
                            const std::string& stream, const std::string& lane,
                            const std::string& campaign, long long jobs, int threads)
{
    Verification out;
    std::atomic<long long> not_done{0}, later{0}, failed_threads{0};
    std::vector<std::thread> pool;
    const long long share = (jobs + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
        const long long begin = t * share, end = std::min(jobs, begin + share);
        if (begin >= end) break;
        pool.emplace_back([&, begin, end] {
            if (!check_frames(options, ns, lane, campaign, begin, end, not_done, later).is_ok()) {
                ++failed_threads;
            }
        });
    }
    for (auto& t : pool) t.join();
    if (failed_threads > 0) return Status::io("redis: frame checks could not read every frame");
    out.frames_not_done = not_done;
    out.frames_later_attempt = later;

    RedisClient redis(options);
    service::ControlPlane plane(redis, ns);
    out.exposures = (jobs + kCameras - 1) / kCameras;
    for (long long e = 0; e < out.exposures; ++e) {
        const service::Job first = make_job(e * kCameras, lane, campaign, "");
        EX2D_ASSIGN_OR_RETURN(RedisValue v,
                              redis.command({"HMGET", plane.exposure_key(campaign, first.expid),
                                             "state", "nframes", "n_done", "n_queued", "n_reading",
                                             "n_extracting", "n_writing", "n_failed", "n_dead"}));
        const long long nframes = std::min<long long>(kCameras, jobs - e * kCameras);
        bool ok = v.elements.size() == 9 && v.elements[0].str == "done" &&
                  v.elements[1].as_int(-1) == nframes && v.elements[2].as_int(-1) == nframes;
        for (std::size_t k = 3; ok && k < v.elements.size(); ++k) ok = v.elements[k].as_int(0) == 0;
        if (!ok) ++out.exposures_not_done;
    }

    EX2D_ASSIGN_OR_RETURN(RedisValue p, redis.command({"XPENDING", stream, service::kReaderGroup}));
    out.pending = p.elements.empty() ? -1 : p.elements[0].as_int(-1);
    out.stream_length = integer_reply(redis, {"XLEN", stream});
    out.events_length = integer_reply(redis, {"XLEN", plane.key("events")});
    out.stream_bytes = memory_usage(redis, stream);
    out.events_bytes = memory_usage(redis, plane.key("events"));

    // Hashes are all alike, so a sample of 200 spread over the run gives the mean.
    const long long samples = std::min<long long>(200, jobs);
    long long frame_total = 0, exposure_total = 0;
    for (long long s = 0; s < samples; ++s) {
        const service::Job job = make_job(s * jobs / samples, lane, campaign, "");
        frame_total += memory_usage(redis, plane.frame_key(campaign, job.expid, job.camera));
        exposure_total += memory_usage(redis, plane.exposure_key(campaign, job.expid));
    }
    out.frame_bytes = double(frame_total) / double(samples);
    out.exposure_bytes = double(exposure_total) / double(samples);
    const service::Job job = make_job(0, lane, campaign, "");
    const std::string key = plane.frame_key(campaign, job.expid, job.camera);
    auto enc = redis.command({"OBJECT", "ENCODING", key});
    if (enc.is_ok()) out.frame_encoding = enc.value().str;
    return out;
}

Status delete_namespace(RedisClient& redis, const std::string& ns)
{
    std::string cursor = "0";
    do {
        EX2D_ASSIGN_OR_RETURN(RedisValue v,
                              redis.command({"SCAN", cursor, "MATCH", ns + ":*", "COUNT", "1000"}));
        if (v.is_error() || v.elements.size() != 2) return Status::io("redis SCAN: " + v.str);
        cursor = v.elements[0].str;
        std::vector<std::string> unlink = {"UNLINK"};
        for (const auto& k : v.elements[1].elements) unlink.push_back(k.str);
        if (unlink.size() > 1) EX2D_RETURN_NOT_OK(redis.command(unlink).status());
    } while (cursor != "0");
    return Status::ok();
}

}  // namespace ex2d::bench
