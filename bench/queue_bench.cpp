// SPDX-License-Identifier: BSD-3-Clause
// ex2d-queue-bench: drives many small jobs through the real control plane (queue, leases,
// fencing, frame and exposure state) with hundreds of simulated workers and a no-op
// extraction, and reports what Redis sustains and where it would saturate.
// docs/control-plane-scale.md has the measured figures.

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_support.hpp"
#include "fleet_sim.hpp"
#include "verify.hpp"

namespace {

using namespace ex2d;
using namespace ex2d::bench;
using service::ControlPlane;
using service::RedisClient;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Run {
    BenchOptions o;
    service::RedisOptions redis;
    std::string ns, lane, campaign, stream;
    double submit_wall = 0, process_wall = 0;
    long long submit_skipped = 0, submit_errors = 0;
    bool timed_out = false;
    OpTimes times;
    AofMeter aof_submit, aof_process;
    // INFO when 10% and 90% of the jobs are done: the steady phase, without the start (1000
    // connections opening) and the tail (jobs waiting for the reaper).
    Snapshot steady[2];
    double steady_t[2] = {0, 0};
    long long steady_n[2] = {0, 0};
};

// Submits from several connections: each submit is two round trips (XGROUP CREATE, the script)
// and the API has no pipelining, so one connection would measure loopback latency only.
void submit_all(Run& run, RedisClient& admin)
{
    std::vector<OpTimes> times(std::size_t(run.o.submitters));
    std::atomic<long long> skipped{0}, errors{0}, done{0};
    std::atomic<int> running{run.o.submitters};
    std::vector<std::thread> threads;
    threads.reserve(std::size_t(run.o.submitters));
    const auto t0 = Clock::now();
    for (int t = 0; t < run.o.submitters; ++t) {
        threads.emplace_back([&, t] {
            RedisClient redis(run.redis);
            ControlPlane plane(redis, run.ns);
            for (long long i = t; i < run.o.jobs; i += run.o.submitters) {
                const auto start = Clock::now();
                auto queued = plane.submit(make_job(i, run.lane, run.campaign, run.stream), false);
                times[std::size_t(t)].add(op_submit, start);
                if (!queued.is_ok())
                    ++errors;
                else if (!queued.value())
                    ++skipped;
                ++done;
            }
            --running;
        });
    }
    while (running > 0) {
        auto s = snapshot(admin);
        if (s.is_ok()) run.aof_submit.sample(s.value(), done);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    for (auto& t : threads) t.join();
    run.submit_wall = seconds_since(t0);
    run.submit_skipped = skipped;
    run.submit_errors = errors;
    for (const auto& t : times) run.times.merge(t);
}

void process_all(Run& run, Fleet& fleet, RedisClient& admin)
{
    std::vector<OpTimes> times(std::size_t(run.o.workers) + 1);
    std::vector<std::thread> threads;
    threads.reserve(std::size_t(run.o.workers) + 1);
    fleet.t0 = Clock::now();
    for (int k = 0; k < run.o.workers; ++k) {
        threads.emplace_back([&, k] { fleet.run_worker(k, times[std::size_t(k)]); });
    }
    threads.emplace_back([&] { fleet.run_reaper(times.back()); });
    double next_report = run.o.progress_s;
    long long last_n = 0;
    double last_t = 0;
    int steady_taken = 0;
    for (int tick = 0; !fleet.stop; ++tick) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (tick % 5 == 0) {
            auto s = snapshot(admin);
            if (s.is_ok()) run.aof_process.sample(s.value(), fleet.finished);
        }
        const double t = seconds_since(fleet.t0);
        if (t > run.o.max_seconds) {
            run.timed_out = true;
            fleet.stop = true;
        }
        const long long mark = steady_taken == 0 ? run.o.jobs / 10 : run.o.jobs * 9 / 10;
        if (steady_taken < 2 && fleet.finished >= mark) {
            auto s = snapshot(admin);
            if (s.is_ok()) {
                run.steady_t[steady_taken] = seconds_since(fleet.t0);
                run.steady_n[steady_taken] = fleet.finished;
                run.steady[steady_taken++] = s.value();
            }
        }
        if (t < next_report) continue;
        const long long n = fleet.finished;
        std::printf(
            "  %6.1f s  finished %7lld  %8.0f jobs/s (last %.0f s: %.0f)  redelivered %lld"
            "  died %lld\n",
            t, n, double(n) / t, t - last_t, double(n - last_n) / (t - last_t),
            fleet.redelivered.load(), fleet.died.load());
        std::fflush(stdout);
        last_n = n;
        last_t = t;
        next_report += run.o.progress_s;
    }
    for (auto& t : threads) t.join();
    run.process_wall =
        fleet.t_last_us >= 0 ? double(fleet.t_last_us) / 1e6 : seconds_since(fleet.t0);
    for (const auto& t : times) run.times.merge(t);
}

void print_latencies(OpTimes& times)
{
    std::printf(
        "\nlatency per operation (ms; take = the reader path: SMEMBERS, XREADGROUP per "
        "lane, take script)\n  %-13s %9s %8s %8s %8s\n",
        "operation", "count", "p50", "p99", "max");
    for (int op = 0; op < op_count; ++op) {
        auto& v = times.us[std::size_t(op)];
        if (v.empty()) continue;
        const double p50 = quantile_ms(v, 0.50), p99 = quantile_ms(v, 0.99);
        std::printf("  %-13s %9zu %8.3f %8.3f %8.1f\n", op_name(op), v.size(), p50, p99,
                    v.back() / 1000.0);
    }
}

// The numbers that say how far the control plane goes. Redis runs commands on one thread, so
// its main-thread CPU seconds per job bound the jobs per second whatever the clients do.
void print_saturation(const Run& run, const Snapshot& s0, const Snapshot& s1, const Snapshot& s2)
{
    const double n = double(run.o.jobs);
    const double cpu_submit = (s1.cpu_main - s0.cpu_main) / n;
    double cpu_process = (s2.cpu_main - s1.cpu_main) / n;
    double wall = run.process_wall, share_all = (s2.cpu_all - s1.cpu_all) / wall;
    double share_main = (s2.cpu_main - s1.cpu_main) / wall;
    const long long steady_jobs = run.steady_n[1] - run.steady_n[0];
    const bool steady = steady_jobs > 0 && run.steady_t[1] > run.steady_t[0];
    if (steady) {
        wall = run.steady_t[1] - run.steady_t[0];
        cpu_process = (run.steady[1].cpu_main - run.steady[0].cpu_main) / double(steady_jobs);
        share_all = (run.steady[1].cpu_all - run.steady[0].cpu_all) / wall;
        share_main = (run.steady[1].cpu_main - run.steady[0].cpu_main) / wall;
    }
    const double cpu_job = cpu_submit + cpu_process;
    const double max_jobs = 1.0 / cpu_job;
    std::printf("\nwhere it saturates (%s)\n",
                steady ? "steady phase, 10%..90% finished" : "whole processing phase");
    std::printf("  Redis main-thread CPU per job: %.1f us (submit %.1f + processing %.1f)\n",
                cpu_job * 1e6, cpu_submit * 1e6, cpu_process * 1e6);
    std::printf(
        "  ceiling: ~%.0f jobs/s = %.1f M frames/hour; 300,000 frames in %.0f s (%.1f min)"
        "\n",
        max_jobs, max_jobs * 3600 / 1e6, 300000 * cpu_job, 300000 * cpu_job / 60);
    std::printf("  (with submission done beforehand, processing alone: ~%.0f jobs/s)\n",
                1.0 / cpu_process);
    std::printf(
        "  workers one Redis keeps busy: %.0f at 1 s per frame (the GPU goal), %.0f at "
        "13 s per frame (a 2-core CPU node)\n",
        max_jobs * 1.0, max_jobs * 13.0);
    std::printf("  Redis CPU share while processing: %.2f (main thread %.2f) of one core\n",
                share_all, share_main);
    if (share_main >= 0.85) {
        std::printf("  -> Redis is the bottleneck of this run: its one thread is nearly busy\n");
    } else {
        std::printf(
            "  -> the clients are the bottleneck of this run (%d simulated processes "
            "share %u cores with Redis); Redis had %.0f%% of its thread to spare\n",
            run.o.workers, std::thread::hardware_concurrency(), 100 * (1 - share_main));
    }
}

int report(Run& run, Fleet& fleet, const Snapshot& s0, const Snapshot& s1, const Snapshot& s2,
           const Verification& v, long long zombie_accepted)
{
    const double n = double(run.o.jobs), per100k = 1e5 / n;
    std::printf("\nsubmit: %lld jobs in %.1f s (%.0f jobs/s, %d connections)\n", run.o.jobs,
                run.submit_wall, n / run.submit_wall, run.o.submitters);
    const double steady_s = double(fleet.t_90_us - fleet.t_10_us) / 1e6;
    const double steady = steady_s > 0 ? 0.8 * n / steady_s : 0.0;
    std::printf(
        "process: wall %.1f s, sustained %.0f jobs/s (10%%..90%% finished), overall "
        "%.0f jobs/s\n",
        run.process_wall, steady, double(fleet.finished) / run.process_wall);
    std::printf(
        "\nround trips per job (client commands, from INFO commandstats): submit %.2f, "
        "processing %.2f (%lld empty polls in all)\n",
        double(s1.client_calls() - s0.client_calls()) / n,
        double(s2.client_calls() - s1.client_calls()) / n, fleet.empty_polls.load());
    std::printf("Redis commands per job, those run by scripts included: %.1f\n",
                double(s2.all_calls() - s0.all_calls()) / n);
    // Time inside the commands the clients send (a script's time includes its commands); the
    // rest of the main thread's CPU is sockets, protocol parsing and the AOF.
    std::printf("Redis time inside client commands per job (us):");
    double inside = 0;
    for (const auto& [name, cu] : s2.commands) {
        const auto it = s0.commands.find(name);
        const std::pair<long long, long long> before =
            it == s0.commands.end() ? std::pair<long long, long long>{} : it->second;
        const long long calls = cu.first - before.first, usec = cu.second - before.second;
        if (!Snapshot::is_client_command(name) || calls == 0) continue;
        std::printf(" %s %.1f", name.c_str() + 8, double(usec) / n);
        inside += double(usec) / n;
    }
    std::printf("; in all %.1f of %.1f us of main-thread CPU\n", inside,
                (s2.cpu_main - s0.cpu_main) * 1e6 / n);
    std::printf(
        "\nRedis CPU per 100,000 jobs: %.1f s (main thread %.1f s, of which user %.1f s; "
        "submit %.1f s, processing %.1f s); AOF rewrite children %.1f s, %lld rewrites\n",
        (s2.cpu_all - s0.cpu_all) * per100k, (s2.cpu_main - s0.cpu_main) * per100k,
        (s2.cpu_main_user - s0.cpu_main_user) * per100k, (s1.cpu_all - s0.cpu_all) * per100k,
        (s2.cpu_all - s1.cpu_all) * per100k, (s2.cpu_children - s0.cpu_children) * per100k,
        s2.aof_rewrites - s0.aof_rewrites);
    const double mib = 1024.0 * 1024.0;
    std::printf(
        "Redis memory per 100,000 jobs: %.1f MiB (used_memory growth); kept after the "
        "run:\n",
        double(s2.used_memory - s0.used_memory) * per100k / mib);
    std::printf("  job stream: XLEN %lld (acknowledged entries stay until trimmed), %.1f MiB\n",
                v.stream_length, double(v.stream_bytes) * per100k / mib);
    std::printf("  frame hashes: %.0f bytes each (%s), %.1f MiB\n", v.frame_bytes,
                v.frame_encoding.c_str(), v.frame_bytes * n * per100k / mib);
    std::printf("  exposure hashes: %.0f bytes each, %lld of them, %.2f MiB\n", v.exposure_bytes,
                v.exposures, v.exposure_bytes * double(v.exposures) * per100k / mib);
    std::printf("  events stream: XLEN %lld (MAXLEN ~ 100000), %.1f MiB in all\n", v.events_length,
                double(v.events_bytes) / mib);
    const double aof_job = run.aof_submit.bytes_per_job() + run.aof_process.bytes_per_job();
    std::printf(
        "AOF appended: %.1f KiB per job = %.0f MiB per 100,000 jobs (submit %.1f KiB, "
        "processing %.1f KiB per job); %.1f MiB at the end, after %lld automatic "
        "rewrites\n",
        aof_job / 1024, aof_job * 1e5 / mib, run.aof_submit.bytes_per_job() / 1024,
        run.aof_process.bytes_per_job() / 1024, double(s2.aof_size) / mib,
        s2.aof_rewrites - s0.aof_rewrites);

    print_latencies(run.times);
    print_saturation(run, s0, s1, s2);

    const long long lost = run.o.jobs - fleet.finished;
    std::printf(
        "\ncounts: submitted %lld (skipped %lld), finished %lld, died %lld, "
        "redelivered %lld"
        " (done on a later delivery per Redis: %lld), dead-lettered %lld, leases lost by "
        "live holders %lld, client errors %lld\n",
        run.o.jobs - run.submit_skipped - run.submit_errors, run.submit_skipped,
        fleet.finished.load(), fleet.died.load(), fleet.redelivered.load(), v.frames_later_attempt,
        fleet.dead_lettered.load(), fleet.fence_refused.load(),
        fleet.errors.load() + run.submit_errors);
    struct Check {
        const char* what;
        long long value;
    };
    const Check checks[] = {{"lost (submitted - finished)", lost},
                            {"duplicates finished", fleet.duplicates},
                            {"frames not done in Redis", v.frames_not_done},
                            {"exposures not done (or counters off)", v.exposures_not_done},
                            {"XPENDING count", v.pending},
                            {"stale finishes accepted (fencing)", zombie_accepted},
                            {"dead-lettered", fleet.dead_lettered},
                            {"submissions not queued", run.submit_skipped + run.submit_errors},
                            {"timed out", run.timed_out ? 1 : 0}};
    int failed = 0;
    for (const auto& c : checks) {
        std::printf("check %-40s %8lld  %s\n", c.what, c.value, c.value == 0 ? "ok" : "FAILED");
        failed += c.value != 0;
    }
    return failed == 0 ? 0 : 1;
}

int run_bench(Run& run, bool own_server)
{
    RedisClient admin(run.redis);
    if (Status s = service::check_redis_durability(admin); !s.is_ok()) {
        std::fprintf(stderr, "warning: %s\n", s.message().c_str());
        if (own_server) return 2;
    }
    ControlPlane plane(admin, run.ns);
    run.stream =
        run.lane == "nightly" ? plane.nightly_stream() : plane.campaign_stream(run.campaign);
    // The nightly stream exists in every fleet; readers look at it before any campaign.
    if (Status s = plane.ensure_group(plane.nightly_stream()); !s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        return 2;
    }
    if (run.lane == "campaign") {
        (void)admin.command({"HSET", plane.key("campaign:" + run.campaign), "state", "active",
                             "created_at", std::to_string(service::unix_ms()), "nframes",
                             std::to_string(run.o.jobs)});
        (void)admin.command({"SADD", plane.key("campaigns"), run.campaign});
        (void)admin.command({"SADD", plane.key("campaigns:active"), run.campaign});
    }
    std::printf(
        "ex2d-queue-bench: %lld jobs (%lld exposures x %d cameras), %d simulated workers, "
        "lane %s, Redis %s:%d, namespace %s\n",
        run.o.jobs, (run.o.jobs + kCameras - 1) / kCameras, kCameras, run.o.workers,
        run.lane.c_str(), run.redis.host.c_str(), run.redis.port, run.ns.c_str());
    auto s0 = snapshot(admin);
    submit_all(run, admin);
    auto s1 = snapshot(admin);
    std::printf("submitted in %.1f s; processing\n", run.submit_wall);
    Fleet fleet(run.o, run.redis, run.ns, run.stream);
    process_all(run, fleet, admin);
    auto s2 = snapshot(admin);
    if (!s0.is_ok() || !s1.is_ok() || !s2.is_ok()) {
        std::fprintf(stderr, "redis INFO failed\n");
        return 2;
    }
    const long long zombie_accepted = fleet.finish_as_zombies();
    auto v = verify(run.redis, run.ns, run.stream, run.lane, run.campaign, run.o.jobs, 8);
    if (!v.is_ok()) {
        std::fprintf(stderr, "%s\n", v.status().message().c_str());
        return 2;
    }
    const int rc =
        report(run, fleet, s0.value(), s1.value(), s2.value(), v.value(), zombie_accepted);
    if (!own_server) (void)delete_namespace(admin, run.ns);
    return rc;
}

}  // namespace

int main(int argc, char** argv)
{
    Run run;
    std::string server = "redis-server";
    std::vector<std::string> server_config;
    int port = 0;
    CLI::App app{"ex2d-queue-bench: load test of the Redis control plane with simulated workers"};
    app.add_option("--jobs", run.o.jobs, "Jobs to drive through the queue")->capture_default_str();
    app.add_option("--workers", run.o.workers, "Simulated workers (threads, one connection each)")
        ->capture_default_str();
    app.add_option("--submitters", run.o.submitters, "Connections submitting")
        ->capture_default_str();
    app.add_option("--die-fraction", run.o.die_fraction,
                   "Fraction of jobs whose first holder dies holding them")
        ->capture_default_str();
    app.add_option("--lease-ms", run.o.lease_ms, "Lease given to the reaper")
        ->capture_default_str();
    app.add_option("--reap-interval-ms", run.o.reap_interval_ms, "Reaper period")
        ->capture_default_str();
    app.add_option("--work-ms", run.o.work_ms, "Sleep of the no-op extraction")
        ->capture_default_str();
    app.add_option("--lane", run.lane, "campaign or nightly")
        ->check(CLI::IsMember({"campaign", "nightly"}));
    app.add_option("--progress-s", run.o.progress_s, "Seconds between progress lines")
        ->capture_default_str();
    app.add_option("--max-seconds", run.o.max_seconds, "Give up processing after this")
        ->capture_default_str();
    app.add_option("--redis-port", port,
                   "Use the Redis on this loopback port (keys under a fresh "
                   "namespace, deleted at the end) instead of starting one");
    app.add_option("--redis-server", server, "redis-server binary to start")->capture_default_str();
    app.add_option("--redis-config", server_config,
                   "Extra setting of the started server, name=value (repeatable)");
    CLI11_PARSE(app, argc, argv);
    if (run.o.jobs < 1 || run.o.workers < 1 || run.o.submitters < 1 || run.o.lease_ms < 1) {
        std::fprintf(stderr, "--jobs, --workers, --submitters and --lease-ms must be positive\n");
        return 2;
    }
    if (run.lane.empty()) run.lane = "campaign";
    run.campaign = run.lane == "nightly" ? "nightly" : "bench";
    run.redis.timeout_ms = 60000;  // a timeout re-sends a finish, whose retry reads "not pending"
    LocalRedis local;
    if (port == 0) {
        if (Status s = local.start(server, server_config); !s.is_ok()) {
            std::fprintf(stderr, "%s\n", s.message().c_str());
            return 2;
        }
        run.redis.port = local.port();
        run.ns = "ex2d";
    } else {
        run.redis.port = port;
        run.ns = "ex2dbench" + std::to_string(service::unix_ms());
    }
    return run_bench(run, port == 0);
}
