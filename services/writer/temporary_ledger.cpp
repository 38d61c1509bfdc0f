// SPDX-License-Identifier: BSD-3-Clause
#include "temporary_ledger.hpp"

#include <filesystem>
#include <sstream>

#include "ex2d/logging.hpp"

namespace ex2d::writer {

RedisTemporaryLedger::RedisTemporaryLedger(service::RedisClient& redis,
                                           const service::ControlPlane& plane, service::Actor me)
    : redis_(redis),
      key_(plane.key("temporaries")),
      proc_prefix_(plane.key("proc:")),
      me_(std::move(me))
{
}

Status RedisTemporaryLedger::record(const std::string& path)
{
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string entry = me_.name + " " + me_.host + " " + std::to_string(me_.pid) + " " +
                              std::to_string(service::unix_ms());
    auto reply = redis_.command({"HSET", key_, path, entry});
    if (!reply.is_ok())
        return Status::io(path + ": cannot record the temporary file: " + reply.status().message());
    if (reply.value().is_error()) {
        return Status::io(path + ": cannot record the temporary file: redis: " + reply.value().str);
    }
    mine_.insert(path);
    return Status::ok();
}

void RedisTemporaryLedger::forget(const std::string& path)
{
    std::lock_guard<std::mutex> lock(mutex_);
    mine_.erase(path);
    // A failed HDEL leaves an entry whose file is gone; the next sweep drops it.
    (void)redis_.command({"HDEL", key_, path});
}

bool RedisTemporaryLedger::owner_alive(const std::string& owner, const std::string& host,
                                       const std::string& pid)
{
    auto reply = redis_.command({"HMGET", proc_prefix_ + owner, "host", "pid"});
    // Redis unreachable: assume alive, never remove a file on a guess.
    if (!reply.is_ok() || reply.value().is_error()) return true;
    const auto& fields = reply.value().elements;
    if (fields.size() != 2 || fields[0].is_nil()) return false;
    return fields[0].str == host && fields[1].str == pid;
}

int RedisTemporaryLedger::sweep()
{
    // Held throughout: a file recorded while the sweep runs must be seen as this writer's.
    std::lock_guard<std::mutex> lock(mutex_);
    auto entries = redis_.command({"HGETALL", key_});
    if (!entries.is_ok() || entries.value().is_error()) return 0;
    int removed = 0;
    for (const auto& [path, value] : entries.value().pairs()) {
        std::istringstream in(value);
        std::string owner, host, pid;
        in >> owner >> host >> pid;
        if (owner == me_.name && host == me_.host && pid == std::to_string(me_.pid)) {
            if (mine_.count(path)) continue;
        } else if (owner_alive(owner, host, pid)) {
            continue;
        }
        if (is_temporary_name(path)) {
            std::error_code ec;
            if (std::filesystem::remove(path, ec)) {
                ++removed;
                logger()->info("removed temporary file of writer {} (gone): {}", owner, path);
            } else if (ec) {
                // Not reachable from here (another node's disk): leave it to a writer that is.
                logger()->warn("cannot remove temporary file of writer {} {}: {}", owner, path,
                               ec.message());
                continue;
            }
        } else {
            logger()->warn("temporaries ledger names a file that is not a temporary: {}", path);
        }
        (void)redis_.command({"HDEL", key_, path});
    }
    return removed;
}

int RedisTemporaryLedger::remove_own()
{
    std::lock_guard<std::mutex> lock(mutex_);
    int removed = 0;
    for (const std::string& path : mine_) {
        std::error_code ec;
        if (is_temporary_name(path) && std::filesystem::remove(path, ec)) ++removed;
        (void)redis_.command({"HDEL", key_, path});
    }
    mine_.clear();
    return removed;
}

bool is_temporary_name(const std::string& path)
{
    const std::string name = std::filesystem::path(path).filename().string();
    return name.find(".tmp-") != std::string::npos || name.find(".replaced-") != std::string::npos;
}

}  // namespace ex2d::writer
