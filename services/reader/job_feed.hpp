// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// New jobs for a reader, taken from Redis on a thread of its own: the thread waits in
// XREADGROUP ... BLOCK, so the reader's main loop sleeps in poll() on its socket and this
// feed's eventfd instead of asking Redis again and again (docs/redis-schema.md, "Jobs").

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/keeper.hpp"
#include "ex2d/service/redis_client.hpp"

namespace ex2d::reader {

class JobFeed {
public:
    JobFeed(service::RedisOptions options, std::string redis_namespace, service::Actor me,
            service::Keeper& keeper);
    ~JobFeed();
    JobFeed(const JobFeed&) = delete;
    JobFeed& operator=(const JobFeed&) = delete;

    Status start();
    /// Asks for one job; the thread takes one as soon as a lane has one (nightly first).
    void want();
    /// A job taken for this reader and held by its keeper, if one has arrived.
    std::optional<service::Job> take();
    /// Readable while a job waits in take().
    int fd() const { return ready_fd_; }
    /// Ends the thread (within its wait, at most a second) and returns the jobs it took that
    /// nobody took from it, for the caller to hand back.
    std::vector<service::Job> stop();

private:
    void run();
    void deliver(std::vector<service::Job> jobs);

    service::RedisClient redis_;
    service::ControlPlane plane_;
    service::Actor me_;
    service::Keeper& keeper_;
    int ready_fd_ = -1;
    std::atomic<bool> stopping_{false};
    std::mutex mutex_;
    std::condition_variable wanted_cv_;
    bool wanted_ = false;
    std::deque<service::Job> ready_;
    std::thread thread_;
};

}  // namespace ex2d::reader
