// SPDX-License-Identifier: BSD-3-Clause
#include "fleet_harness.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ex2d/fits_table.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"

namespace ex2d::fleet_test {

namespace fs = std::filesystem;

namespace {

std::string bin_path(const std::string& role)
{
    if (role == "ctl") return std::string(EX2D_BIN_DIR) + "/ctl/ex2dctl";
    if (role == "ex2d") return EX2D_TOOL_PATH;
    return std::string(EX2D_BIN_DIR) + "/" + role + "/ex2d-" + role;
}

int free_port()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    ::close(fd);
    if (!bound) throw std::runtime_error("free_port: no loopback port to bind");
    return ntohs(addr.sin_port);
}

int run_to_completion(const std::vector<std::string>& argv, const std::string& log,
                      std::string* out, const std::map<std::string, std::string>& env = {})
{
    Process p("cmd", argv, env, log);
    const int code = p.wait(120);
    if (out) *out = p.log();
    return code;
}

}  // namespace

std::string expid8(int expid)
{
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08d", expid);
    return buf;
}

bool eventually(double timeout_s, const std::function<bool()>& predicate)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        if (predicate()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return predicate();
}

Process::Process(std::string name, std::vector<std::string> argv,
                 const std::map<std::string, std::string>& env, std::string log_path)
    : name_(std::move(name)), log_path_(std::move(log_path))
{
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        const std::string entry(*e);
        const std::string key = entry.substr(0, entry.find('='));
        if (!env.count(key)) env_strings.push_back(entry);
    }
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env_strings) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
        const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::setpgid(0, 0);
        ::execve(cargv[0], cargv.data(), cenv.data());
        std::perror("execve");
        ::_exit(127);
    }
}

Process::~Process()
{
    if (running()) {
        ::kill(pid_, SIGKILL);
        wait(5);
    }
}

void Process::signal(int sig) const
{
    ::kill(pid_, sig);
}

bool Process::running()
{
    if (reaped_) return false;
    const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) reaped_ = true;
    return !reaped_;
}

int Process::wait(double timeout_s)
{
    eventually(timeout_s, [this] { return !running(); });
    if (!reaped_) return -1;
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
}

std::string Process::log() const
{
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

long Process::rss_kib() const
{
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return 0;
}

std::string Outcome::report() const
{
    return "expected=" + std::to_string(expected) + " done=" + std::to_string(done) +
           " lost=" + std::to_string(lost) + " duplicates=" + std::to_string(duplicates) +
           " partial=" + std::to_string(partial) + " dead=" + std::to_string(dead);
}

Fleet::Fleet(const std::string& test_name, RedisSetup redis_setup)
    : redis_setup_(std::move(redis_setup))
{
    dir_ =
        (fs::temp_directory_path() / ("ex2d-fleet-" + test_name + "-" + std::to_string(::getpid())))
            .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/logs");
    fs::create_directories(dir_ + "/redis");
    fs::create_directories(dir_ + "/calib");
    // Slots of processes the test kills stay until a sweep: in a folder of the test's own,
    // they go with it.
    const fs::path shm_base = fs::is_directory("/dev/shm") ? "/dev/shm" : dir_;
    shm_dir_ = (shm_base / ("ex2d-fleet-" + test_name + "-" + std::to_string(::getpid()) + "-shm"))
                   .string();
    fs::remove_all(shm_dir_);
    fs::create_directories(shm_dir_);
    // The port is free when free_port() returns, but another process (a parallel test) may
    // take it before redis-server binds; a Redis that exits at start gets another port.
    for (int attempt = 0; attempt < 5; ++attempt) {
        redis_port_ = free_port();
        if (start_redis()) break;
    }
    if (!redis_server_ || !redis_server_->running())
        throw std::runtime_error("fleet harness: redis-server did not start (see " + dir_ +
                                 "/logs/redis.log)");
    settings = {{"redis.port", std::to_string(redis_port_)},
                {"queue.lease_s", "2"},
                {"queue.reaper_interval_s", "0.5"},
                {"queue.max_deliveries", "5"},
                {"service.heartbeat_interval_s", "0.5"},
                {"service.heartbeat_ttl_s", "3"},
                {"zmq.discovery_interval_s", "0.3"},
                {"zmq.peer_timeout_s", "3"},
                {"writer.sweep_interval_s", "0.5"},
                {"zmq.bind", "ipc://" + dir_ + "/{name}.sock"},
                {"zmq.shm_dir", shm_dir_},
                {"worker.threads", "1"},
                {"reader.credit_hold_ms", "200"}};
}

pid_t Fleet::redis_pid() const
{
    return redis_server_ ? redis_server_->pid() : -1;
}

Fleet::~Fleet()
{
    processes_.clear();
    if (redis_server_) redis_server_->signal(SIGKILL);
    redis_server_.reset();
    std::error_code ec;
    fs::remove_all(shm_dir_, ec);  // memory, not evidence
    if (!std::getenv("EX2D_KEEP_TEST_DIRS")) fs::remove_all(dir_, ec);
}

bool Fleet::start_redis()
{
    std::vector<std::string> argv{"/usr/bin/redis-server",
                                  "--port",
                                  std::to_string(redis_port_),
                                  "--bind",
                                  "127.0.0.1",
                                  "--dir",
                                  dir_ + "/redis",
                                  "--appendonly",
                                  "yes",
                                  "--appendfsync",
                                  "always",
                                  "--maxmemory-policy",
                                  "noeviction",
                                  "--save",
                                  ""};
    argv.insert(argv.end(), redis_setup_.args.begin(), redis_setup_.args.end());
    redis_server_ = std::make_unique<Process>("redis", argv, std::map<std::string, std::string>{},
                                              dir_ + "/logs/redis.log");
    return eventually(10,
                      [this] {
                          if (!redis_server_->running()) return true;
                          service::RedisClient probe({"127.0.0.1", redis_port_, redis_setup_.user,
                                                      redis_setup_.password, 500});
                          return probe.connect_once().is_ok();
                      }) &&
           redis_server_->running();
}

void Fleet::kill_redis()
{
    redis_server_->signal(SIGKILL);
    redis_server_->wait(5);
}

void Fleet::restart_redis()
{
    start_redis();
}

service::RedisValue Fleet::redis(const std::vector<std::string>& args)
{
    service::RedisClient client(
        {"127.0.0.1", redis_port_, redis_setup_.user, redis_setup_.password, 2000});
    auto r = client.command(args);
    return r.is_ok() ? r.value() : service::RedisValue{};
}

Process& Fleet::start(const std::string& role, const std::string& name,
                      const std::map<std::string, std::string>& extra_settings,
                      const std::map<std::string, std::string>& extra_env)
{
    std::vector<std::string> argv = {bin_path(role), "--service.name", name};
    std::map<std::string, std::string> s = settings;
    for (const auto& [k, v] : extra_settings) s[k] = v;
    for (const auto& [k, v] : s) {
        if (role != "worker" && k.rfind("worker.", 0) == 0) continue;
        argv.push_back("--" + k);
        argv.push_back(v);
    }
    std::map<std::string, std::string> e = env;
    for (const auto& [k, v] : extra_env) e[k] = v;
    processes_.push_back(std::make_unique<Process>(name, argv, e, dir_ + "/logs/" + name + ".log"));
    return *processes_.back();
}

Process& Fleet::start_ctl(const std::string& name, const std::vector<std::string>& args)
{
    std::vector<std::string> argv = {bin_path("ctl"), "--redis-port", std::to_string(redis_port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    processes_.push_back(
        std::make_unique<Process>(name, argv, ctl_env, dir_ + "/logs/" + name + ".log"));
    return *processes_.back();
}

int Fleet::ctl(const std::vector<std::string>& args, std::string* out)
{
    std::vector<std::string> argv = {bin_path("ctl"), "--redis-port", std::to_string(redis_port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    static int counter = 0;
    return run_to_completion(argv, dir_ + "/logs/ctl-" + std::to_string(++counter) + ".log", out,
                             ctl_env);
}

void Fleet::ensure_small_psf(const std::string& camera)
{
    if (fs::exists(psf_path(camera))) return;
    const std::string real = std::string(EX2D_SHARED_DATA_DIR) + "/psf-r0-00051060.fits";
    std::string source = real;
    if (!fs::exists(real)) {
        source = dir_ + "/calib/psf-r0-synthetic.fits";
        if (!fs::exists(source)) {
            run_to_completion({bin_path("ex2d"), "make-psf", "--camera", "r0", "-o", source},
                              dir_ + "/logs/make-psf.log", nullptr);
        }
    }
    run_to_completion({bin_path("ex2d"), "make-psf", "--from", source, "--fibers", "25",
                       "--wave-range", "6000,6100", "--camera", camera, "-o", psf_path(camera)},
                      dir_ + "/logs/make-psf.log", nullptr);
}

std::vector<std::string> Fleet::simulate_argv(int expid, const std::string& camera, int seed,
                                              const std::string& night, std::string* path)
{
    const std::string folder = dir_ + "/preproc/" + night + "/" + expid8(expid);
    fs::create_directories(folder);
    *path = folder + "/preproc-" + camera + "-" + expid8(expid) + ".fits";
    return {bin_path("ex2d"),
            "simulate",
            "-p",
            psf_path(camera),
            "-o",
            *path,
            "--truth",
            folder + "/truth-" + camera + ".fits",
            "--camera",
            camera,
            "--expid",
            std::to_string(expid),
            "--night",
            night,
            "-n",
            "25",
            "-w",
            "6000,6100,0.8",
            "--seed",
            std::to_string(seed)};
}

std::vector<std::string> Fleet::make_exposure(int expid, const std::vector<std::string>& cameras,
                                              const std::string& night)
{
    std::vector<std::string> paths;
    int seed = expid * 100;
    for (const auto& camera : cameras) {
        std::string path;
        ensure_small_psf(camera);
        run_to_completion(simulate_argv(expid, camera, ++seed, night, &path),
                          dir_ + "/logs/simulate.log", nullptr);
        paths.push_back(path);
    }
    return paths;
}

void Fleet::make_exposures(const std::vector<int>& expids, const std::vector<std::string>& cameras,
                           int parallel, const std::string& night)
{
    for (const auto& camera : cameras) ensure_small_psf(camera);
    std::vector<std::unique_ptr<Process>> running;
    for (int expid : expids) {
        int seed = expid * 100;
        for (const auto& camera : cameras) {
            if (int(running.size()) >= parallel) {
                running.front()->wait(120);
                running.erase(running.begin());
            }
            std::string path;
            running.push_back(std::make_unique<Process>(
                "simulate", simulate_argv(expid, camera, ++seed, night, &path),
                std::map<std::string, std::string>{}, dir_ + "/logs/simulate.log"));
        }
    }
    for (auto& p : running) p->wait(120);
}

int Fleet::submit(int expid, const std::string& night, const std::vector<std::string>& extra)
{
    std::vector<std::string> args = {"submit",
                                     "--exposure-dir",
                                     dir_ + "/preproc/" + night + "/" + expid8(expid),
                                     "--psf",
                                     psf_template(),
                                     "--output-root",
                                     dir_ + "/out",
                                     "-w",
                                     "6000,6100,0.8",
                                     "-n",
                                     "25",
                                     "--compression",
                                     "none"};
    // The fleet tests compare frames with `ex2d extract` on the night's PSF: no trace shifts
    // unless a test asks (test_fleet_trace_shifts).
    if (std::find(extra.begin(), extra.end(), "--trace-shifts") == extra.end()) {
        args.insert(args.end(), {"--trace-shifts", "none"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return ctl(args);
}

std::string Fleet::output_path(int expid, const std::string& camera, const std::string& night) const
{
    return dir_ + "/out/exposures/" + night + "/" + expid8(expid) + "/frame-" + camera + "-" +
           expid8(expid) + ".fits";
}

bool Fleet::wait_exposure(int expid, double timeout_s, const std::string& campaign)
{
    const std::string key = "ex2d:exposure:" + campaign + ":" + expid8(expid);
    return eventually(timeout_s, [&] {
        auto v = redis({"HGET", key, "state"});
        return v.str == "done" || v.str == "done_with_errors";
    });
}

std::string Fleet::frame_field(int expid, const std::string& camera, const std::string& field,
                               const std::string& campaign)
{
    return redis({"HGET", "ex2d:frame:" + campaign + ":" + expid8(expid) + ":" + camera, field})
        .str;
}

int Fleet::count_log_lines(const std::string& text) const
{
    int n = 0;
    for (const auto& entry : fs::directory_iterator(dir_ + "/logs")) {
        std::ifstream in(entry.path());
        for (std::string line; std::getline(in, line);) {
            if (line.find(text) != std::string::npos) ++n;
        }
    }
    return n;
}

Outcome Fleet::check(const std::vector<int>& expids, const std::vector<std::string>& cameras,
                     const std::string& night)
{
    std::vector<std::pair<int, std::string>> frames;
    for (int expid : expids) {
        for (const auto& camera : cameras) frames.emplace_back(expid, camera);
    }
    return check_frames(frames, night);
}

Outcome Fleet::check_frames(const std::vector<std::pair<int, std::string>>& frames,
                            const std::string& night)
{
    Outcome o;
    std::set<std::string> expected_paths;
    for (const auto& [expid, camera] : frames) {
        ++o.expected;
        const std::string path = output_path(expid, camera, night);
        expected_paths.insert(path);
        const std::string state = frame_field(expid, camera, "state");
        if (state == "dead") {
            ++o.dead;
            continue;
        }
        // A job written (not found already written) more than once is a duplicate output.
        const int writes = count_log_lines("\"msg\":\"frame written output=" + path + " ");
        if (writes > 1) o.duplicates += writes - 1;
        if (!fs::exists(path) || state != "done") {
            ++o.lost;
            continue;
        }
        auto frame = read_frame(path);
        if (!frame.is_ok()) {
            ++o.partial;
            continue;
        }
        ++o.done;
    }
    std::error_code ec;
    if (fs::exists(dir_ + "/out")) {
        for (const auto& entry : fs::recursive_directory_iterator(dir_ + "/out", ec)) {
            // psf-CAMERA-EXPID.fits: a trace-shifted PSF, written where desi_proc writes it.
            const bool shifted_psf = entry.path().filename().string().rfind("psf-", 0) == 0 &&
                                     entry.path().extension() == ".fits";
            if (entry.is_regular_file() && !expected_paths.count(entry.path().string()) &&
                !shifted_psf)
                ++o.partial;
        }
    }
    return o;
}

std::string identity_mismatch(const std::string& input, const std::string& output,
                              const std::string& camera, int expid, int nspec,
                              const std::string& night)
{
    auto in_map = read_fibermap(input);
    if (!in_map.is_ok()) return input + ": " + in_map.status().to_string();
    auto out_map = read_fibermap(output);
    if (!out_map.is_ok()) return output + ": " + out_map.status().to_string();
    auto in_fibers = read_int_column(in_map.value(), "FIBER");
    auto out_fibers = read_int_column(out_map.value(), "FIBER");
    if (!in_fibers.is_ok() || !out_fibers.is_ok()) return "no FIBER column";
    std::vector<long long> expected = in_fibers.value();
    expected.resize(std::size_t(nspec));
    std::string why;
    if (out_fibers.value() != expected) why += "FIBER differs; ";
    auto header = read_frame_header(output);
    if (!header.is_ok()) return why + output + ": " + header.status().to_string();
    const std::string out_camera = header.value().get_string("CAMERA").value_or("");
    const long long out_expid = header.value().get_int("EXPID").value_or(-1);
    const long long out_night = header.value().get_int("NIGHT").value_or(-1);
    if (out_camera != camera) why += "CAMERA " + out_camera + " != " + camera + "; ";
    if (out_expid != expid)
        why += "EXPID " + std::to_string(out_expid) + " != " + std::to_string(expid) + "; ";
    if (std::to_string(out_night) != night)
        why += "NIGHT " + std::to_string(out_night) + " != " + night + "; ";
    return why;
}

std::string http_get(const std::string& address, const std::string& path)
{
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) return {};  // not registered yet
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(std::stoi(address.substr(colon + 1)));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return {};
    }
    const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    (void)!::write(fd, request.data(), request.size());
    std::string response;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) response.append(buf, std::size_t(n));
    ::close(fd);
    return response;
}

int temporaries_under(const std::string& dir)
{
    int n = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.find(".tmp-") != std::string::npos || name.find(".replaced-") != std::string::npos)
            ++n;
    }
    return n;
}

}  // namespace ex2d::fleet_test
