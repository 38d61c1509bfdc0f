// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file json_log.hpp
/// Structured logs: one JSON object per line on stdout, for the engine's logger (ex2d::logger())
/// as well as the services. Fields: ts (RFC 3339 UTC, milliseconds), level, role, name, host,
/// pid, msg, and, when the current thread works on a job, job, night, expid, camera, attempt.

#include <string>

namespace ex2d::service {

/// The job a thread is working on; empty fields are left out of the log line.
struct LogContext {
    std::string job;
    std::string night;
    std::string expid;
    std::string camera;
    long long attempt = 0;  ///< the job's epoch; 0 = not set
};

/// Switches ex2d::logger() to JSON lines on stdout at `level` (trace .. critical).
void init_json_logging(const std::string& role, const std::string& name, const std::string& level);

/// Sets the calling thread's job context for as long as it lives, restoring the previous one.
class ScopedLogContext {
public:
    explicit ScopedLogContext(LogContext context);
    ~ScopedLogContext();
    ScopedLogContext(const ScopedLogContext&) = delete;
    ScopedLogContext& operator=(const ScopedLogContext&) = delete;

private:
    LogContext previous_;
};

/// The calling thread's current context.
const LogContext& current_log_context();

/// JSON string escaping as nlohmann::json writes it (quotes, backslash, control characters as
/// \n, \t, ... or \u00XX; invalid UTF-8 sequences as U+FFFD); no surrounding quotes.
std::string json_escape(const std::string& text);

}  // namespace ex2d::service
