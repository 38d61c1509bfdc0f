// SPDX-License-Identifier: BSD-3-Clause
#include "job_feed.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <sys/eventfd.h>
#include <unistd.h>

#include "ex2d/logging.hpp"

namespace ex2d::reader {

namespace {

/// Long enough to cost nothing while idle, short enough for stop() and for a lane created
/// meanwhile (a new campaign) to be included in the next wait.
constexpr long kWaitMs = 1000;

}  // namespace

JobFeed::JobFeed(service::RedisOptions options, std::string redis_namespace, service::Actor me,
                 service::Keeper& keeper)
    : redis_(std::move(options), [this] { return !stopping_.load(); }),
      plane_(redis_, std::move(redis_namespace)),
      me_(std::move(me)),
      keeper_(keeper)
{
}

JobFeed::~JobFeed()
{
    stop();
    if (ready_fd_ >= 0) ::close(ready_fd_);
}

Status JobFeed::start()
{
    ready_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ready_fd_ < 0) return Status::io(std::string("eventfd: ") + std::strerror(errno));
    EX2D_RETURN_NOT_OK(redis_.connect_once());
    thread_ = std::thread([this] { run(); });
    return Status::ok();
}

void JobFeed::want()
{
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_.empty() || wanted_) return;
    wanted_ = true;
    wanted_cv_.notify_one();
}

std::optional<service::Job> JobFeed::take()
{
    std::lock_guard<std::mutex> lock(mutex_);
    if (ready_.empty()) return std::nullopt;
    service::Job job = std::move(ready_.front());
    ready_.pop_front();
    if (ready_.empty()) {
        // Under the lock that also guards the push: the fd is readable exactly while a job waits.
        std::uint64_t count = 0;
        (void)!::read(ready_fd_, &count, sizeof count);
    }
    return job;
}

std::vector<service::Job> JobFeed::stop()
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        wanted_cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<service::Job> left(std::make_move_iterator(ready_.begin()),
                                   std::make_move_iterator(ready_.end()));
    ready_.clear();
    return left;
}

void JobFeed::deliver(std::vector<service::Job> jobs)
{
    if (jobs.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& job : jobs) {
        keeper_.hold(job);
        ready_.push_back(std::move(job));
    }
    wanted_ = false;
    const std::uint64_t one = 1;
    (void)!::write(ready_fd_, &one, sizeof one);
}

void JobFeed::run()
{
    while (!stopping_) {
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wanted_cv_.wait(lock, [this] { return wanted_ || stopping_.load(); });
            if (stopping_) return;
        }
        auto streams = plane_.lane_streams();
        if (!streams.is_ok()) continue;  // Redis away: the client has waited with backoff
        // What is queued already goes first, lane by lane; then wait for what comes.
        std::vector<service::Job> jobs;
        for (const auto& stream : streams.value()) {
            auto job = plane_.take_new(stream, me_);
            if (!job.is_ok()) {
                logger()->warn("cannot read {}: {}", stream, job.status().message());
                break;
            }
            if (job.value()) {
                jobs.push_back(std::move(*job.value()));
                break;
            }
        }
        if (jobs.empty()) {
            auto arrived = plane_.wait_for_new(streams.value(), me_, kWaitMs);
            if (arrived.is_ok()) {
                jobs = std::move(arrived).value();
            } else {
                logger()->warn("cannot wait for jobs: {}", arrived.status().message());
            }
        }
        deliver(std::move(jobs));
    }
}

}  // namespace ex2d::reader
