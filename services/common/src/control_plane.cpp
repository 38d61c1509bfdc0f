// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/control_plane.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "control_plane_scripts.hpp"

namespace ex2d::service {

long long unix_ms()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

const char* to_string(Fence fence)
{
    switch (fence) {
        case Fence::applied:
            return "applied";
        case Fence::stale:
            return "stale_epoch";
        case Fence::gone:
            return "not_pending";
    }
    return "?";
}

std::map<std::string, std::string> Job::fields() const
{
    return {{"job", job},
            {"lane", lane},
            {"campaign", campaign},
            {"night", night},
            {"expid", expid},
            {"camera", camera},
            {"preproc", preproc},
            {"psf", psf},
            {"output", output},
            {"badcolumns", badcolumns},
            {"options", options},
            {"trace_shifts", trace_shifts},
            {"shifted_psf", shifted_psf}};
}

Job Job::from_fields(const std::vector<std::pair<std::string, std::string>>& fields)
{
    Job j;
    for (const auto& [k, v] : fields) {
        if (k == "job")
            j.job = v;
        else if (k == "lane")
            j.lane = v;
        else if (k == "campaign")
            j.campaign = v;
        else if (k == "night")
            j.night = v;
        else if (k == "expid")
            j.expid = v;
        else if (k == "camera")
            j.camera = v;
        else if (k == "preproc")
            j.preproc = v;
        else if (k == "psf")
            j.psf = v;
        else if (k == "output")
            j.output = v;
        else if (k == "badcolumns")
            j.badcolumns = v;
        else if (k == "options")
            j.options = v;
        else if (k == "trace_shifts")
            j.trace_shifts = v;
        else if (k == "shifted_psf")
            j.shifted_psf = v;
    }
    return j;
}

namespace {

std::string script(const char* body, bool fenced)
{
    return std::string(lua::kPrelude) + (fenced ? lua::kFence : "") + body;
}

std::vector<std::string> base_args(const std::string& ns, const Job& job)
{
    return {ns,           job.stream, job.stream_id, std::to_string(job.epoch),
            job.campaign, job.expid,  job.camera};
}

Result<Fence> to_fence(const RedisValue& v)
{
    if (v.is_error()) return Status::io("redis script: " + v.str);
    const long long code = v.as_int(-2);
    if (code == 1) return Fence::applied;
    if (code == -1) return Fence::stale;
    if (code == 0) return Fence::gone;
    return Status::io("redis script: unexpected reply");
}

// Parses one stream entry [id, [field, value, ...]].
std::optional<Job> entry_to_job(const RedisValue& entry, const std::string& stream)
{
    if (entry.type != RedisValue::Type::array || entry.elements.size() < 2) return std::nullopt;
    if (entry.elements[1].type != RedisValue::Type::array) return std::nullopt;  // deleted entry
    Job job = Job::from_fields(entry.elements[1].pairs());
    job.stream = stream;
    job.stream_id = entry.elements[0].str;
    return job;
}

}  // namespace

Status ControlPlane::ensure_group(const std::string& stream)
{
    if (streams_with_group_.count(stream)) return Status::ok();
    EX2D_ASSIGN_OR_RETURN(
        RedisValue v, redis_.command({"XGROUP", "CREATE", stream, kReaderGroup, "0", "MKSTREAM"}));
    if (v.is_error() && v.str.find("BUSYGROUP") == std::string::npos) {
        return Status::io("redis: XGROUP CREATE " + stream + ": " + v.str);
    }
    streams_with_group_.insert(stream);
    return Status::ok();
}

Result<std::vector<std::string>> ControlPlane::lane_streams()
{
    std::vector<std::string> streams = {nightly_stream()};
    EX2D_ASSIGN_OR_RETURN(RedisValue active, redis_.command({"SMEMBERS", key("campaigns:active")}));
    std::vector<std::string> names;
    for (const auto& e : active.elements) names.push_back(e.str);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) streams.push_back(campaign_stream(n));
    return streams;
}

Result<bool> ControlPlane::submit(const Job& job, bool force)
{
    EX2D_RETURN_NOT_OK(ensure_group(job.stream));
    std::vector<std::string> args = {ns_,          job.stream, "",         force ? "1" : "0",
                                     job.campaign, job.expid,  job.camera, job.lane,
                                     job.night};
    for (const auto& [k, v] : job.fields()) {
        args.push_back(k);
        args.push_back(v);
    }
    EX2D_ASSIGN_OR_RETURN(RedisValue v, redis_.eval(script(lua::kSubmit, false), {}, args));
    if (v.is_error()) return Status::io("redis submit " + job.job + ": " + v.str);
    return v.as_int() == 1;
}

namespace {

// Records the delivery; returns the epoch (0 when the entry is no longer pending) and sets
// `tries` to the extractions started so far.
Result<long long> take_entry(RedisClient& redis, const std::string& ns, Job& job, const Actor& who,
                             long long* tries = nullptr, long long* undelivered = nullptr)
{
    std::vector<std::string> args = base_args(ns, job);
    args.insert(args.end(), {who.host, std::to_string(who.pid), who.name});
    EX2D_ASSIGN_OR_RETURN(RedisValue v, redis.eval(script(lua::kTake, false), {}, args));
    if (v.is_error()) return Status::io("redis take " + job.job + ": " + v.str);
    if (v.elements.size() != 3) return Status::io("redis take " + job.job + ": unexpected reply");
    if (tries) *tries = v.elements[1].as_int();
    if (undelivered) *undelivered = v.elements[2].as_int();
    return v.elements[0].as_int();
}

// The job of a stream entry, taken for `who` with its epoch set; nullopt for an entry that is
// not a job or is no longer pending.
Result<std::optional<Job>> take_job(RedisClient& redis, const std::string& ns,
                                    const RedisValue& entry, const std::string& stream,
                                    const Actor& who)
{
    std::optional<Job> job = entry_to_job(entry, stream);
    if (!job) return job;
    EX2D_ASSIGN_OR_RETURN(long long epoch, take_entry(redis, ns, *job, who));
    if (epoch <= 0) return std::optional<Job>();
    job->epoch = epoch;
    return job;
}

}  // namespace

Result<std::optional<Job>> ControlPlane::take_new(const std::string& stream, const Actor& consumer)
{
    EX2D_ASSIGN_OR_RETURN(
        RedisValue v, redis_.command({"XREADGROUP", "GROUP", kReaderGroup, consumer.name, "COUNT",
                                      "1", "STREAMS", stream, ">"}));
    if (v.is_error()) {
        if (v.str.find("NOGROUP") != std::string::npos) {
            streams_with_group_.erase(stream);
            EX2D_RETURN_NOT_OK(ensure_group(stream));
            return std::optional<Job>();
        }
        return Status::io("redis XREADGROUP " + stream + ": " + v.str);
    }
    if (v.is_nil() || v.elements.empty()) return std::optional<Job>();
    const RedisValue& entries = v.elements[0].elements.at(1);
    if (entries.elements.empty()) return std::optional<Job>();
    return take_job(redis_, ns_, entries.elements[0], stream, consumer);
}

Result<std::vector<Job>> ControlPlane::wait_for_new(const std::vector<std::string>& streams,
                                                    const Actor& consumer, long block_ms)
{
    std::vector<Job> jobs;
    std::vector<std::string> args = {
        "XREADGROUP", "GROUP", kReaderGroup, consumer.name,
        "COUNT",      "1",     "BLOCK",      std::to_string(std::max(1L, block_ms)),
        "STREAMS"};
    args.insert(args.end(), streams.begin(), streams.end());
    args.insert(args.end(), streams.size(), ">");
    EX2D_ASSIGN_OR_RETURN(RedisValue v, redis_.command(args));
    if (v.is_error()) {
        if (v.str.find("NOGROUP") == std::string::npos)
            return Status::io("redis XREADGROUP: " + v.str);
        // A lane whose group is gone (a campaign stream deleted and re-created): make it again.
        for (const auto& stream : streams) streams_with_group_.erase(stream);
        for (const auto& stream : streams) EX2D_RETURN_NOT_OK(ensure_group(stream));
        return jobs;
    }
    if (v.is_nil()) return jobs;
    // Redis answers [[stream, [entry]], ...] for the streams that had entries.
    std::map<std::string, const RedisValue*> by_stream;
    for (const auto& reply : v.elements) {
        if (reply.elements.size() == 2 && !reply.elements[1].elements.empty()) {
            by_stream[reply.elements[0].str] = &reply.elements[1].elements[0];
        }
    }
    for (const auto& stream : streams) {
        auto found = by_stream.find(stream);
        if (found == by_stream.end()) continue;
        EX2D_ASSIGN_OR_RETURN(std::optional<Job> job,
                              take_job(redis_, ns_, *found->second, stream, consumer));
        if (job) jobs.push_back(std::move(*job));
    }
    return jobs;
}

Result<std::vector<Job>> ControlPlane::take_own_pending(const std::string& stream,
                                                        const Actor& consumer)
{
    std::vector<Job> jobs;
    EX2D_ASSIGN_OR_RETURN(RedisValue p, redis_.command({"XPENDING", stream, kReaderGroup, "-", "+",
                                                        "1000", consumer.name}));
    if (p.is_error()) return jobs;  // no group yet: nothing pending
    for (const auto& row : p.elements) {
        if (row.elements.empty()) continue;
        // XCLAIM without JUSTID increments the delivery count: the new epoch fences whoever
        // held the job before this restart.
        EX2D_ASSIGN_OR_RETURN(RedisValue c,
                              redis_.command({"XCLAIM", stream, kReaderGroup, consumer.name, "0",
                                              row.elements[0].str}));
        if (c.is_error() || c.elements.empty()) continue;
        EX2D_ASSIGN_OR_RETURN(std::optional<Job> job,
                              take_job(redis_, ns_, c.elements[0], stream, consumer));
        if (job) jobs.push_back(std::move(*job));
    }
    return jobs;
}

Result<std::vector<Job>> ControlPlane::reap(const std::string& stream, const Actor& consumer,
                                            long long lease_ms, int max_deliveries,
                                            std::vector<Job>& dead)
{
    std::vector<Job> jobs;
    std::vector<RedisValue> claimed;
    // Follow the cursor through the whole pending list: XAUTOCLAIM looks at COUNT x 10
    // entries per call, and expired leases may sit behind many live ones.
    std::string cursor = "0-0";
    do {
        EX2D_ASSIGN_OR_RETURN(RedisValue v,
                              redis_.command({"XAUTOCLAIM", stream, kReaderGroup, consumer.name,
                                              std::to_string(lease_ms), cursor, "COUNT", "100"}));
        if (v.is_error() || v.elements.size() < 2) break;
        cursor = v.elements[0].str;
        for (auto& e : v.elements[1].elements) claimed.push_back(std::move(e));
    } while (cursor != "0-0" && claimed.size() < 1000);
    for (const auto& entry : claimed) {
        std::optional<Job> job = entry_to_job(entry, stream);
        if (!job) continue;
        long long tries = 0;
        long long undelivered = 0;
        EX2D_ASSIGN_OR_RETURN(long long epoch,
                              take_entry(redis_, ns_, *job, consumer, &tries, &undelivered));
        if (epoch <= 0) continue;
        job->epoch = epoch;
        // A frame is charged for the extractions it started, not for deliveries it spent
        // waiting in a worker that another frame killed; deliveries past twice the limit
        // still end a frame that crashes a reader or a writer. Extractions whose result no
        // writer took (their storage failing, say) are charged neither way.
        if (tries - undelivered >= max_deliveries || epoch - undelivered > 2 * max_deliveries) {
            std::vector<std::string> args = base_args(ns_, *job);
            args.push_back(std::to_string(max_deliveries));
            EX2D_ASSIGN_OR_RETURN(RedisValue d, redis_.eval(script(lua::kDead, true), {}, args));
            if (d.is_error()) return Status::io("redis dead-letter " + job->job + ": " + d.str);
            if (d.as_int() == 1) dead.push_back(std::move(*job));
            continue;
        }
        jobs.push_back(std::move(*job));
    }
    return jobs;
}

Result<Fence> ControlPlane::fenced(const std::string& body, const Job& job,
                                   std::vector<std::string> args)
{
    std::vector<std::string> all = base_args(ns_, job);
    all.insert(all.end(), args.begin(), args.end());
    EX2D_ASSIGN_OR_RETURN(RedisValue v, redis_.eval(script(body.c_str(), true), {}, all));
    return to_fence(v);
}

Result<Fence> ControlPlane::renew(const Job& job)
{
    return fenced(lua::kRenew, job, {});
}

Result<Fence> ControlPlane::advance(const Job& job, const std::string& state, const Actor& actor)
{
    return fenced(lua::kAdvance, job, {state, actor.host, std::to_string(actor.pid), actor.name});
}

Result<Fence> ControlPlane::note_error(const Job& job, const std::string& error)
{
    return fenced(lua::kNoteError, job, {error});
}

Result<Fence> ControlPlane::note_fields(const Job& job, const std::vector<std::string>& fields)
{
    return fenced(lua::kNoteFields, job, fields);
}

Result<Fence> ControlPlane::fail(const Job& job, const std::string& error, const Actor& actor)
{
    return fenced(lua::kFail, job, {error, actor.host, std::to_string(actor.pid), actor.name});
}

Result<Fence> ControlPlane::finish(const Job& job, const std::string& checksum, long long bytes,
                                   const Actor& actor)
{
    return fenced(
        lua::kFinish, job,
        {checksum, std::to_string(bytes), actor.host, std::to_string(actor.pid), actor.name});
}

Result<Fence> ControlPlane::hand_back(const Job& job, long long lease_ms, bool undelivered)
{
    return fenced(lua::kHandBack, job, {std::to_string(lease_ms + 1), undelivered ? "1" : "0"});
}

Result<long long> ControlPlane::cancel_queued(const std::string& campaign)
{
    long long total = 0;
    std::string after;
    for (;;) {
        const std::vector<std::string> args = {
            ns_, campaign_stream(campaign), after, "1000", campaign, "", ""};
        EX2D_ASSIGN_OR_RETURN(RedisValue v,
                              redis_.eval(script(lua::kCancelQueued, false), {}, args));
        if (v.is_error() || v.elements.size() != 2) {
            return Status::io("redis cancel " + campaign + ": " +
                              (v.is_error() ? v.str : "unexpected reply"));
        }
        total += v.elements[0].as_int();
        after = v.elements[1].str;
        if (after.empty()) return total;
    }
}

Result<std::map<std::string, std::string>> ControlPlane::frame(const std::string& campaign,
                                                               const std::string& expid,
                                                               const std::string& camera)
{
    EX2D_ASSIGN_OR_RETURN(RedisValue v,
                          redis_.command({"HGETALL", frame_key(campaign, expid, camera)}));
    std::map<std::string, std::string> out;
    for (const auto& [k, val] : v.pairs()) out[k] = val;
    return out;
}

}  // namespace ex2d::service
