// SPDX-License-Identifier: BSD-3-Clause
// The HTTP endpoint (status codes, Content-Length), the Prometheus exposition (HELP/TYPE per
// family, names, counters in _total) and the service lifecycle behind /healthz and /readyz.
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <netinet/in.h>
#include <regex>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/service/http_server.hpp"
#include "ex2d/service/metrics.hpp"
#include "ex2d/service/service.hpp"

namespace {

using ex2d::service::HttpResponse;
using ex2d::service::HttpServer;
using ex2d::service::Metrics;
using ex2d::service::ServiceContext;

struct Reply {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
};

/// Sends `request` as is to 127.0.0.1:port and parses the reply read until the server closes.
Reply raw_request(int port, const std::string& request)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(std::uint16_t(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    Reply reply;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(fd);
        return reply;
    }
    ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string data;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) data.append(buffer, n);
    ::close(fd);

    const auto end = data.find("\r\n\r\n");
    if (end == std::string::npos) return reply;
    std::istringstream head(data.substr(0, end));
    std::string line, version;
    std::getline(head, line);
    std::istringstream(line) >> version >> reply.status;
    while (std::getline(head, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string value = line.substr(colon + 1);
        value = value.substr(value.find_first_not_of(' '));
        if (!value.empty() && value.back() == '\r') value.pop_back();
        reply.headers[line.substr(0, colon)] = value;
    }
    reply.body = data.substr(end + 4);
    return reply;
}

Reply get(int port, const std::string& path)
{
    return raw_request(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

TEST(HttpServerTest, StatusCodesAndContentLength)
{
    HttpServer server;
    server.handle("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok"}; });
    server.handle("/down", [] { return HttpResponse{503, "text/plain", "no\n"}; });
    server.handle("/throws", []() -> HttpResponse { throw std::runtime_error("boom"); });
    ASSERT_TRUE(server.start("127.0.0.1", 0).is_ok());
    ASSERT_GT(server.port(), 0);

    auto reply = get(server.port(), "/healthz");
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, "ok");
    EXPECT_EQ(reply.headers["Content-Length"], "2");
    EXPECT_EQ(reply.headers["Content-Type"], "text/plain; charset=utf-8");
    EXPECT_EQ(reply.headers["Connection"], "close");

    EXPECT_EQ(get(server.port(), "/healthz?verbose=1").status, 200);
    EXPECT_EQ(get(server.port(), "/down").status, 503);
    EXPECT_EQ(get(server.port(), "/nope").status, 404);
    EXPECT_EQ(get(server.port(), "/throws").status, 500);
    EXPECT_EQ(get(server.port(), "/throws").body, "boom\n");
    reply = raw_request(server.port(), "POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(reply.status, 405);
    EXPECT_EQ(reply.headers["Allow"], "GET");
    // Garbage gets no answer (libmicrohttpd closes the connection), and costs nothing more.
    EXPECT_EQ(raw_request(server.port(), "garbage\r\n\r\n").status, 0);
    EXPECT_EQ(
        raw_request(server.port(), "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n").status,
        414);
    // An incomplete request is dropped after 1 s, without an answer.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(raw_request(server.port(), "GET /healthz HTTP/1.1\r\n").status, 0);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    EXPECT_EQ(get(server.port(), "/healthz").status, 200);

    const int port = server.port();
    server.stop();
    EXPECT_EQ(get(port, "/healthz").status, 0);  // connection refused
}

/// An open TCP connection to 127.0.0.1:port that sends nothing (a scanner, a load balancer's
/// spare connection, a client that hung).
int idle_connection(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(std::uint16_t(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Kubernetes probes /healthz with a 1 s timeout by default: a server that serves one
// connection at a time answered after 5 s with a few idle connections open.
TEST(HttpServerTest, ProbesAreAnsweredWithin100MsWith50IdleConnectionsOpen)
{
    HttpServer server;
    server.handle("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok"}; });
    server.handle("/metrics", [] {
        return HttpResponse{200, "text/plain; version=0.0.4", "up 1\n"};
    });
    ASSERT_TRUE(server.start("127.0.0.1", 0).is_ok());
    std::vector<int> idle;
    for (int i = 0; i < 50; ++i) {
        const int fd = idle_connection(server.port());
        ASSERT_GE(fd, 0) << "idle connection " << i;
        idle.push_back(fd);
    }
    // Half of them also sent part of a request, and stay silent after it.
    for (std::size_t i = 0; i < idle.size(); i += 2) ::send(idle[i], "GET /he", 7, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto slowest = std::chrono::steady_clock::duration::zero();
    for (int probe = 0; probe < 20; ++probe) {
        const auto start = std::chrono::steady_clock::now();
        const Reply reply = get(server.port(), probe % 2 ? "/metrics" : "/healthz");
        slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
        EXPECT_EQ(reply.status, 200) << "probe " << probe;
    }
    const double slowest_ms = std::chrono::duration<double, std::milli>(slowest).count();
    std::printf("20 probes with 50 idle connections open: slowest %.2f ms\n", slowest_ms);
    EXPECT_LT(slowest_ms, 100.0);
    for (int fd : idle) ::close(fd);
}

TEST(HttpServerTest, BindFailureIsReported)
{
    HttpServer first;
    ASSERT_TRUE(first.start("127.0.0.1", 0).is_ok());
    HttpServer second;
    const auto status = second.start("127.0.0.1", first.port());
    EXPECT_FALSE(status.is_ok());
    EXPECT_NE(status.message().find("cannot bind"), std::string::npos) << status.message();
    EXPECT_FALSE(HttpServer().start("no.such.host.invalid", 0).is_ok());
}

/// Families of an exposition: name -> {help, type}, and every sample's family.
struct Exposition {
    std::map<std::string, std::string> help, type;
    std::map<std::string, double> samples;  ///< "name{labels}" -> value
};

Exposition parse_exposition(const std::string& text)
{
    Exposition e;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) == 0) {
            const auto name = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_EQ(e.help.count(name), 0u) << "HELP twice for " << name;
            e.help[name] = line.substr(8 + name.size());
        } else if (line.rfind("# TYPE ", 0) == 0) {
            const auto name = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_EQ(e.type.count(name), 0u) << "TYPE twice for " << name;
            e.type[name] = line.substr(8 + name.size());
        } else if (!line.empty()) {
            const auto space = line.rfind(' ');
            e.samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
        }
    }
    return e;
}

TEST(MetricsTest, ExpositionFollowsTheConventions)
{
    Metrics metrics("worker");
    metrics.frames("written").Increment(3);
    metrics.frames("failed").Increment();
    metrics.stage_seconds("extract").Observe(0.2);
    metrics.stage_seconds("extract").Observe(42);
    metrics.bytes("received").Increment(1024);
    metrics.messages_dropped("bad_magic").Increment();
    metrics.leases("renewed").Increment(2);
    metrics.queue_depth("default").Set(17);
    metrics.redis_reconnects().Increment();
    metrics.frames_in_memory().Set(2);
    metrics.device_memory_bytes().Set(3e9);
    metrics.ready().Set(1);
    metrics.device_failures().Increment();
    const std::string text = metrics.serialize();
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');

    const Exposition e = parse_exposition(text);
    EXPECT_EQ(e.type.size(), 12u);
    const std::regex name_pattern("^ex2d_[a-z0-9_]+$");
    for (const auto& [name, type] : e.type) {
        EXPECT_TRUE(std::regex_match(name, name_pattern)) << name;
        EXPECT_EQ(e.help.count(name), 1u) << name;
        if (type == "counter") {
            EXPECT_EQ(name.substr(name.size() - 6), "_total") << name;
        }
    }
    for (const auto& [series, value] : e.samples) {
        std::string family = series.substr(0, series.find('{'));
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
            const std::string s = suffix;
            if (e.type.count(family) == 0 && family.size() > s.size() &&
                family.compare(family.size() - s.size(), s.size(), s) == 0) {
                family.resize(family.size() - s.size());
            }
        }
        EXPECT_EQ(e.type.count(family), 1u) << "no TYPE for " << series;
    }
    EXPECT_EQ(e.type.at("ex2d_stage_seconds"), "histogram");
    EXPECT_EQ(e.type.at("ex2d_queue_depth"), "gauge");
    EXPECT_EQ(e.samples.at("ex2d_frames_total{role=\"worker\",state=\"written\"}"), 3);
    EXPECT_EQ(e.samples.at("ex2d_frames_total{role=\"worker\",state=\"failed\"}"), 1);
    EXPECT_EQ(
        e.samples.at("ex2d_stage_seconds_bucket{role=\"worker\",stage=\"extract\",le=\"0.3\"}"), 1);
    EXPECT_EQ(
        e.samples.at("ex2d_stage_seconds_bucket{role=\"worker\",stage=\"extract\",le=\"100\"}"), 2);
    EXPECT_EQ(e.samples.at("ex2d_stage_seconds_count{role=\"worker\",stage=\"extract\"}"), 2);
    EXPECT_EQ(e.samples.at("ex2d_bytes_total{role=\"worker\",direction=\"received\"}"), 1024);
    EXPECT_EQ(e.samples.at("ex2d_queue_depth{role=\"worker\",lane=\"default\"}"), 17);
    EXPECT_EQ(e.samples.at("ex2d_redis_reconnects_total{role=\"worker\"}"), 1);
    EXPECT_EQ(e.samples.at("ex2d_up{role=\"worker\"}"), 1);
    EXPECT_EQ(e.samples.at("ex2d_device_failures_total{role=\"worker\"}"), 1);
    EXPECT_EQ(e.samples.at("ex2d_build_info{version=\"" EX2D_VERSION "\"}"), 1);
}

// The families give one metric per label value (prometheus-cpp's Family::Add returns the
// metric already added with those labels), also through a copy of Metrics.
TEST(MetricsTest, LabelledMetricsAreOnePerLabelAndThreadSafe)
{
    Metrics metrics("reader");
    EXPECT_EQ(&metrics.frames("read"), &metrics.frames("read"));
    EXPECT_NE(&metrics.frames("read"), &metrics.frames("skipped"));
    EXPECT_EQ(&metrics.stage_seconds("decode"), &metrics.stage_seconds("decode"));
    Metrics copy = metrics;
    EXPECT_EQ(&copy.frames("read"), &metrics.frames("read"));
    copy.stage_seconds("decode").Observe(0.5);
    metrics.stage_seconds("decode").Observe(2);
    const std::string text = metrics.serialize();
    EXPECT_NE(text.find("ex2d_stage_seconds_count{role=\"reader\",stage=\"decode\"} 2"),
              std::string::npos)
        << text;
    std::vector<std::thread> threads;
    threads.reserve(8);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&metrics] {
            for (int i = 0; i < 1000; ++i) metrics.leases(i % 2 ? "renewed" : "lost").Increment();
        });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(metrics.leases("renewed").Value(), 4000);
    EXPECT_EQ(metrics.leases("lost").Value(), 4000);
}

TEST(HttpLifecycleTest, HealthyUntilTicksStop)
{
    long long now_ms = 1000;
    ServiceContext ctx("worker", ex2d::service::Config(), [&now_ms] { return now_ms; });
    EXPECT_EQ(ctx.name().rfind("worker-" + ctx.host() + "-", 0), 0u) << ctx.name();
    EXPECT_EQ(ctx.name(), "worker-" + ctx.host() + "-" + std::to_string(::getpid()));
    now_ms += 29999;
    EXPECT_TRUE(ctx.healthy());  // start-up grace of 30 s before the first tick
    ctx.tick();
    now_ms += 2999;
    EXPECT_TRUE(ctx.healthy());
    now_ms += 1;
    EXPECT_FALSE(ctx.healthy());  // 3 s without a tick
    ctx.tick();
    EXPECT_TRUE(ctx.healthy());
    EXPECT_FALSE(ctx.ready());
    ctx.set_ready(true);
    EXPECT_TRUE(ctx.ready());
    EXPECT_EQ(ctx.metrics().ready().Value(), 1);
    EXPECT_FALSE(ctx.stop_requested());
    ctx.request_stop();
    EXPECT_TRUE(ctx.stop_requested());
}

TEST(HttpLifecycleTest, NoFirstTickWithinTheStartupGraceIsUnhealthy)
{
    long long now_ms = 5000;
    ServiceContext ctx("reader", ex2d::service::Config(), [&now_ms] { return now_ms; });
    now_ms += 29999;
    EXPECT_TRUE(ctx.healthy());
    now_ms += 1;
    EXPECT_FALSE(ctx.healthy());
}

/// Probes its own endpoint from the main loop: readiness follows set_ready and the stop.
class ProbeService : public ex2d::service::Service {
public:
    struct Record {
        std::vector<int> codes;
        std::string metrics_type;
        double drain_s = -1;
        int steps = 0;
    };
    ProbeService(ServiceContext& ctx, Record& record) : ctx_(ctx), record_(record) {}
    ex2d::Status start() override { return ex2d::Status::ok(); }
    bool step() override
    {
        ++record_.steps;
        const int port = std::stoi(ctx_.http_address().substr(ctx_.http_address().rfind(':') + 1));
        record_.codes.push_back(get(port, "/readyz").status);
        ctx_.set_ready(true);
        record_.codes.push_back(get(port, "/readyz").status);
        record_.codes.push_back(get(port, "/healthz").status);
        const Reply metrics = get(port, "/metrics");
        record_.codes.push_back(metrics.status);
        record_.metrics_type = metrics.headers.at("Content-Type");
        ctx_.request_stop();
        record_.codes.push_back(get(port, "/readyz").status);
        return true;
    }
    void drain(std::chrono::steady_clock::time_point deadline) override
    {
        record_.drain_s =
            std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        record_.codes.push_back(ctx_.ready() ? 1 : 0);
    }

private:
    ServiceContext& ctx_;
    Record& record_;
};

int run(std::vector<std::string> args, const ex2d::service::ServiceFactory& factory)
{
    args.insert(args.begin(), "ex2d-test");
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& arg : args) argv.push_back(arg.data());
    return ex2d::service::run_service(int(argv.size()), argv.data(), "worker", factory);
}

TEST(HttpLifecycleTest, RunServiceStartsStepsAndDrains)
{
    ProbeService::Record record;
    const int code =
        run({"--service.drain_timeout_s=2", "--service.name=probe"},
            [&record](ServiceContext& ctx) { return std::make_unique<ProbeService>(ctx, record); });
    EXPECT_EQ(code, 0);
    EXPECT_EQ(record.steps, 1);
    EXPECT_EQ(record.codes, (std::vector<int>{503, 200, 200, 200, 503, 0}));
    EXPECT_EQ(record.metrics_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NEAR(record.drain_s, 2.0, 0.5);
}

TEST(HttpLifecycleTest, ExitCodes)
{
    int created = 0;
    const auto factory = [&created](ServiceContext& ctx) {
        ++created;
        static ProbeService::Record unused;
        return std::make_unique<ProbeService>(ctx, unused);
    };
    EXPECT_EQ(run({"--redis.port=abc"}, factory), ex2d::kExitUsage);
    EXPECT_EQ(run({"--help"}, factory), ex2d::kExitOk);
    EXPECT_EQ(run({"--print-config"}, factory), ex2d::kExitOk);
    EXPECT_EQ(created, 0);

    struct Failing : ex2d::service::Service {
        explicit Failing(bool throws) : throws_(throws) {}
        ex2d::Status start() override
        {
            if (throws_) throw std::runtime_error("device fault");
            return ex2d::Status::invalid("redis.host: cannot connect");
        }
        bool step() override { return false; }
        void drain(std::chrono::steady_clock::time_point) override {}
        bool throws_;
    };
    EXPECT_EQ(run({}, [](ServiceContext&) { return std::make_unique<Failing>(false); }),
              ex2d::kExitUsage);
    EXPECT_EQ(run({}, [](ServiceContext&) { return std::make_unique<Failing>(true); }),
              ex2d::kExitRuntime);
}

/// SIGTERM ends the main loop and the process exits 0 after the drain (in a child process,
/// since the signal flag is process-wide).
bool g_drained = false;

TEST(HttpLifecycleTest, SigtermDrainsAndExitsZero)
{
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    struct Signalled : ex2d::service::Service {
        ex2d::Status start() override { return ex2d::Status::ok(); }
        bool step() override
        {
            std::raise(SIGTERM);
            return true;
        }
        void drain(std::chrono::steady_clock::time_point) override { g_drained = true; }
    };
    const auto child = [] {
        const int code = run({}, [](ServiceContext&) { return std::make_unique<Signalled>(); });
        std::exit(code == 0 && g_drained ? 0 : 10 + code);
    };
    EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
