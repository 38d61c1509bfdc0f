// SPDX-License-Identifier: BSD-3-Clause
#include "device_failures.hpp"

#include <chrono>

namespace ex2d::worker {

namespace {

long long now_ms()
{
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status checked(const Result<service::RedisValue>& reply, const std::string& what)
{
    if (!reply.is_ok()) return reply.status();
    if (reply.value().is_error()) return Status::io("redis " + what + ": " + reply.value().str);
    return Status::ok();
}

}  // namespace

DeviceFailureRecord::DeviceFailureRecord(service::RedisClient& redis,
                                         const service::ControlPlane& plane,
                                         const std::string& host, const std::string& device,
                                         double window_s)
    : redis_(redis),
      key_(plane.key("device_failures:" + host + ":" + device)),
      window_ms_((long long)(window_s * 1000))
{
}

Status DeviceFailureRecord::record(const std::string& what)
{
    const long long now = now_ms();
    const std::string score = std::to_string(now);
    EX2D_RETURN_NOT_OK(checked(redis_.command({"ZADD", key_, score, score + " " + what}), "ZADD"));
    EX2D_RETURN_NOT_OK(checked(
        redis_.command({"ZREMRANGEBYSCORE", key_, "-inf", "(" + std::to_string(now - window_ms_)}),
        "ZREMRANGEBYSCORE"));
    return checked(redis_.command({"PEXPIRE", key_, std::to_string(window_ms_)}), "PEXPIRE");
}

Result<long long> DeviceFailureRecord::recent()
{
    auto reply = redis_.command({"ZCOUNT", key_, std::to_string(now_ms() - window_ms_), "+inf"});
    EX2D_RETURN_NOT_OK(checked(reply, "ZCOUNT"));
    return reply.value().as_int();
}

}  // namespace ex2d::worker
