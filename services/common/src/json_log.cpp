// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/json_log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include "ex2d/logging.hpp"

namespace ex2d::service {
namespace {

thread_local LogContext t_context;

/// Appends `text` escaped for a JSON string, by nlohmann::json's own serialiser: quotes,
/// backslashes and control characters escaped, valid UTF-8 kept as is, and each invalid
/// UTF-8 sequence replaced by U+FFFD, so that the line stays valid JSON whatever a path or
/// an exception message holds.
void escape_into(std::string& out, std::string_view text)
{
    const std::string quoted = nlohmann::json(std::string(text))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out.append(quoted, 1, quoted.size() - 2);
}

void append_field(std::string& out, const char* name, const std::string& value)
{
    if (value.empty()) return;
    out += ",\"";
    out += name;
    out += "\":\"";
    escape_into(out, value);
    out += '"';
}

const char* level_name(spdlog::level::level_enum level)
{
    switch (level) {
        case spdlog::level::trace:
            return "trace";
        case spdlog::level::debug:
            return "debug";
        case spdlog::level::info:
            return "info";
        case spdlog::level::warn:
            return "warning";
        case spdlog::level::err:
            return "error";
        case spdlog::level::critical:
            return "critical";
        default:
            return "off";
    }
}

spdlog::level::level_enum parse_level(const std::string& level)
{
    if (level == "trace") return spdlog::level::trace;
    if (level == "debug") return spdlog::level::debug;
    if (level == "warning" || level == "warn") return spdlog::level::warn;
    if (level == "error") return spdlog::level::err;
    if (level == "critical") return spdlog::level::critical;
    return spdlog::level::info;
}

/// "2026-11-23T10:00:00.123Z"
void append_timestamp(std::string& out, spdlog::log_clock::time_point time)
{
    using namespace std::chrono;
    const auto seconds = time_point_cast<std::chrono::seconds>(time);
    const auto millis = duration_cast<milliseconds>(time - seconds).count();
    const std::time_t whole = spdlog::log_clock::to_time_t(seconds);
    std::tm utc{};
    gmtime_r(&whole, &utc);
    char buffer[40];
    const int n = std::snprintf(buffer, sizeof(buffer), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                                utc.tm_min, utc.tm_sec, int(millis));
    out.append(buffer, std::size_t(n));
}

std::string host_name()
{
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
    return buffer;
}

/// One JSON object per line. A formatter rather than a pattern: spdlog's patterns do not
/// escape the payload, so a quote in a path would break the line. The job context is read on
/// the logging thread, which is the thread that set it (the logger is synchronous).
class JsonFormatter final : public spdlog::formatter {
public:
    JsonFormatter(const std::string& role, const std::string& name)
    {
        fixed_ = ",\"role\":\"";
        escape_into(fixed_, role);
        fixed_ += "\",\"name\":\"";
        escape_into(fixed_, name);
        fixed_ += "\",\"host\":\"";
        escape_into(fixed_, host_name());
        fixed_ += "\",\"pid\":" + std::to_string(::getpid());
    }

    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override
    {
        std::string line = "{\"ts\":\"";
        append_timestamp(line, msg.time);
        line += "\",\"level\":\"";
        line += level_name(msg.level);
        line += '"';
        line += fixed_;
        line += ",\"msg\":\"";
        escape_into(line, std::string_view(msg.payload.data(), msg.payload.size()));
        line += '"';
        const LogContext& context = t_context;
        append_field(line, "job", context.job);
        append_field(line, "night", context.night);
        append_field(line, "expid", context.expid);
        append_field(line, "camera", context.camera);
        if (context.attempt != 0) line += ",\"attempt\":" + std::to_string(context.attempt);
        line += "}\n";
        dest.append(line.data(), line.data() + line.size());
    }

    std::unique_ptr<spdlog::formatter> clone() const override
    {
        return std::make_unique<JsonFormatter>(*this);
    }

private:
    std::string fixed_;  ///< the escaped role, name, host and pid fields
};

}  // namespace

void init_json_logging(const std::string& role, const std::string& name, const std::string& level)
{
    auto log = ex2d::logger();
    auto& sinks = log->sinks();
    sinks.clear();
    sinks.push_back(std::make_shared<spdlog::sinks::stdout_sink_mt>());
    log->set_formatter(std::make_unique<JsonFormatter>(role, name));
    log->set_level(parse_level(level));
    // Flushed per line so that the last lines before a kill -9 are not lost in a buffer.
    log->flush_on(spdlog::level::info);
}

ScopedLogContext::ScopedLogContext(LogContext context) : previous_(std::move(t_context))
{
    t_context = std::move(context);
}

ScopedLogContext::~ScopedLogContext()
{
    t_context = std::move(previous_);
}

const LogContext& current_log_context()
{
    return t_context;
}

std::string json_escape(const std::string& text)
{
    std::string out;
    out.reserve(text.size() + 8);
    escape_into(out, text);
    return out;
}

}  // namespace ex2d::service
