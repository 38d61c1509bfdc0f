// SPDX-License-Identifier: BSD-3-Clause
// The chaos soak (docs/chaos-soak.md): hundreds of small frames through a real fleet while
// kill -9, SIGSTOP and Redis restarts hit every role at random, then the fault tests' checker
// (lost, duplicate outputs, partial files) and recovery times. A separate command, not a ctest
// test: it runs for minutes and its figures are recorded by hand.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ex2d/logging.hpp"
#include "ex2d/service/control_plane.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

using Clock = std::chrono::steady_clock;

// Ctrl-C or a timeout ends the soak through its report, so that the fleet's destructor kills
// the services it started instead of leaving them orphaned.
volatile std::sig_atomic_t g_stop = 0;
void on_signal(int)
{
    g_stop = 1;
}

struct Options {
    int frames = 300;
    int readers = 2, workers = 3, writers = 2;
    double duration_limit_s = 900;
    unsigned seed = std::random_device{}();
    double faults_per_minute = 20;
    bool keep = false;
    double lease_s = 2;
    double reaper_interval_s = 0.5;
    // At 150 ms the 300 frames pass in about 30 s and meet only ~9 faults; 1 s per extraction
    // makes the default run last a few minutes with ~45 faults, each landing mid-frame.
    int extract_delay_ms = 1000;
    int write_delay_ms = 100;
};

bool parse(int argc, char** argv, Options& o)
{
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--keep") {
            o.keep = true;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char* v = argv[++i];
        if (flag == "--frames")
            o.frames = std::atoi(v);
        else if (flag == "--readers")
            o.readers = std::atoi(v);
        else if (flag == "--workers")
            o.workers = std::atoi(v);
        else if (flag == "--writers")
            o.writers = std::atoi(v);
        else if (flag == "--duration-limit")
            o.duration_limit_s = std::atof(v);
        else if (flag == "--seed")
            o.seed = unsigned(std::strtoul(v, nullptr, 10));
        else if (flag == "--faults-per-minute")
            o.faults_per_minute = std::atof(v);
        else if (flag == "--lease-s")
            o.lease_s = std::atof(v);
        else if (flag == "--reaper-interval-s")
            o.reaper_interval_s = std::atof(v);
        else if (flag == "--extract-delay-ms")
            o.extract_delay_ms = std::atoi(v);
        else if (flag == "--write-delay-ms")
            o.write_delay_ms = std::atoi(v);
        else
            return false;
    }
    return o.frames > 0 && o.readers > 0 && o.workers > 0 && o.writers > 0 &&
           o.faults_per_minute > 0 && o.lease_s > 0 && o.reaper_interval_s > 0 &&
           o.extract_delay_ms >= 0 && o.write_delay_ms >= 0;
}

std::string expid8(int expid)
{
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08d", expid);
    return buf;
}

// One place in the fleet, filled again under a new name after a kill, as a supervisor
// (Slurm, Kubernetes) would.
struct Slot {
    explicit Slot(std::string r) : role(std::move(r)) {}
    std::string role;
    Process* proc = nullptr;  // null while it waits for its restart
    bool stopped = false;
    double restart_at = 0, resume_at = 0;
    Clock::time_point started_at;
};

struct Fault {
    std::string kind, what;
    double t_s = 0;                   // soak time
    long long at_ms = 0;              // Unix ms, comparable with the events' ts
    std::set<std::string> in_flight;  // frames reading, extracting or writing at the fault
    std::size_t n_in_flight = 0;
    // Recovery: to the first frame_done of a frame that was in flight at the fault (the next
    // frame_done when none was); all_done_s: until every one of them is done.
    double recovery_s = -1, all_done_s = -1;
    std::string last_job;
};

// p50, p99 and max of `v`, and how many exceed `bound`.
std::string summary(std::vector<double> v, double bound)
{
    std::sort(v.begin(), v.end());
    auto rank = [&](double p) {  // nearest rank
        const auto r = std::max<std::size_t>(1, std::size_t(std::ceil(p * double(v.size()))));
        return v.empty() ? 0.0 : v[std::min(v.size(), r) - 1];
    };
    const long over = long(std::count_if(v.begin(), v.end(), [&](double s) { return s > bound; }));
    char buf[160];
    std::snprintf(buf, sizeof buf, "p50 %.2f s  p99 %.2f s  max %.2f s  (%zu faults, %ld over)",
                  rank(0.5), rank(0.99), rank(1.0), v.size(), over);
    return buf;
}

class Soak {
public:
    explicit Soak(const Options& o) : o_(o), rng_(o.seed), fleet_("chaos-soak") {}
    int run();

private:
    double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
    double uniform(double a, double b) { return std::uniform_real_distribution<>(a, b)(rng_); }
    std::string job_of(int e, const std::string& c) { return "nightly/" + expid8(e) + "/" + c; }
    service::RedisValue redis(const std::vector<std::string>& args);
    void start_slot(Slot& slot);
    void supervise();
    void read_events();
    void inject();
    std::set<std::string> frames_in_flight();
    void progress();
    int report(bool finished, double wall_s);

    Options o_;
    std::mt19937 rng_;
    Fleet fleet_;
    std::unique_ptr<service::RedisClient> monitor_;
    Clock::time_point t0_ = Clock::now();
    std::vector<std::pair<int, std::vector<std::string>>> exposures_;  // expid, cameras
    std::vector<Slot> slots_;
    std::map<std::string, int> names_used_;
    bool redis_down_ = false;
    double redis_restart_at_ = 0;
    std::vector<Fault> faults_;
    std::map<std::string, int> by_kind_;
    int unexpected_exits_ = 0;
    std::string last_event_ = "0-0";
    std::set<std::string> done_, dead_;
};

service::RedisValue Soak::redis(const std::vector<std::string>& args)
{
    if (redis_down_) return {};
    auto r = monitor_->command(args);
    return r.is_ok() ? r.value() : service::RedisValue{};
}

void Soak::start_slot(Slot& slot)
{
    const std::string name = slot.role + "-" + std::to_string(++names_used_[slot.role]);
    slot.proc = &fleet_.start(slot.role, name);
    slot.stopped = false;
    slot.started_at = Clock::now();
}

// Restarts, SIGCONTs and the Redis restart that are due; restarts services that died on
// their own too, but counts them, since no fault of the soak should make a service exit.
void Soak::supervise()
{
    const double t = now();
    if (redis_down_ && t >= redis_restart_at_) {
        fleet_.restart_redis();
        redis_down_ = false;
        std::printf("[%6.1fs] redis restarted\n", now());
    }
    for (auto& slot : slots_) {
        if (!slot.proc) {
            if (t >= slot.restart_at) start_slot(slot);
            continue;
        }
        if (slot.stopped && t >= slot.resume_at) {
            slot.proc->signal(SIGCONT);
            slot.stopped = false;
        }
        if (!slot.stopped && !slot.proc->running()) {
            ++unexpected_exits_;
            std::printf("[%6.1fs] %s exited on its own (code %d); restarting it\n", t,
                        slot.proc->name().c_str(), slot.proc->wait(0));
            start_slot(slot);
        }
    }
}

// Follows ex2d:events: frame_done times the recoveries, frame_done and frame_dead end the run.
void Soak::read_events()
{
    for (;;) {
        const auto v = redis({"XREAD", "COUNT", "1000", "STREAMS", "ex2d:events", last_event_});
        if (v.elements.empty() || v.elements[0].elements.size() < 2) return;
        const auto& entries = v.elements[0].elements[1].elements;
        if (entries.empty()) return;
        for (const auto& entry : entries) {
            last_event_ = entry.elements[0].str;
            std::map<std::string, std::string> f;
            for (const auto& [k, val] : entry.elements[1].pairs()) f[k] = val;
            if (f["type"] == "frame_dead") dead_.insert(f["job"]);
            if (f["type"] != "frame_done") continue;
            done_.insert(f["job"]);
            const long long ts = std::atoll(f["ts"].c_str());
            for (auto& fault : faults_) {
                // A frame that finished between the scan and the fault leaves the set without
                // counting as a recovery.
                const bool after = ts >= fault.at_ms;
                const double since = std::max(0.0, double(ts - fault.at_ms) / 1000.0);
                const bool was_in_flight = fault.in_flight.erase(f["job"]) > 0;
                if (fault.recovery_s < 0 && after && (was_in_flight || fault.n_in_flight == 0)) {
                    fault.recovery_s = since;
                }
                if (was_in_flight && fault.in_flight.empty()) {
                    fault.all_done_s = since;
                    fault.last_job = f["job"];
                }
            }
        }
    }
}

std::set<std::string> Soak::frames_in_flight()
{
    std::set<std::string> out;
    for (const auto& [expid, cams] : exposures_) {
        for (const auto& c : cams) {
            if (done_.count(job_of(expid, c))) continue;
            const std::string key = "ex2d:frame:nightly:" + expid8(expid) + ":" + c;
            const std::string state = redis({"HGET", key, "state"}).str;
            if (state == "reading" || state == "extracting" || state == "writing") {
                out.insert(job_of(expid, c));
            }
        }
    }
    return out;
}

// One random fault: every 10th is Redis killed and restarted after 1-2 s; the others are
// kill -9 of a reader, worker or writer (restarted under a new name after 0-2 s) or SIGSTOP
// of any service for lease+1 to lease+3 s, so that its leases expire while it sleeps.
void Soak::inject()
{
    const int n = int(faults_.size()) + 1;
    const int pick = std::uniform_int_distribution<int>(0, 3)(rng_);
    const std::string roles[] = {"reader", "worker", "writer"};
    std::vector<Slot*> candidates;
    for (auto& slot : slots_) {
        if (!slot.proc || slot.stopped) continue;
        if (pick == 3 || slot.role == roles[pick]) candidates.push_back(&slot);
    }
    if (n % 10 != 0 && candidates.empty()) return;  // that role is down already: next time
    Fault fault;
    fault.in_flight = frames_in_flight();
    fault.n_in_flight = fault.in_flight.size();
    fault.t_s = now();
    fault.at_ms = service::unix_ms();
    char what[128];
    if (n % 10 == 0) {
        fleet_.kill_redis();
        redis_down_ = true;
        redis_restart_at_ = now() + uniform(1, 2);
        fault.kind = "redis kill -9 + restart";
        std::snprintf(what, sizeof what, "kill -9 redis-server");
    } else {
        auto index = std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(rng_);
        Slot& slot = *candidates[index];
        const std::string name = slot.proc->name();
        if (pick == 3) {
            slot.proc->signal(SIGSTOP);
            slot.stopped = true;
            slot.resume_at = now() + o_.lease_s + uniform(1, 3);
            fault.kind = "SIGSTOP " + slot.role;
            std::snprintf(what, sizeof what, "SIGSTOP %s for %.1f s", name.c_str(),
                          slot.resume_at - now());
        } else {
            slot.proc->signal(SIGKILL);
            slot.proc->wait(5);
            slot.proc = nullptr;
            slot.restart_at = now() + uniform(0, 2);
            fault.kind = "kill -9 " + slot.role;
            std::snprintf(what, sizeof what, "kill -9 %s", name.c_str());
        }
    }
    std::printf("[%6.1fs] fault %d: %s, %zu frame(s) in flight\n", now(), n, what,
                fault.n_in_flight);
    fault.what = what;
    ++by_kind_[fault.kind];
    faults_.push_back(std::move(fault));
}

void Soak::progress()
{
    std::map<std::string, int> up;
    for (const auto& slot : slots_) up[slot.role] += slot.proc && !slot.stopped;
    std::printf(
        "[%6.1fs] done %zu/%d dead %zu | faults %zu | running readers %d workers %d "
        "writers %d%s\n",
        now(), done_.size(), o_.frames, dead_.size(), faults_.size(), up["reader"], up["worker"],
        up["writer"], redis_down_ ? " | redis down" : "");
}

int Soak::run()
{
    if (o_.keep) ::setenv("EX2D_KEEP_TEST_DIRS", "1", 1);
    std::printf(
        "chaos soak: %d frames, readers %d workers %d writers %d, %.0f faults/min, "
        "lease %.1f s, reaper %.1f s, delays extract %d ms write %d ms, seed %u\n"
        "folder %s\n",
        o_.frames, o_.readers, o_.workers, o_.writers, o_.faults_per_minute, o_.lease_s,
        o_.reaper_interval_s, o_.extract_delay_ms, o_.write_delay_ms, o_.seed,
        fleet_.dir().c_str());
    fleet_.settings["queue.lease_s"] = std::to_string(o_.lease_s);
    fleet_.settings["queue.reaper_interval_s"] = std::to_string(o_.reaper_interval_s);
    // The delays keep several frames in each stage, so that faults land mid-frame.
    fleet_.env["EX2D_TEST_DELAY_EXTRACT_MS"] = std::to_string(o_.extract_delay_ms);
    fleet_.env["EX2D_TEST_DELAY_WRITE_MS"] = std::to_string(o_.write_delay_ms);
    monitor_ = std::make_unique<service::RedisClient>(
        service::RedisOptions{"127.0.0.1", fleet_.redis_port(), "", "", 1000});

    std::vector<std::string> cams;
    cams.reserve(10);
    for (int i = 0; i < 10; ++i) cams.push_back("r" + std::to_string(i));
    for (int left = o_.frames, expid = 1001; left > 0; left -= 10, ++expid) {
        exposures_.push_back({expid, {cams.begin(), cams.begin() + std::min(left, 10)}});
    }
    const auto t_make = Clock::now();
    for (const auto& [expid, c] : exposures_) fleet_.make_exposures({expid}, c, 2);
    std::printf("simulated %d frames in %zu exposures in %.1f s\n", o_.frames, exposures_.size(),
                std::chrono::duration<double>(Clock::now() - t_make).count());

    for (const auto& [role, count] : {std::pair<std::string, int>{"reader", o_.readers},
                                      {"worker", o_.workers},
                                      {"writer", o_.writers}}) {
        for (int i = 0; i < count; ++i) start_slot(slots_.emplace_back(role));
    }
    t0_ = Clock::now();
    for (const auto& [expid, c] : exposures_) {
        if (fleet_.submit(expid) != 0) {
            std::printf("ex2dctl submit failed for exposure %d\n", expid);
            return 1;
        }
    }
    std::printf("[%6.1fs] submitted %zu exposures\n", now(), exposures_.size());

    const double interval = 60.0 / o_.faults_per_minute;
    double next_fault = interval * uniform(0.5, 1.5), next_progress = 5;
    bool finished = false;
    while (now() < o_.duration_limit_s && !g_stop) {
        supervise();
        read_events();
        if (int(done_.size() + dead_.size()) >= o_.frames) {
            finished = true;
            break;
        }
        if (now() >= next_fault && !redis_down_) {
            inject();
            next_fault = now() + interval * uniform(0.5, 1.5);
        }
        if (now() >= next_progress) {
            progress();
            next_progress += 5;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const double wall_s = now();
    progress();
    return report(finished, wall_s);
}

int Soak::report(bool finished, double wall_s)
{
    std::string rss;
    for (const auto& slot : slots_) {
        const double up = std::chrono::duration<double>(Clock::now() - slot.started_at).count();
        if (!slot.proc || up < 5) continue;  // a process just restarted has not warmed up
        char one[96];
        std::snprintf(one, sizeof one, " %s %ld (up %.0f s)", slot.proc->name().c_str(),
                      slot.proc->rss_kib(), up);
        rss += one;
    }
    // Everything back up, then time for woken processes to meet their fences before counting.
    if (redis_down_) redis_restart_at_ = 0;
    for (auto& slot : slots_) slot.resume_at = slot.restart_at = 0;
    supervise();
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.lease_s + 2));
    read_events();

    std::vector<std::pair<int, std::string>> frames;
    long redeliveries = 0;
    std::vector<std::string> stuck;
    for (const auto& [expid, c] : exposures_) {
        for (const auto& camera : c) {
            frames.emplace_back(expid, camera);
            // attempt is the delivery count of the last holder: each one past the first is
            // a re-delivery after a lease expired or a reader restarted.
            const int attempt = std::atoi(fleet_.frame_field(expid, camera, "attempt").c_str());
            redeliveries += std::max(0, attempt - 1);
            const std::string state = fleet_.frame_field(expid, camera, "state");
            if (state != "done") stuck.push_back(job_of(expid, camera) + " " + state);
        }
    }
    const Outcome total = fleet_.check_frames(frames);

    std::vector<double> first, all;
    std::string tsv = "t_s\tfault\tin_flight\trecovery_s\tall_done_s\tlast_frame\n";
    for (const auto& f : faults_) {
        if (f.recovery_s >= 0) first.push_back(f.recovery_s);
        if (f.all_done_s >= 0) all.push_back(f.all_done_s);
        char row[256];
        std::snprintf(row, sizeof row, "%.1f\t%s\t%zu\t%.2f\t%.2f\t%s\n", f.t_s, f.what.c_str(),
                      f.n_in_flight, f.recovery_s, f.all_done_s, f.last_job.c_str());
        tsv += row;
    }
    std::ofstream(fleet_.dir() + "/faults.tsv") << tsv;
    const double bound = o_.lease_s + o_.reaper_interval_s + 5;

    std::printf("\n== chaos soak result (seed %u) ==\n", o_.seed);
    const std::pair<const char*, long> figures[] = {{"frames", total.expected},
                                                    {"done", total.done},
                                                    {"lost", total.lost},
                                                    {"duplicate outputs", total.duplicates},
                                                    {"partial files", total.partial},
                                                    {"dead", total.dead},
                                                    {"redeliveries", redeliveries},
                                                    {"unexpected exits", unexpected_exits_}};
    for (const auto& [name, value] : figures) std::printf("%-18s %ld\n", name, value);
    std::printf("wall time          %.1f s%s\n", wall_s, finished ? "" : " (stopped early)");
    std::printf("frames/hour        %.0f\n", wall_s > 0 ? 3600.0 * total.done / wall_s : 0.0);
    std::printf("faults             %zu\n", faults_.size());
    for (const auto& [kind, count] : by_kind_) std::printf("  %-24s %d\n", kind.c_str(), count);
    std::printf("recovery, fault to first in-flight frame done: %s\n",
                summary(first, bound).c_str());
    std::printf("fault to all frames in flight at it done:      %s\n", summary(all, bound).c_str());
    std::printf("bound: lease + reaper interval + 5 s = %.1f s\n", bound);
    std::printf("RSS KiB at the end:%s\n", rss.c_str());
    for (std::size_t i = 0; i < stuck.size() && i < 20; ++i) {
        std::printf("not done: %s\n", stuck[i].c_str());
    }
    if (o_.keep) std::printf("kept %s (per fault: faults.tsv)\n", fleet_.dir().c_str());
    // A service that exits on its own under these faults is a bug even when its frames recover.
    const bool clean = finished && total.lost == 0 && total.duplicates == 0 && total.partial == 0 &&
                       total.dead == 0 && total.done == o_.frames && unexpected_exits_ == 0;
    std::printf("%s\n", clean ? "PASS" : "FAIL");
    return clean ? 0 : 1;
}

}  // namespace
}  // namespace ex2d::fleet_test

int main(int argc, char** argv)
{
    ex2d::fleet_test::Options options;
    if (!ex2d::fleet_test::parse(argc, argv, options)) {
        std::fprintf(stderr,
                     "usage: ex2d-chaos-soak [--frames N] [--readers N] [--workers N] "
                     "[--writers N] [--duration-limit S] [--seed N] [--keep]\n"
                     "  [--faults-per-minute F] [--lease-s S] [--reaper-interval-s S] "
                     "[--extract-delay-ms MS] [--write-delay-ms MS]\n");
        return 2;
    }
#if !EX2D_TEST_HOOKS
    std::fprintf(stderr,
                 "ex2d-chaos-soak: needs a build with test hooks (cmake -DEX2D_TEST_HOOKS=ON): "
                 "its stages are slowed by EX2D_TEST_DELAY_*_MS\n");
    return 2;
#endif
    // Redis going away is expected here; the clients' warnings would drown the progress lines.
    ex2d::set_log_level("error");
    std::signal(SIGINT, ex2d::fleet_test::on_signal);
    std::signal(SIGTERM, ex2d::fleet_test::on_signal);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    ex2d::fleet_test::Soak soak(options);
    return soak.run();
}
