// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file service.hpp
/// The lifecycle every fleet process shares: configuration, JSON logging, signals, the
/// health and metrics endpoint, and a main loop of short steps.
///
///   int main(int argc, char** argv) {
///       return ex2d::service::run_service(argc, argv, "reader",
///           [](ServiceContext& ctx) { return std::make_unique<Reader>(ctx); });
///   }
///
/// run_service loads the configuration (kExitUsage on a bad key or value, naming it; kExitOk
/// after --print-config or --help), sets up logging, blocks SIGTERM/SIGINT/SIGPIPE handling,
/// starts the HTTP endpoint (/healthz, /readyz, /metrics), then calls start() once and step()
/// until it returns false or a stop is requested; then drain(deadline) once. Exit codes
/// (ex2d/exit_codes.hpp): kExitOk after a normal end or a drain, kExitUsage for a
/// configuration or start-up error (Status), kExitRuntime for an exception.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ex2d/exit_codes.hpp"
#include "ex2d/service/config.hpp"
#include "ex2d/service/metrics.hpp"
#include "ex2d/service/settings.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {

/// Milliseconds on a monotonic clock: the steady clock in a service, a test's own clock where
/// it steps time instead of waiting for it.
using MonotonicMillis = std::function<long long()>;
long long steady_clock_ms();

class ServiceContext {
public:
    ServiceContext(std::string role, Config config, MonotonicMillis now = steady_clock_ms);

    const std::string& role() const { return role_; }
    /// service.name, or "{role}-{host}-{pid}" when empty.
    const std::string& name() const { return name_; }
    const std::string& host() const { return host_; }
    int pid() const { return pid_; }
    const Config& config() const { return config_; }
    /// The configuration every fleet process reads, typed (settings.hpp); a role's own
    /// section is read by the role, e.g. ReaderSettings::from(config()).
    const FleetSettings& settings() const { return settings_; }
    Metrics& metrics() { return metrics_; }

    /// True once SIGTERM/SIGINT arrived or request_stop() was called.
    bool stop_requested() const;
    void request_stop();
    /// Marks the main loop alive (for /healthz: 503 once 3 s pass without one).
    void tick();
    /// Readiness for /readyz (also 503 while stopping).
    void set_ready(bool ready);
    bool ready() const;
    bool healthy() const;
    /// The HTTP endpoint's "host:port" once started.
    const std::string& http_address() const { return http_address_; }
    void set_http_address(std::string address) { http_address_ = std::move(address); }

private:
    std::string role_, name_, host_;
    int pid_ = 0;
    Config config_;
    FleetSettings settings_;
    Metrics metrics_;
    std::atomic<bool> ready_{false};
    std::atomic<bool> stop_{false};  ///< request_stop(), per context
    MonotonicMillis now_;
    std::atomic<long long> last_tick_ms_{0};
    long long started_ms_ = 0;  ///< now_(); grace before the first tick
    std::string http_address_;
};

class Service {
public:
    virtual ~Service() = default;
    /// Connect, bind, register. A non-OK status ends the process with kExitUsage.
    virtual Status start() = 0;
    /// One short iteration of the main loop (at most ~100 ms of waiting). false = finished.
    virtual bool step() = 0;
    /// Stop taking work, finish or hand back what is in hand before `deadline`, close sockets.
    virtual void drain(std::chrono::steady_clock::time_point deadline) = 0;
    /// The process's exit code once drained: kExitOk, or why step() ended the process
    /// (a worker whose device failed: kExitDevice).
    virtual int exit_code() const { return 0; }
};

using ServiceFactory = std::function<std::unique_ptr<Service>(ServiceContext&)>;

int run_service(int argc, char** argv, const std::string& role, const ServiceFactory& factory);

}  // namespace ex2d::service
