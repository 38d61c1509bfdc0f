// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/service.hpp"

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>

#include <unistd.h>

#include "ex2d/logging.hpp"
#include "ex2d/service/allocator.hpp"
#include "ex2d/service/http_server.hpp"
#include "ex2d/service/json_log.hpp"

namespace ex2d::service {
namespace {

/// Set by the SIGTERM/SIGINT handler; a lock-free atomic is async-signal-safe to store.
std::atomic<bool> g_signalled{false};
static_assert(std::atomic<bool>::is_always_lock_free);

constexpr long long kHealthyTickMs = 3000;    ///< /healthz fails after this long without a tick
constexpr long long kStartupGraceMs = 30000;  ///< healthy before the first tick for this long

extern "C" void on_stop_signal(int)
{
    g_signalled.store(true);
}

void install_signal_handlers()
{
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    // A peer closing a socket must surface as an error return, not kill the process.
    std::signal(SIGPIPE, SIG_IGN);
}

std::string host_name()
{
    char buffer[256] = {};
    if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return "unknown";
    return buffer;
}

std::string http_address(const std::string& host, int port)
{
    const bool ipv6 = host.find(':') != std::string::npos;
    return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

HttpResponse plain(bool ok, const char* good, const char* bad)
{
    HttpResponse response;
    response.status = ok ? 200 : 503;
    response.body = ok ? good : bad;
    return response;
}

/// The lifecycle after the configuration is loaded and logging is set up.
int run_loaded(ServiceContext& ctx, const ServiceFactory& factory)
{
    const FleetSettings& settings = ctx.settings();
    auto log = ex2d::logger();

    HttpServer http;
    http.handle("/healthz", [&ctx] { return plain(ctx.healthy(), "ok\n", "main loop stalled\n"); });
    http.handle("/readyz", [&ctx] {
        return plain(ctx.ready() && !ctx.stop_requested(), "ready\n", "not ready\n");
    });
    http.handle("/metrics", [&ctx] {
        HttpResponse response;
        response.content_type = "text/plain; version=0.0.4; charset=utf-8";
        response.body = ctx.metrics().serialize();
        return response;
    });
    const std::string& http_host = settings.http.host;
    const Status bound = http.start(http_host, settings.http.port);
    if (!bound.is_ok()) {
        log->error("cannot start the HTTP endpoint: {}", bound.message());
        return kExitUsage;
    }
    ctx.set_http_address(http_address(http_host, http.port()));
    log->info("start role={} name={} http={} version={} malloc={}", ctx.role(), ctx.name(),
              ctx.http_address(), EX2D_VERSION, allocator_description());

    std::unique_ptr<Service> service = factory(ctx);
    if (!service) throw Error("the service factory returned no service");
    const Status started = service->start();
    if (!started.is_ok() && ctx.stop_requested()) {
        // Stopped while still starting (e.g. waiting for Redis): nothing was taken, a clean exit.
        log->info("stopped before start-up finished: {}", started.to_string());
        return kExitOk;
    }
    if (!started.is_ok()) {
        log->error("start failed: {}", started.to_string());
        return kExitUsage;
    }
    ctx.tick();
    while (!ctx.stop_requested() && service->step()) ctx.tick();

    ctx.set_ready(false);
    const double drain_s = settings.service.drain_timeout_s;
    log->info("draining timeout_s={}", drain_s);
    service->drain(std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(drain_s)));
    const int code = service->exit_code();
    log->info("stopped exit_code={}", code);
    return code;
}

}  // namespace

long long steady_clock_ms()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

ServiceContext::ServiceContext(std::string role, Config config, MonotonicMillis now)
    : role_(std::move(role)),
      host_(host_name()),
      pid_(int(::getpid())),
      config_(std::move(config)),
      settings_(FleetSettings::from(config_)),
      metrics_(role_),
      now_(std::move(now)),
      started_ms_(now_())
{
    name_ = settings_.service.name;
    if (name_.empty()) name_ = role_ + "-" + host_ + "-" + std::to_string(pid_);
    metrics_.ready().Set(0);
}

bool ServiceContext::stop_requested() const
{
    return stop_.load() || g_signalled.load();
}

void ServiceContext::request_stop()
{
    stop_.store(true);
}

void ServiceContext::tick()
{
    last_tick_ms_.store(now_());
}

void ServiceContext::set_ready(bool ready)
{
    ready_.store(ready);
    metrics_.ready().Set(ready ? 1 : 0);
}

bool ServiceContext::ready() const
{
    return ready_.load();
}

bool ServiceContext::healthy() const
{
    const long long now = now_();
    const long long last = last_tick_ms_.load();
    if (last == 0) return now - started_ms_ < kStartupGraceMs;
    return now - last < kHealthyTickMs;
}

int run_service(int argc, char** argv, const std::string& role, const ServiceFactory& factory)
{
    bool logging = false;
    try {
        install_signal_handlers();
        Config config;
        const Status loaded = config.load(argc, argv);
        if (!loaded.is_ok()) {
            init_json_logging(role, role, "info");
            ex2d::logger()->error("configuration error: {}", loaded.message());
            return kExitUsage;
        }
        if (config.help_requested()) {
            std::cout << config.help_text(argc > 0 ? argv[0] : role) << std::flush;
            return kExitOk;
        }
        if (config.print_config_requested()) {
            std::cout << config.to_yaml() << std::flush;
            return kExitOk;
        }
        ServiceContext ctx(role, std::move(config));
        init_json_logging(role, ctx.name(), ctx.settings().service.log_level);
        logging = true;
        return run_loaded(ctx, factory);
    } catch (const std::exception& e) {
        if (!logging) init_json_logging(role, role, "info");
        ex2d::logger()->critical("exception: {}", e.what());
        return kExitRuntime;
    }
}

}  // namespace ex2d::service
