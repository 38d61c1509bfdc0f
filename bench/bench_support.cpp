// SPDX-License-Identifier: BSD-3-Clause
#include "bench_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

namespace ex2d::bench {

namespace {

// Asks the kernel for a free port by binding port 0. Another process could take it before
// redis-server binds it; on loopback in a benchmark that race is not worth more code.
int free_loopback_port()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
}

using Info = std::map<std::string, std::string>;

Info parse_info(const std::string& text)
{
    Info info;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const auto colon = line.find(':');
        if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
        info[line.substr(0, colon)] = line.substr(colon + 1);
    }
    return info;
}

double number(const Info& info, const std::string& key)
{
    const auto it = info.find(key);
    return it == info.end() ? 0.0 : std::atof(it->second.c_str());
}

// "calls=12,usec=345,usec_per_call=..." -> {12, 345}
std::pair<long long, long long> calls_and_usec(const std::string& value)
{
    std::pair<long long, long long> out{0, 0};
    std::istringstream in(value);
    for (std::string item; std::getline(in, item, ',');) {
        if (item.rfind("calls=", 0) == 0) out.first = std::atoll(item.c_str() + 6);
        if (item.rfind("usec=", 0) == 0) out.second = std::atoll(item.c_str() + 5);
    }
    return out;
}

}  // namespace

Status LocalRedis::start(const std::string& server_binary, const std::vector<std::string>& config)
{
    char pattern[] = "/tmp/ex2d-queue-bench-XXXXXX";
    if (!::mkdtemp(pattern)) return Status::io("cannot create a temporary folder in /tmp");
    dir_ = pattern;
    port_ = free_loopback_port();
    if (port_ == 0) return Status::io("no free loopback port");
    const std::string port = std::to_string(port_);
    const std::string log = dir_ + "/redis.log";
    std::vector<std::string> args = {
        server_binary, "--port",        port,       "--bind",
        "127.0.0.1",   "--dir",         dir_,       "--logfile",
        log,           "--daemonize",   "no",       "--appendonly",
        "yes",         "--appendfsync", "everysec", "--maxmemory-policy",
        "noeviction",  "--save",        ""};
    for (const auto& c : config) {
        const auto eq = c.find('=');
        args.push_back("--" + c.substr(0, eq));
        if (eq != std::string::npos) args.push_back(c.substr(eq + 1));
    }
    pid_ = ::fork();
    if (pid_ < 0) return Status::io("fork failed");
    if (pid_ == 0) {
        // The server must not outlive a benchmark that is interrupted.
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        std::vector<char*> argv;
        argv.reserve(args.size() + 1);
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execvp(argv[0], argv.data());
        std::_Exit(127);
    }
    service::RedisOptions options;
    options.port = port_;
    for (int attempt = 0; attempt < 100; ++attempt) {
        service::RedisClient probe(options);
        if (probe.connect_once().is_ok()) {
            auto pong = probe.command({"PING"});
            if (pong.is_ok() && !pong.value().is_error()) return Status::ok();
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return Status::io(server_binary + " exited at start; see " + log);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Status::io(server_binary + " did not answer PING within 5 s; see " + log);
}

void LocalRedis::stop()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGTERM);
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
    }
    if (!dir_.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        dir_.clear();
    }
}

bool Snapshot::is_client_command(const std::string& cmdstat_name)
{
    // The commands the control plane sends from the client side; scripts never call these.
    static const char* const names[] = {
        "cmdstat_evalsha",  "cmdstat_eval",          "cmdstat_xreadgroup", "cmdstat_xautoclaim",
        "cmdstat_smembers", "cmdstat_xgroup|create", "cmdstat_script|load"};
    for (const char* name : names) {
        if (cmdstat_name == name) return true;
    }
    return false;
}

long long Snapshot::client_calls() const
{
    long long n = 0;
    for (const auto& [name, cu] : commands) {
        if (is_client_command(name)) n += cu.first;
    }
    return n;
}

long long Snapshot::all_calls() const
{
    long long n = 0;
    for (const auto& [name, cu] : commands) {
        if (name != "cmdstat_info") n += cu.first;
    }
    return n;
}

Result<Snapshot> snapshot(service::RedisClient& redis)
{
    EX2D_ASSIGN_OR_RETURN(service::RedisValue v, redis.command({"INFO", "everything"}));
    if (v.is_error()) return Status::io("redis INFO: " + v.str);
    const Info info = parse_info(v.str);
    Snapshot s;
    s.cpu_all = number(info, "used_cpu_sys") + number(info, "used_cpu_user");
    s.cpu_main_user = number(info, "used_cpu_user_main_thread");
    s.cpu_main = number(info, "used_cpu_sys_main_thread") + s.cpu_main_user;
    s.cpu_children = number(info, "used_cpu_sys_children") + number(info, "used_cpu_user_children");
    s.used_memory = (long long)number(info, "used_memory");
    s.aof_size = (long long)number(info, "aof_current_size");
    s.aof_rewrites = (long long)number(info, "aof_rewrites");
    s.aof_rewriting = number(info, "aof_rewrite_in_progress") != 0;
    for (const auto& [key, value] : info) {
        if (key.rfind("cmdstat_", 0) == 0) s.commands[key] = calls_and_usec(value);
    }
    return s;
}

void AofMeter::sample(const Snapshot& s, long long jobs_done)
{
    if (have_ && !s.aof_rewriting && !last_.aof_rewriting && s.aof_rewrites == last_.aof_rewrites &&
        s.aof_size >= last_.aof_size) {
        bytes_ += s.aof_size - last_.aof_size;
        jobs_ += jobs_done - last_jobs_;
    }
    have_ = true;
    last_ = s;
    last_jobs_ = jobs_done;
}

const char* op_name(int op)
{
    static const char* const names[op_count] = {"submit", "take",   "take (empty)", "advance",
                                                "renew",  "finish", "reap"};
    return op >= 0 && op < op_count ? names[op] : "?";
}

void OpTimes::add(int op, Clock::time_point start)
{
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    this->us[std::size_t(op)].push_back(std::uint32_t(std::min<long long>(us.count(), UINT32_MAX)));
}

void OpTimes::merge(const OpTimes& other)
{
    for (std::size_t i = 0; i < us.size(); ++i) {
        us[i].insert(us[i].end(), other.us[i].begin(), other.us[i].end());
    }
}

double quantile_ms(std::vector<std::uint32_t>& values, double q)
{
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const std::size_t i = std::min(values.size() - 1, std::size_t(q * double(values.size())));
    return values[i] / 1000.0;
}

std::uint64_t mix(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace ex2d::bench
