// SPDX-License-Identifier: BSD-3-Clause
// The typed settings: every declared key is read by some settings struct, and the structs
// take the values Config::load produced from a mix of YAML, environment and flags.
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "ex2d/service/config.hpp"
#include "ex2d/service/settings.hpp"

namespace {

using namespace ex2d::service;

/// Keys that no settings struct reads, each with the reason. None today: a key added to
/// config_keys() must be read in settings.cpp or listed here.
const std::set<std::string> kKeysNotInSettings = {};

TEST(Settings, EveryDeclaredKeyIsReadBySomeStruct)
{
    Config config;
    std::set<std::string> read;
    config.record_reads(&read);
    (void)FleetSettings::from(config);
    (void)ReaderSettings::from(config);
    (void)WorkerSettings::from(config);
    (void)WriterSettings::from(config);
    config.record_reads(nullptr);
    for (const ConfigKey& key : config_keys()) {
        EXPECT_TRUE(read.count(key.name) != 0 || kKeysNotInSettings.count(key.name) != 0)
            << key.name << " is declared but no settings struct reads it";
    }
    for (const std::string& name : kKeysNotInSettings) {
        EXPECT_EQ(read.count(name), 0u) << name << " is listed as unread but is read";
    }
}

TEST(Settings, DefaultsAreTheDeclaredOnes)
{
    const Config config;
    const FleetSettings s = FleetSettings::from(config);
    EXPECT_EQ(s.redis.host, "127.0.0.1");
    EXPECT_EQ(s.redis.port, 6379);
    EXPECT_EQ(s.redis.key_namespace, "ex2d");
    EXPECT_FALSE(s.redis.allow_unsafe);
    EXPECT_EQ(s.queue.lease_ms(), 120000);
    EXPECT_EQ(s.zmq.bind, "tcp://127.0.0.1:*");
    EXPECT_EQ(s.zmq.max_message_bytes, 1073741824LL);
    EXPECT_EQ(s.http.port, 0);
    EXPECT_EQ(s.service.heartbeat_ttl_ms(), 15000);
    EXPECT_FALSE(s.service.max_frames_reached(1000000));  // 0 = run until stopped
    EXPECT_TRUE(WriterSettings::from(config).fsync);
    EXPECT_EQ(WorkerSettings::from(config).backend, "cpu");
    EXPECT_EQ(ReaderSettings::from(config).prefetch, 1);
    EXPECT_EQ(ReaderSettings::from(config).trace_shifts_in, "reader");
}

/// A YAML file, EX2D_* variables and flags, later winning, as a service is started.
class SettingsFromSources : public ::testing::Test {
protected:
    void TearDown() override
    {
        for (const auto& name : env_) ::unsetenv(name.c_str());
        std::remove(file_.c_str());
    }
    void set_env(const std::string& name, const std::string& value)
    {
        ::setenv(name.c_str(), value.c_str(), 1);
        env_.push_back(name);
    }
    Config load(const std::string& yaml, std::vector<std::string> flags)
    {
        file_ = ::testing::TempDir() + "ex2d_settings_" + std::to_string(::getpid()) + ".yaml";
        std::ofstream(file_) << yaml;
        flags.insert(flags.begin(), {"prog", "--config", file_});
        std::vector<const char*> argv;
        argv.reserve(flags.size());
        for (const auto& flag : flags) argv.push_back(flag.c_str());
        Config config;
        const ex2d::Status loaded = config.load(int(argv.size()), argv.data());
        EXPECT_TRUE(loaded.is_ok()) << loaded.to_string();
        return config;
    }

private:
    std::vector<std::string> env_;
    std::string file_;
};

TEST_F(SettingsFromSources, TakeTheValuesOfTheYamlTheEnvironmentAndTheFlags)
{
    set_env("EX2D_QUEUE_LEASE_S", "30.5");
    set_env("EX2D_REDIS_PORT", "7001");
    set_env("EX2D_WORKER_BACKEND", "auto");
    set_env("EX2D_WRITER_FSYNC", "no");
    const Config config = load(
        "redis:\n  host: redis.example\n  port: 7000\n  namespace: night\n"
        "zmq:\n  bind: ipc:///tmp/{name}.sock\n  hwm: 4\n"
        "service:\n  max_frames: 3\n  http_port: 8080\n"
        "reader:\n  credit_hold_ms: 250\n"
        "worker:\n  credit: 5\n  gpu_memory_gib: 2.5\n",
        {"--redis.port", "7002", "--reader.prefetch=3", "--writer.write_threads", "2",
         "--zmq.peer_timeout_s", "4.25", "--service.name", "w1"});

    const FleetSettings s = FleetSettings::from(config);
    EXPECT_EQ(s.redis.host, "redis.example");  // file
    EXPECT_EQ(s.redis.port, 7002);             // flag over environment over file
    EXPECT_EQ(s.redis.key_namespace, "night");
    EXPECT_DOUBLE_EQ(s.queue.lease_s, 30.5);  // environment
    EXPECT_EQ(s.queue.lease_ms(), 30500);
    EXPECT_EQ(s.zmq.bind, "ipc:///tmp/{name}.sock");
    EXPECT_EQ(s.zmq.hwm, 4);
    EXPECT_DOUBLE_EQ(s.zmq.peer_timeout_s, 4.25);
    EXPECT_EQ(s.http.port, 8080);
    EXPECT_EQ(s.service.name, "w1");
    EXPECT_TRUE(s.service.max_frames_reached(3));
    EXPECT_FALSE(s.service.max_frames_reached(2));

    const ReaderSettings reader = ReaderSettings::from(config);
    EXPECT_EQ(reader.prefetch, 3);
    EXPECT_EQ(reader.credit_hold_ms, 250);
    const WorkerSettings worker = WorkerSettings::from(config);
    EXPECT_EQ(worker.backend, "auto");
    EXPECT_EQ(worker.credit, 5);
    EXPECT_DOUBLE_EQ(worker.gpu_memory_gib, 2.5);
    EXPECT_EQ(worker.threads, 0);  // default
    const WriterSettings writer = WriterSettings::from(config);
    EXPECT_FALSE(writer.fsync);
    EXPECT_EQ(writer.write_threads, 2);
    EXPECT_EQ(writer.credit, 1);  // default
}

}  // namespace
