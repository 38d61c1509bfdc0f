// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/redis_client.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <hiredis/hiredis.h>
#include <sys/stat.h>

#include "ex2d/logging.hpp"
#include "ex2d/service/settings.hpp"

namespace ex2d::service {

long long RedisValue::as_int(long long fallback) const
{
    if (type == Type::integer) return integer;
    if (type == Type::string || type == Type::status) {
        try {
            std::size_t used = 0;
            const long long v = std::stoll(str, &used);
            if (used == str.size()) return v;
        } catch (const std::exception&) {
        }
    }
    return fallback;
}

std::vector<std::pair<std::string, std::string>> RedisValue::pairs() const
{
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
        const RedisValue& v = elements[i + 1];
        out.emplace_back(elements[i].str,
                         v.type == Type::integer ? std::to_string(v.integer) : v.str);
    }
    return out;
}

namespace {

RedisValue convert(const redisReply* reply)
{
    RedisValue v;
    switch (reply->type) {
        case REDIS_REPLY_INTEGER:
            v.type = RedisValue::Type::integer;
            v.integer = reply->integer;
            break;
        case REDIS_REPLY_STRING:
            v.type = RedisValue::Type::string;
            v.str.assign(reply->str, reply->len);
            break;
        case REDIS_REPLY_STATUS:
            v.type = RedisValue::Type::status;
            v.str.assign(reply->str, reply->len);
            break;
        case REDIS_REPLY_ERROR:
            v.type = RedisValue::Type::error;
            v.str.assign(reply->str, reply->len);
            break;
        case REDIS_REPLY_ARRAY:
            v.type = RedisValue::Type::array;
            for (std::size_t i = 0; i < reply->elements; ++i)
                v.elements.push_back(convert(reply->element[i]));
            break;
        default:
            v.type = RedisValue::Type::nil;
    }
    return v;
}

std::string sha1_of_script(RedisClient& client, const std::string& script)
{
    // Scripts are few and fixed: remember their SHA per text (SCRIPT LOAD is idempotent).
    static std::mutex mutex;
    static std::map<std::string, std::string> known;
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = known.find(script);
        if (it != known.end()) return it->second;
    }
    auto loaded = client.command({"SCRIPT", "LOAD", script});
    if (!loaded.is_ok() || loaded.value().is_error()) return {};
    std::lock_guard<std::mutex> lock(mutex);
    known[script] = loaded.value().str;
    return loaded.value().str;
}

}  // namespace

RedisClient::RedisClient(RedisOptions options, std::function<bool()> keep_trying)
    : options_(std::move(options)), keep_trying_(std::move(keep_trying))
{
}

RedisClient::~RedisClient()
{
    drop_connection();
}

void RedisClient::drop_connection()
{
    if (context_) redisFree(context_);
    context_ = nullptr;
}

Status RedisClient::connect_once()
{
    drop_connection();
    const timeval timeout{options_.timeout_ms / 1000, (options_.timeout_ms % 1000) * 1000};
    context_ = redisConnectWithTimeout(options_.host.c_str(), options_.port, timeout);
    if (!context_ || context_->err) {
        const std::string why = context_ ? context_->errstr : "cannot allocate a context";
        drop_connection();
        return Status::io("redis " + options_.host + ":" + std::to_string(options_.port) + ": " +
                          why);
    }
    redisSetTimeout(context_, timeout);
    if (!options_.password.empty()) {
        std::vector<std::string> auth = {"AUTH"};
        if (!options_.user.empty()) auth.push_back(options_.user);
        auth.push_back(options_.password);
        std::vector<const char*> argv;
        std::vector<std::size_t> lens;
        for (const auto& a : auth) {
            argv.push_back(a.data());
            lens.push_back(a.size());
        }
        auto* reply = static_cast<redisReply*>(
            redisCommandArgv(context_, int(argv.size()), argv.data(), lens.data()));
        const std::string where = "redis " + options_.host + ":" + std::to_string(options_.port);
        const std::string user = options_.user.empty() ? "default" : options_.user;
        if (!reply) {
            // Connected, then cut off before the answer (a partition, Redis stopped): Redis
            // is unreachable, which callers retry, not a refused password, which they do not.
            const std::string why = context_->errstr;
            drop_connection();
            return Status::io(where + ": no reply to AUTH as user '" + user + "': " + why);
        }
        const bool refused = reply->type == REDIS_REPLY_ERROR;
        const std::string err = refused ? reply->str : "";
        freeReplyObject(reply);
        if (refused) {
            drop_connection();
            // The password never appears in the message.
            return Status::invalid(where + ": authentication failed for user '" + user +
                                   "': " + err);
        }
    }
    if (ever_connected_) {
        ++reconnects_;
        if (on_reconnect_) on_reconnect_();
    }
    ever_connected_ = true;
    return Status::ok();
}

Status RedisClient::ensure_connected()
{
    if (context_) return Status::ok();
    auto backoff = std::chrono::milliseconds(100);
    for (int attempt = 0;; ++attempt) {
        Status s = connect_once();
        if (s.is_ok() || s.code() == StatusCode::invalid_argument) return s;
        if (attempt == 0 || attempt % 10 == 0) {
            logger()->warn("redis unreachable, retrying in {} ms: {}", backoff.count(),
                           s.message());
        }
        if (keep_trying_ && !keep_trying_()) return s;
        if (!keep_trying_ && attempt >= 3) return s;
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
    }
}

namespace {

/// Logs an ACL refusal once per command and process: a role whose user lacks a permission
/// would otherwise fail quietly (heartbeats ignore their replies).
void report_refusal(const std::string& command, const std::string& error)
{
    const bool acl = error.rfind("NOPERM", 0) == 0 ||
                     error.find("The user executing the script can't") != std::string::npos;
    if (!acl) return;
    static std::mutex mutex;
    static std::set<std::string> reported;
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (!reported.insert(command).second) return;
    }
    logger()->error(
        "redis refused {} for this ACL user: {} (docs/redis-schema.md, Access "
        "control; tools/ex2d-redis-acl)",
        command, error);
}

}  // namespace

Result<RedisValue> RedisClient::command(const std::vector<std::string>& args)
{
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    for (;;) {
        EX2D_RETURN_NOT_OK(ensure_connected());
        auto* reply = static_cast<redisReply*>(
            redisCommandArgv(context_, int(argv.size()), argv.data(), lens.data()));
        if (reply) {
            RedisValue value = convert(reply);
            freeReplyObject(reply);
            if (value.is_error() && !args.empty()) report_refusal(args[0], value.str);
            return value;
        }
        // The connection broke: the command may or may not have run. Every caller's command
        // is safe to repeat (scripts check state and epoch first), so it is sent again.
        logger()->warn("redis connection lost during {}: {}", args.empty() ? "" : args[0],
                       context_ && context_->errstr[0] ? context_->errstr : "no reply");
        drop_connection();
        if (keep_trying_ && !keep_trying_()) return Status::io("redis: connection lost");
    }
}

Result<RedisValue> RedisClient::eval(const std::string& script,
                                     const std::vector<std::string>& keys,
                                     const std::vector<std::string>& args)
{
    for (int attempt = 0; attempt < 3; ++attempt) {
        const std::string sha = sha1_of_script(*this, script);
        std::vector<std::string> cmd;
        if (sha.empty()) {
            cmd = {"EVAL", script};
        } else {
            cmd = {"EVALSHA", sha};
        }
        cmd.push_back(std::to_string(keys.size()));
        cmd.insert(cmd.end(), keys.begin(), keys.end());
        cmd.insert(cmd.end(), args.begin(), args.end());
        EX2D_ASSIGN_OR_RETURN(RedisValue value, command(cmd));
        if (value.is_error() && value.str.rfind("NOSCRIPT", 0) == 0) {
            // Redis restarted without our scripts: load again (SCRIPT LOAD returns the same SHA).
            (void)command({"SCRIPT", "LOAD", script});
            continue;
        }
        return value;
    }
    return Status::io("redis: script could not be loaded");
}

Result<RedisOptions> redis_options(const RedisSettings& settings)
{
    RedisOptions o{settings.host, settings.port, settings.user, settings.password,
                   settings.timeout_ms};
    const std::string& file = settings.password_file;
    if (!file.empty()) {
        std::ifstream in(file);
        if (!in)
            return Status::io(file + ": cannot read the Redis password file (redis.password_file)");
        std::getline(in, o.password);
        struct stat st {};
        if (::stat(file.c_str(), &st) == 0 && (st.st_mode & S_IROTH)) {
            logger()->warn(
                "Redis password file {} is readable by every user (mode {:o}); make "
                "it 0600 or 0400",
                file, st.st_mode & 07777);
        }
        while (!o.password.empty() && (o.password.back() == '\r' || o.password.back() == ' ')) {
            o.password.pop_back();
        }
    }
    return o;
}

Status check_redis_durability(RedisClient& redis)
{
    // INFO rather than CONFIG GET: a role's ACL user needs no access to the server's
    // configuration (which holds replication passwords) for this check.
    EX2D_ASSIGN_OR_RETURN(RedisValue info, redis.command({"INFO"}));
    if (info.is_error()) {
        return Status::invalid("redis: INFO: " + info.str +
                               " (the ACL user needs +info for the durability check)");
    }
    auto field = [&](const std::string& name) -> std::optional<std::string> {
        const std::string label = "\n" + name + ":";
        auto pos = info.str.find(label);
        if (pos == std::string::npos) return std::nullopt;
        pos += label.size();
        const auto end = info.str.find_first_of("\r\n", pos);
        return info.str.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    };
    if (const auto version = field("redis_version")) {
        if (std::atoi(version->c_str()) < 7) {
            return Status::invalid("redis: version " + *version +
                                   " is older than 7.0, which the queue needs (XAUTOCLAIM, lag)");
        }
    }
    const auto aof = field("aof_enabled");
    const auto policy = field("maxmemory_policy");
    if (!aof || !policy) {
        return Status::invalid(
            "redis: INFO reports no aof_enabled or maxmemory_policy: cannot "
            "tell whether acknowledged work survives a restart");
    }
    if (*aof != "1") {
        return Status::invalid(
            "redis: appendonly is 'no': acknowledged work would be lost on a "
            "restart (set appendonly yes, or redis.allow_unsafe true for tests)");
    }
    if (*policy != "noeviction") {
        return Status::invalid("redis: maxmemory-policy is '" + *policy +
                               "': Redis could evict queued jobs (set noeviction, or "
                               "redis.allow_unsafe true for tests)");
    }
    return Status::ok();
}

}  // namespace ex2d::service
