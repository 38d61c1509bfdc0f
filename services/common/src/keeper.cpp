// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/keeper.hpp"

#include <chrono>
#include <vector>

#include "ex2d/logging.hpp"

namespace ex2d::service {

namespace {

std::string lease_id(const Job& job)
{
    return job.stream + "|" + job.stream_id + "|" + std::to_string(job.epoch);
}

}  // namespace

Keeper::Keeper(ServiceContext& ctx) : ctx_(ctx) {}

Keeper::~Keeper()
{
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (plane_) {
        (void)redis_->command({"DEL", plane_->key("proc:" + ctx_.name())});
        (void)redis_->command({"HDEL", plane_->key("endpoints"), ctx_.name()});
        (void)redis_->command({"ZREM", plane_->key("procs"), ctx_.name()});
    }
}

void Keeper::set_field(const std::string& field, const std::string& value)
{
    std::lock_guard<std::mutex> lock(mutex_);
    fields_[field] = value;
}

Status Keeper::start()
{
    EX2D_ASSIGN_OR_RETURN(RedisOptions options, redis_options(ctx_.settings().redis));
    // Unlike the main loop, the keeper never gives up on Redis while the process runs.
    redis_ = std::make_unique<RedisClient>(options, [this] { return !stop_.load(); });
    plane_ = std::make_unique<ControlPlane>(*redis_, ctx_.settings().redis.key_namespace);
    heartbeat(*plane_, *redis_);
    thread_ = std::thread([this] { run(); });
    return Status::ok();
}

void Keeper::hold(const Job& job)
{
    std::lock_guard<std::mutex> lock(mutex_);
    held_[lease_id(job)] = job;
}

void Keeper::release(const Job& job)
{
    std::lock_guard<std::mutex> lock(mutex_);
    held_.erase(lease_id(job));
    lost_.erase(lease_id(job));
}

bool Keeper::lost(const Job& job) const
{
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_.count(lease_id(job)) > 0;
}

std::string Keeper::lifecycle_state() const
{
    if (ctx_.stop_requested() || drain_requested_) return "draining";
    if (retired_) return "retired";
    return ctx_.ready() ? "ready" : "starting";
}

void Keeper::heartbeat(ControlPlane& plane, RedisClient& redis)
{
    const std::string key = plane.key("proc:" + ctx_.name());
    std::vector<std::string> cmd = {"HSET", key};
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [k, v] : fields_) {
            cmd.push_back(k);
            cmd.push_back(v);
        }
    }
    const long long now = unix_ms();
    published_state_ = lifecycle_state();
    const std::vector<std::string> common = {"role",         ctx_.role(),
                                             "host",         ctx_.host(),
                                             "pid",          std::to_string(ctx_.pid()),
                                             "heartbeat_at", std::to_string(now),
                                             "http",         ctx_.http_address(),
                                             "state",        published_state_};
    cmd.insert(cmd.end(), common.begin(), common.end());
    const double ttl = ctx_.settings().service.heartbeat_ttl_s;
    // Failures are left to the next heartbeat: Redis being away is logged by the client.
    (void)redis.command(cmd);
    (void)redis.command({"HSETNX", key, "started_at", std::to_string(now)});
    (void)redis.command({"PEXPIRE", key, std::to_string((long long)(ttl * 1000))});
    (void)redis.command({"ZADD", plane.key("procs"), std::to_string(now), ctx_.name()});
    // Processes that died without a word leave the index after ten heartbeat lifetimes.
    (void)redis.command({"ZREMRANGEBYSCORE", plane.key("procs"), "-inf",
                         std::to_string(now - (long long)(10 * ttl * 1000))});
    std::string endpoint, curve_key;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = fields_.find("endpoint");
        if (it != fields_.end()) endpoint = it->second;
        it = fields_.find("curve_key");
        if (it != fields_.end()) curve_key = it->second;
    }
    // Readers and writers also publish their endpoint in one small hash, so that a worker
    // discovers every peer with a single HGETALL however large the fleet; a CURVE server
    // appends its public key (docs/protocol.md, "Security").
    if (!endpoint.empty()) {
        (void)redis.command({"HSET", plane.key("endpoints"), ctx_.name(),
                             ctx_.role() + " " + published_state_ + " " + std::to_string(now) +
                                 " " + endpoint + (curve_key.empty() ? "" : " " + curve_key)});
    }
    auto drain = redis.command({"EXISTS", plane.key("drain:" + ctx_.name())});
    if (drain.is_ok() && drain.value().as_int() == 1 && !drain_requested_) {
        drain_requested_ = true;
        logger()->info("drain requested through redis key {}", plane.key("drain:" + ctx_.name()));
    }
}

void Keeper::run()
{
    using Clock = std::chrono::steady_clock;
    const auto heartbeat_every =
        std::chrono::duration<double>(ctx_.settings().service.heartbeat_interval_s);
    const auto renew_every = std::chrono::duration<double>(ctx_.settings().queue.lease_s / 3.0);
    auto next_heartbeat =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(heartbeat_every);
    auto next_renew = Clock::now() + std::chrono::duration_cast<Clock::duration>(renew_every);
    while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto now = Clock::now();
        // A change of state (ready, draining) is published at once, not at the next beat.
        if (now >= next_heartbeat || lifecycle_state() != published_state_) {
            heartbeat(*plane_, *redis_);
            next_heartbeat = now + std::chrono::duration_cast<Clock::duration>(heartbeat_every);
        }
        if (now < next_renew) continue;
        next_renew = now + std::chrono::duration_cast<Clock::duration>(renew_every);
        std::vector<std::pair<std::string, Job>> jobs;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (const auto& [id, job] : held_) {
                if (!lost_.count(id)) jobs.emplace_back(id, job);
            }
        }
        for (const auto& [id, job] : jobs) {
            auto fence = plane_->renew(job);
            if (!fence.is_ok()) continue;  // Redis away: the lease runs on; retried next round
            if (fence.value() == Fence::applied) {
                ctx_.metrics().leases("renewed").Increment();
                continue;
            }
            std::lock_guard<std::mutex> lock(mutex_);
            // Released while it was being renewed: its holder finished it (the renewal raced
            // the finish and found the job acknowledged), which is no loss at all.
            if (!held_.count(id)) continue;
            ctx_.metrics().leases("lost").Increment();
            lost_.insert(id);
            if (fence.value() == Fence::gone) {
                // No longer pending: acknowledged by this holder's finish, still in flight, or
                // by another holder's. The holder's own finish says which ("finish refused").
                logger()->info(
                    "lease renewal found job={} attempt={} acknowledged; this holder's finish "
                    "decides whether it was its own",
                    job.job, job.epoch);
                continue;
            }
            logger()->warn("lease lost job={} attempt={} reason={}", job.job, job.epoch,
                           to_string(fence.value()));
        }
    }
}

}  // namespace ex2d::service
