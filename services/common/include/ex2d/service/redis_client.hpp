// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file redis_client.hpp
/// A blocking Redis connection (hiredis) that survives Redis restarts: a command that meets a
/// broken connection reconnects with exponential backoff (100 ms doubling to 5 s) and is sent
/// again until it gets an answer or the caller's keep_trying() says stop. Commands are sent
/// as argument vectors (binary-safe, no formatting). Lua scripts go through EVALSHA and are
/// loaded again after a restart (NOSCRIPT).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ex2d/status.hpp"

struct redisContext;

namespace ex2d::service {

/// A reply as a value tree.
struct RedisValue {
    enum class Type { nil, integer, string, array, status, error };
    Type type = Type::nil;
    long long integer = 0;
    std::string str;  ///< string, status or error text
    std::vector<RedisValue> elements;

    bool is_nil() const { return type == Type::nil; }
    bool is_error() const { return type == Type::error; }
    /// Integer value, or a string holding an integer; `fallback` otherwise.
    long long as_int(long long fallback = 0) const;
    /// Flat array of field/value pairs (HGETALL, stream entries) as a map.
    std::vector<std::pair<std::string, std::string>> pairs() const;
};

struct RedisOptions {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string user;      ///< ACL user; empty = default
    std::string password;  ///< empty = no AUTH
    int timeout_ms = 5000;
};

class RedisClient {
public:
    /// keep_trying() is called between reconnection attempts (the service ticks its health
    /// there); when it returns false the command fails with an io_error.
    RedisClient(RedisOptions options, std::function<bool()> keep_trying = {});
    ~RedisClient();
    RedisClient(const RedisClient&) = delete;
    RedisClient& operator=(const RedisClient&) = delete;

    /// Runs one command. A Redis error reply is returned as a value of type error, not as a
    /// failed Status; a failed Status means Redis could not be reached.
    Result<RedisValue> command(const std::vector<std::string>& args);
    /// Runs a Lua script by its SHA, loading it first where Redis does not know it.
    Result<RedisValue> eval(const std::string& script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args);
    /// Connects now (one attempt), e.g. to fail fast where a person waits (ex2dctl).
    Status connect_once();
    /// Connects, retrying with backoff (100 ms doubling to 5 s, logged) while Redis cannot be
    /// reached and keep_trying() allows; a refused password fails at once.
    Status connect() { return ensure_connected(); }
    /// Reconnections since construction (for ex2d_redis_reconnects_total).
    long reconnects() const { return reconnects_; }
    /// Called after every successful reconnection.
    void on_reconnect(std::function<void()> callback) { on_reconnect_ = std::move(callback); }

private:
    Status ensure_connected();
    void drop_connection();

    RedisOptions options_;
    std::function<bool()> keep_trying_;
    std::function<void()> on_reconnect_;
    redisContext* context_ = nullptr;
    bool ever_connected_ = false;
    long reconnects_ = 0;
};

/// RedisOptions from the configuration (redis.*), reading the password file.
Result<RedisOptions> redis_options(const struct RedisSettings& settings);

/// Checks that Redis cannot lose acknowledged work: version >= 7.0, appendonly yes,
/// maxmemory-policy noeviction. The error names the setting.
Status check_redis_durability(RedisClient& redis);

}  // namespace ex2d::service
