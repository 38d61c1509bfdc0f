// SPDX-License-Identifier: BSD-3-Clause
// Configuration: defaults, the YAML file, the environment and flags in that order, errors that
// name the key and the source, and config/ex2d.yaml in step with config_keys().
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "ex2d/service/config.hpp"

namespace {

using ex2d::StatusCode;
using ex2d::service::Config;
using ex2d::service::config_keys;

/// Environment variables set by a test, removed again at its end.
class ConfigTest : public ::testing::Test {
protected:
    void TearDown() override
    {
        for (const auto& name : env_) ::unsetenv(name.c_str());
        for (const auto& path : files_) std::remove(path.c_str());
    }
    void set_env(const std::string& name, const std::string& value)
    {
        ::setenv(name.c_str(), value.c_str(), 1);
        env_.push_back(name);
    }
    std::string write_file(const std::string& text)
    {
        // ctest runs each test in its own process, several at once: the pid keeps one test's
        // file from being rewritten or removed by another's.
        std::string path = ::testing::TempDir() + "ex2d_config_" + std::to_string(::getpid()) +
                           "_" + std::to_string(files_.size()) + ".yaml";
        std::ofstream(path) << text;
        files_.push_back(path);
        return path;
    }
    static ex2d::Status load(Config& config, std::vector<std::string> args)
    {
        args.insert(args.begin(), "prog");
        std::vector<const char*> argv;
        argv.reserve(args.size());
        for (const auto& arg : args) argv.push_back(arg.c_str());
        return config.load(int(argv.size()), argv.data());
    }

private:
    std::vector<std::string> env_, files_;
};

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

TEST_F(ConfigTest, DefaultsHaveTheDeclaredTypes)
{
    const Config config;
    EXPECT_EQ(config.get_string("redis.host"), "127.0.0.1");
    EXPECT_EQ(config.get_int("redis.port"), 6379);
    EXPECT_EQ(config.get_string("zmq.bind"), "tcp://127.0.0.1:*");
    EXPECT_DOUBLE_EQ(config.get_double("queue.lease_s"), 120.0);
    EXPECT_EQ(config.get_int("zmq.max_message_bytes"), 1073741824LL);
    EXPECT_TRUE(config.get_bool("writer.fsync"));
    EXPECT_FALSE(config.get_bool("redis.allow_unsafe"));
    EXPECT_EQ(config.get_string("worker.backend"), "cpu");
    EXPECT_THROW(config.get_string("redis.nope"), ex2d::Error);
    EXPECT_THROW(config.get_int("redis.host"), ex2d::Error);
}

TEST_F(ConfigTest, ShippedFileHasExactlyTheKeysAndDefaults)
{
    const YAML::Node root = YAML::LoadFile(EX2D_CONFIG_FILE);
    ASSERT_TRUE(root.IsMap());
    std::set<std::string> in_file;
    for (const auto& section : root) {
        ASSERT_TRUE(section.second.IsMap()) << section.first.as<std::string>();
        for (const auto& entry : section.second) {
            const std::string name =
                section.first.as<std::string>() + "." + entry.first.as<std::string>();
            EXPECT_TRUE(in_file.insert(name).second) << "duplicate " << name;
            const ex2d::service::ConfigKey* key = nullptr;
            for (const auto& k : config_keys()) {
                if (k.name == name) key = &k;
            }
            ASSERT_NE(key, nullptr) << "config/ex2d.yaml has unknown key " << name;
            EXPECT_EQ(entry.second.Scalar(), key->default_value) << name;
        }
    }
    std::set<std::string> in_code;
    for (const auto& key : config_keys()) in_code.insert(key.name);
    EXPECT_EQ(in_file, in_code);
    EXPECT_EQ(in_code.size(), 53u);

    Config config;
    ASSERT_TRUE(config.apply_yaml(read_text(EX2D_CONFIG_FILE), EX2D_CONFIG_FILE).is_ok());
    EXPECT_EQ(config.to_yaml(), Config().to_yaml());
}

TEST_F(ConfigTest, LaterSourcesWin)
{
    const std::string path = write_file(
        "redis:\n  port: 7000\n  host: redis.example\nqueue:\n  lease_s: 60\n"
        "worker:\n  credit: 4\n");
    set_env("EX2D_REDIS_PORT", "7001");
    set_env("EX2D_QUEUE_LEASE_S", "30.5");
    Config config;
    const auto status =
        load(config, {"--config", path, "--redis.port", "7002", "--worker.backend=auto"});
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(config.get_int("redis.port"), 7002);                // flag over env over file
    EXPECT_DOUBLE_EQ(config.get_double("queue.lease_s"), 30.5);   // env over file
    EXPECT_EQ(config.get_string("redis.host"), "redis.example");  // file over default
    EXPECT_EQ(config.get_int("worker.credit"), 4);
    EXPECT_EQ(config.get_string("worker.backend"), "auto");
    EXPECT_EQ(config.get_int("reader.prefetch"), 1);  // default
    EXPECT_FALSE(config.help_requested());
    EXPECT_FALSE(config.print_config_requested());
}

TEST_F(ConfigTest, FlagOverVariableOverFileForEveryType)
{
    const std::string path = write_file(
        "zmq:\n  hwm: 10\n  bind: ipc:///file\nwriter:\n  fsync: false\n"
        "queue:\n  reaper_interval_s: 3\n");
    set_env("EX2D_ZMQ_HWM", "20");
    set_env("EX2D_ZMQ_BIND", "ipc:///variable");
    set_env("EX2D_WRITER_FSYNC", "yes");
    set_env("EX2D_QUEUE_REAPER_INTERVAL_S", "4.5");
    set_env("EX2D_CONFIG", "/nonexistent/from-the-variable.yaml");  // --config wins
    Config config;
    const auto status =
        load(config, {"--zmq.hwm", "30", "--config=" + path, "--queue.reaper_interval_s", "6.25"});
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(config.get_int("zmq.hwm"), 30);
    EXPECT_EQ(config.get_string("zmq.bind"), "ipc:///variable");
    EXPECT_TRUE(config.get_bool("writer.fsync"));
    EXPECT_DOUBLE_EQ(config.get_double("queue.reaper_interval_s"), 6.25);
}

TEST_F(ConfigTest, FlagReplacesVariableWithoutReadingIt)
{
    // A variable the command line overrides is not read, so its bad value is no error; an empty
    // variable counts as unset.
    set_env("EX2D_ZMQ_HWM", "-3");
    set_env("EX2D_REDIS_HOST", "");
    Config config;
    const auto status = load(config, {"--zmq.hwm=40"});
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(config.get_int("zmq.hwm"), 40);
    EXPECT_EQ(config.get_string("redis.host"), "127.0.0.1");
}

TEST_F(ConfigTest, RepeatedFlagLastWinsAndEmptyValueIsQuoted)
{
    set_env("EX2D_SERVICE_NAME", "from-variable");
    Config config;
    const auto status =
        load(config, {"--redis.port", "7000", "--redis.port=7001", "--service.name", ""});
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(config.get_int("redis.port"), 7001);
    EXPECT_EQ(config.get_string("service.name"), "");
}

TEST_F(ConfigTest, ConfigFileFromEnvironment)
{
    set_env("EX2D_CONFIG", write_file("service:\n  name: from-env-file\n"));
    Config config;
    ASSERT_TRUE(load(config, {}).is_ok());
    EXPECT_EQ(config.get_string("service.name"), "from-env-file");
}

TEST_F(ConfigTest, MissingFileIsNamed)
{
    Config config;
    const auto status = load(config, {"--config=/nonexistent/ex2d.yaml"});
    EXPECT_EQ(status.code(), StatusCode::io_error);
    EXPECT_NE(status.message().find("/nonexistent/ex2d.yaml"), std::string::npos);
}

TEST_F(ConfigTest, FolderGivenAsTheFileIsAnError)
{
    // A volume mounted as a folder where the file was expected must not mean "all defaults".
    const std::string folder =
        ::testing::TempDir() + "ex2d-config-folder-" + std::to_string(::getpid());
    std::filesystem::create_directories(folder);
    set_env("EX2D_CONFIG", folder);
    Config config;
    const auto status = load(config, {});
    EXPECT_EQ(status.code(), StatusCode::io_error);
    EXPECT_NE(status.message().find(folder + ": the configuration file is a folder"),
              std::string::npos)
        << status.message();
}

TEST_F(ConfigTest, BadValuesNameKeyAndSource)
{
    struct Case {
        std::vector<std::string> args;
        std::string message;
    };
    const std::vector<Case> cases = {
        {{"--redis.port", "70000"}, "command line: redis.port: out of range [1, 65535]: 70000"},
        {{"--redis.port=12x"}, "command line: redis.port: not an integer: '12x'"},
        {{"--redis.port=1.5"}, "command line: redis.port: not an integer: '1.5'"},
        {{"--queue.lease_s=abc"}, "command line: queue.lease_s: not a number: 'abc'"},
        {{"--queue.lease_s=0"}, "command line: queue.lease_s: out of range [1, 86400]: 0"},
        {{"--writer.fsync=maybe"},
         "command line: writer.fsync: not a boolean (true/false, yes/no, on/off, 1/0): 'maybe'"},
        {{"--worker.backend=gpu"},
         "command line: worker.backend: must be one of cpu, cuda, auto, standin, not 'gpu'"},
        {{"--service.log_level=loud"},
         "command line: service.log_level: must be one of trace, debug, info, warning, warn, "
         "error, critical, not 'loud'"},
        {{"--redis.nope=1"}, "command line: --redis.nope: unknown flag"},
        {{"--redis.port"}, "command line: --redis.port: missing value"},
        {{"--service.name="}, "command line: --service.name: missing value"},
        {{"--config"}, "command line: --config: missing value"},
        {{"--worker.threads", "2", "--redis.nope", "1"},
         "command line: --redis.nope: unknown flag"},
        {{"stray"}, "command line: stray: unexpected argument"},
        {{"-x"}, "command line: -x: unexpected argument"},
        {{"--"}, "command line: --: unexpected argument"},
    };
    for (const auto& c : cases) {
        Config config;
        const auto status = load(config, c.args);
        EXPECT_EQ(status.code(), StatusCode::invalid_argument) << c.message;
        EXPECT_EQ(status.message(), c.message);
    }
}

TEST_F(ConfigTest, BooleanSpellings)
{
    const std::vector<std::pair<std::string, bool>> cases = {
        {"true", true},   {"YES", true}, {"on", true},   {"1", true},
        {"false", false}, {"no", false}, {"Off", false}, {"0", false}};
    for (const auto& [text, expected] : cases) {
        Config config;
        ASSERT_TRUE(config.set("writer.fsync", text, "test").is_ok()) << text;
        EXPECT_EQ(config.get_bool("writer.fsync"), expected) << text;
    }
}

TEST_F(ConfigTest, EnvironmentErrorsAndUnrelatedVariables)
{
    set_env("EX2D_SHARED_DATA_DIR", "/somewhere");  // a tool's variable: ignored
    set_env("EX2D_WORKER_THREADS", "8");
    Config config;
    ASSERT_TRUE(load(config, {}).is_ok());
    EXPECT_EQ(config.get_int("worker.threads"), 8);

    set_env("EX2D_REDIS_FOO", "1");
    Config unknown;
    auto status = load(unknown, {});
    EXPECT_EQ(status.message(), "environment EX2D_REDIS_FOO: redis.foo: unknown key");
    ::unsetenv("EX2D_REDIS_FOO");

    set_env("EX2D_ZMQ_HWM", "-3");
    Config bad;
    status = load(bad, {});
    EXPECT_EQ(status.message(), "environment EX2D_ZMQ_HWM: zmq.hwm: out of range [1, 1000000]: -3");
}

TEST_F(ConfigTest, YamlErrorsNameTheFile)
{
    struct Case {
        std::string yaml;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"redis:\n  colour: blue\n", "f.yaml: redis.colour: unknown key"},
        {"cache:\n  size: 1\n", "f.yaml: cache: unknown section"},
        {"redis: 5\n", "f.yaml: redis: not a map of keys"},
        {"redis:\n  port: [1, 2]\n", "f.yaml: redis.port: not a single value"},
        {"redis:\n  port: none\n", "f.yaml: redis.port: not an integer: 'none'"},
        {"- a\n- b\n", "f.yaml: not a map of sections"},
    };
    for (const auto& c : cases) {
        Config config;
        const auto status = config.apply_yaml(c.yaml, "f.yaml");
        EXPECT_EQ(status.code(), StatusCode::invalid_argument) << c.yaml;
        EXPECT_EQ(status.message(), c.message);
    }
    Config config;
    const auto status = config.apply_yaml("redis: {port: 1\n", "g.yaml");
    EXPECT_EQ(status.message().rfind("g.yaml: ", 0), 0u) << status.message();
}

TEST_F(ConfigTest, PrintedConfigParsesBackToTheSameValues)
{
    Config config;
    ASSERT_TRUE(config.set("service.name", "odd \"name\" \\ # : x\ny", "test").is_ok());
    ASSERT_TRUE(config.set("zmq.bind", "ipc:///tmp/ex2d-*.sock", "test").is_ok());
    ASSERT_TRUE(config.set("queue.lease_s", "0.1e2", "test").is_ok());
    ASSERT_TRUE(config.set("redis.allow_unsafe", "yes", "test").is_ok());
    ASSERT_TRUE(config.set("reader.prefetch", "+7", "test").is_ok());
    const std::string yaml = config.to_yaml();
    EXPECT_NE(yaml.find("\nredis:\n  host: \"127.0.0.1\"  # Redis host\n"), std::string::npos)
        << yaml;

    Config parsed;
    ASSERT_TRUE(parsed.apply_yaml(yaml, "printed").is_ok());
    for (const auto& key : config_keys()) {
        EXPECT_EQ(parsed.get_string(key.name), config.get_string(key.name)) << key.name;
    }
    EXPECT_EQ(parsed.get_string("service.name"), "odd \"name\" \\ # : x\ny");
    EXPECT_DOUBLE_EQ(parsed.get_double("queue.lease_s"), 10.0);
    EXPECT_TRUE(parsed.get_bool("redis.allow_unsafe"));
    EXPECT_EQ(parsed.get_int("reader.prefetch"), 7);
}

TEST_F(ConfigTest, SecretsAreRedacted)
{
    Config config;
    EXPECT_NE(config.to_yaml().find("  password: \"\"  #"), std::string::npos);
    ASSERT_TRUE(config.set("redis.password", "hunter2", "test").is_ok());
    EXPECT_EQ(config.get_string("redis.password"), "hunter2");
    const std::string yaml = config.to_yaml();
    EXPECT_EQ(yaml.find("hunter2"), std::string::npos);
    EXPECT_NE(yaml.find("  password: \"<redacted>\"  #"), std::string::npos);
}

TEST_F(ConfigTest, HelpAndPrintConfigFlags)
{
    Config config;
    ASSERT_TRUE(load(config, {"--help", "--print-config"}).is_ok());
    Config short_help;
    ASSERT_TRUE(load(short_help, {"-h"}).is_ok());
    EXPECT_TRUE(short_help.help_requested());
    EXPECT_FALSE(short_help.print_config_requested());
    EXPECT_TRUE(config.help_requested());
    EXPECT_TRUE(config.print_config_requested());
    const std::string help = config.help_text("ex2d-worker");
    EXPECT_EQ(help.rfind("Usage: ex2d-worker ", 0), 0u);
    EXPECT_NE(help.find("  --redis.port INTEGER  (default 6379, [1, 65535]; EX2D_REDIS_PORT)\n"
                        "      Redis TCP port\n"),
              std::string::npos);
    EXPECT_NE(
        help.find("--worker.backend STRING  (default \"cpu\", one of cpu, cuda, auto, standin;"),
        std::string::npos);
}

}  // namespace
