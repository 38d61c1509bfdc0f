// SPDX-License-Identifier: BSD-3-Clause
// The fleet's security end to end with a real redis-server and the real binaries: one Redis ACL
// user per role (tools/ex2d-redis-acl) running an exposure with no refusal in Redis' ACL LOG,
// and refusing what a role does not need; CURVE with ZAP allow-lists on tcp://127.0.0.1, where
// a rogue key and a keyless worker get nothing; secrets absent from every log line and from
// --print-config.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/service/redis_client.hpp"
#include "fleet_harness.hpp"

namespace ex2d::fleet_test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kCameras = {"b0", "r0"};
const std::vector<std::string> kRoles = {"reader", "worker", "writer"};

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string first_line(const std::string& path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

std::string repo_root()
{
    return fs::path(__FILE__).parent_path().parent_path().parent_path().string();
}

/// Passwords for every role (and an admin for the test itself) and the ACL file made from
/// them by tools/ex2d-redis-acl, in a folder outside the fleet's.
struct AclFiles {
    std::string dir, passwords, acl;
    explicit AclFiles(const std::string& name)
    {
        dir = (fs::temp_directory_path() / ("ex2d-acl-" + name + "-" + std::to_string(::getpid())))
                  .string();
        fs::remove_all(dir);
        passwords = dir + "/passwords";
        acl = dir + "/users.acl";
        fs::create_directories(passwords);
        std::ofstream(passwords + "/admin")
            << "admin-of-the-test-" << ::getpid() << "-0123456789\n";
    }
    ~AclFiles()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    int generate() const
    {
        Process tool("acl",
                     {"/bin/bash", repo_root() + "/tools/ex2d-redis-acl", "--passwords", passwords,
                      "--generate", "--output", acl},
                     {}, dir + "/acl-tool.log");
        return tool.wait(30);
    }
    std::string password(const std::string& role) const
    {
        return first_line(passwords + "/" + role);
    }
    std::map<std::string, std::string> settings(const std::string& role) const
    {
        return {{"redis.user", "ex2d-" + role}, {"redis.password_file", passwords + "/" + role}};
    }
    RedisSetup redis_setup() const { return {{"--aclfile", acl}, "ex2d-admin", password("admin")}; }
    std::map<std::string, std::string> ctl_env() const
    {
        return {{"EX2D_REDIS_USER", "ex2d-ctl"}, {"EX2D_REDIS_PASSWORD_FILE", passwords + "/ctl"}};
    }
};

bool have_acl_tool()
{
    return fs::exists(repo_root() + "/tools/ex2d-redis-acl");
}

/// One command as `user` on a fresh connection.
service::RedisValue as_user(const Fleet& fleet, const std::string& user,
                            const std::string& password, const std::vector<std::string>& args)
{
    service::RedisClient client({"127.0.0.1", fleet.redis_port(), user, password, 2000});
    auto r = client.command(args);
    if (!r.is_ok())
        return service::RedisValue{service::RedisValue::Type::error, 0, r.status().message(), {}};
    return r.value();
}

bool refused(const service::RedisValue& v)
{
    return v.is_error() &&
           (v.str.rfind("NOPERM", 0) == 0 || v.str.find("can't") != std::string::npos);
}

/// Every line of every log under the fleet's folder that contains `secret`.
std::vector<std::string> lines_with(const std::string& folder, const std::string& secret)
{
    std::vector<std::string> found;
    for (const auto& entry : fs::recursive_directory_iterator(folder)) {
        if (!entry.is_regular_file() || entry.path().extension() != ".log") continue;
        std::ifstream in(entry.path());
        for (std::string line; std::getline(in, line);) {
            if (line.find(secret) != std::string::npos)
                found.push_back(entry.path().string() + ": " + line);
        }
    }
    return found;
}

/// The value of one series of the exposition (0 when absent).
double metric(const std::string& text, const std::string& series)
{
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return 0;
}

std::string metrics_of(Fleet& fleet, const std::string& name)
{
    return http_get(fleet.redis({"HGET", "ex2d:proc:" + name, "http"}).str, "/metrics");
}

TEST(FleetSecurity, AclUserPerRoleRunsAnExposureAndIsConfined)
{
    if (!have_acl_tool()) GTEST_SKIP() << "tools/ex2d-redis-acl not found next to the sources";
    AclFiles files("roles");
    ASSERT_EQ(files.generate(), 0) << read_text(files.dir + "/acl-tool.log");
    const std::string acl = read_text(files.acl);
    EXPECT_NE(acl.find("user default off"), std::string::npos) << acl;
    for (const auto& role : {"reader", "worker", "writer", "ctl", "admin"}) {
        // Hashes only: no password in the ACL file.
        EXPECT_EQ(acl.find(files.password(role)), std::string::npos) << role;
    }
    // A bad password file stops the tool with 2 and no ACL file.
    std::ofstream(files.dir + "/short-reader") << "short\n";
    fs::create_directories(files.dir + "/bad");
    for (const auto& role : {"worker", "writer", "ctl"})
        fs::copy_file(files.passwords + "/" + role, files.dir + "/bad/" + role);
    fs::copy_file(files.dir + "/short-reader", files.dir + "/bad/reader");
    Process bad("acl",
                {"/bin/bash", repo_root() + "/tools/ex2d-redis-acl", "--passwords",
                 files.dir + "/bad", "--output", files.dir + "/bad.acl"},
                {}, files.dir + "/acl-bad.log");
    EXPECT_EQ(bad.wait(30), kExitUsage);
    EXPECT_NE(bad.log().find("bad/reader: the password is shorter than 16 characters"),
              std::string::npos)
        << bad.log();
    EXPECT_FALSE(fs::exists(files.dir + "/bad.acl"));

    Fleet fleet("acl", files.redis_setup());
    fleet.ctl_env = files.ctl_env();
    fleet.make_exposure(21, kCameras);
    for (const auto& role : kRoles) fleet.start(role, role + "-1", files.settings(role));
    ASSERT_EQ(fleet.submit(21), 0);
    ASSERT_TRUE(fleet.wait_exposure(21, 90));
    const Outcome o = fleet.check({21}, kCameras);
    std::printf("fleet with ACL users: %s\n", o.report().c_str());
    EXPECT_EQ(o.done, 2);
    EXPECT_EQ(o.lost + o.duplicates + o.partial + o.dead, 0);

    // Killed and restarted, Redis comes back with the fleet's state: it replays the scripts'
    // effects (MULTI/EXEC blocks in its AOF) as the default user, which Redis 7.0 checks
    // against that user's ACL; a default user without permissions lost every one of them.
    const std::string exposure = "ex2d:exposure:nightly:00000021";
    ASSERT_EQ(fleet.redis({"HGET", exposure, "n_done"}).str, "2");
    fleet.kill_redis();
    fleet.restart_redis();
    EXPECT_EQ(fleet.redis({"HGET", exposure, "n_done"}).str, "2");
    EXPECT_EQ(fleet.redis({"HGET", exposure, "state"}).str, "done");
    EXPECT_EQ(read_text(fleet.dir() + "/logs/redis.log").find("NOPERM"), std::string::npos)
        << read_text(fleet.dir() + "/logs/redis.log");
    std::string out;
    EXPECT_EQ(fleet.ctl({"status", "--exposure", "21"}, &out), 0) << out;
    EXPECT_EQ(fleet.ctl({"workers"}, &out), 0) << out;
    EXPECT_EQ(fleet.ctl({"requeue", "--exposure", "21"}, &out), 0) << out;
    EXPECT_EQ(fleet.ctl({"drain", "worker-1"}, &out), 0) << out;
    EXPECT_TRUE(eventually(20, [&] {
        return fleet.redis({"EXISTS", "ex2d:proc:worker-1"}).integer == 0;
    }));
    // Nothing the fleet did was refused: every command of every role is in its ACL.
    const auto log = fleet.redis({"ACL", "LOG"});
    std::string first_refusal;
    if (!log.elements.empty()) {
        for (const auto& [k, v] : log.elements[0].pairs()) first_refusal += k + "=" + v + " ";
    }
    EXPECT_EQ(log.elements.size(), 0u) << "ACL LOG has refusals, the last: " << first_refusal;
    EXPECT_EQ(fleet.count_log_lines("redis refused"), 0);

    // What a role does not need is refused.
    const std::string reader_pw = files.password("reader");
    auto reader = [&](const std::vector<std::string>& args) {
        return as_user(fleet, "ex2d-reader", reader_pw, args);
    };
    EXPECT_TRUE(refused(reader({"FLUSHALL"})));
    EXPECT_TRUE(refused(reader({"CONFIG", "GET", "*"})));
    EXPECT_TRUE(refused(reader({"CONFIG", "SET", "appendonly", "no"})));
    EXPECT_TRUE(refused(reader({"KEYS", "*"})));
    EXPECT_TRUE(refused(reader({"SET", "ex2d:anything", "1"})));
    EXPECT_TRUE(refused(reader({"HSET", "other:proc:x", "a", "1"})));  // outside the namespace
    EXPECT_TRUE(refused(reader({"HSET", "ex2d:campaigns:active", "a", "1"})));  // read only
    EXPECT_TRUE(refused(reader({"EVAL", "return 1", "0"})));
    EXPECT_TRUE(refused(reader({"ACL", "LIST"})));
    EXPECT_TRUE(refused(reader({"SCRIPT", "FLUSH"})));
    const auto sha = reader({"SCRIPT", "LOAD", "return redis.call('SET', 'other:key', '1')"});
    ASSERT_FALSE(sha.is_error()) << sha.str;
    EXPECT_TRUE(
        refused(reader({"EVALSHA", sha.str, "0"})));  // scripts run with the caller's rights
    EXPECT_FALSE(reader({"HSET", "ex2d:proc:probe", "a", "1"}).is_error());  // its own kind of key
    const std::string worker_pw = files.password("worker");
    EXPECT_TRUE(refused(
        as_user(fleet, "ex2d-worker", worker_pw,
                {"XREADGROUP", "GROUP", "readers", "w", "STREAMS", "ex2d:jobs:nightly", ">"})));
    EXPECT_TRUE(
        refused(as_user(fleet, "ex2d-worker", worker_pw, {"XADD", "ex2d:dead", "*", "a", "b"})));
    EXPECT_TRUE(refused(as_user(fleet, "ex2d-ctl", files.password("ctl"), {"FLUSHDB"})));
    EXPECT_TRUE(
        refused(as_user(fleet, "ex2d-ctl", files.password("ctl"), {"SET", "other:key", "1"})));
    EXPECT_GT(fleet.redis({"ACL", "LOG"}).elements.size(), 0u);  // the refusals above are logged

    // The default user is off: no command without AUTH, and no AUTH as default.
    EXPECT_NE(as_user(fleet, "", "", {"GET", "ex2d:x"}).str.find("NOAUTH"), std::string::npos);
    service::RedisClient as_default({"127.0.0.1", fleet.redis_port(), "default", "anything", 2000});
    const Status denied = as_default.connect_once();
    EXPECT_EQ(denied.code(), StatusCode::invalid_argument);
    EXPECT_NE(denied.message().find("WRONGPASS"), std::string::npos) << denied.message();

    // A wrong password: the service exits 2 naming the user, never the password.
    const std::string wrong = "wrong-password-" + std::to_string(::getpid()) + "-abcdefghij";
    std::ofstream(files.dir + "/wrong") << wrong << "\n";
    for (const auto& role : kRoles) {
        Process& p = fleet.start(role, role + "-wrongpass",
                                 {{"redis.user", "ex2d-" + role},
                                  {"redis.password_file", files.dir + "/wrong"},
                                  {"service.log_level", "debug"}});
        EXPECT_EQ(p.wait(20), kExitUsage) << role << ": " << p.log();
        EXPECT_NE(p.log().find("authentication failed for user 'ex2d-" + role + "'"),
                  std::string::npos)
            << p.log();
    }
    fleet.ctl_env["EX2D_REDIS_PASSWORD_FILE"] = files.dir + "/wrong";
    EXPECT_EQ(fleet.ctl({"status"}, &out), kExitUsage) << out;
    EXPECT_NE(out.find("authentication failed for user 'ex2d-ctl'"), std::string::npos) << out;
    EXPECT_EQ(lines_with(fleet.dir() + "/logs", wrong), std::vector<std::string>{});
    for (const auto& role : {"reader", "worker", "writer", "ctl", "admin"}) {
        EXPECT_EQ(lines_with(fleet.dir() + "/logs", files.password(role)),
                  std::vector<std::string>{})
            << role;
    }
}

TEST(FleetSecurity, CurveOverTcpAdmitsOnlyAllowListedKeysAndKeepsSecretsOutOfLogs)
{
    if (!have_acl_tool()) GTEST_SKIP() << "tools/ex2d-redis-acl not found next to the sources";
    AclFiles files("curve");
    ASSERT_EQ(files.generate(), 0) << read_text(files.dir + "/acl-tool.log");
    Fleet fleet("curve", files.redis_setup());
    fleet.ctl_env = files.ctl_env();
    fleet.settings["zmq.bind"] = "tcp://127.0.0.1:*";
    fleet.settings["service.log_level"] = "debug";

    // Key pairs with ex2dctl keygen; the servers admit the folder of worker keys, the worker
    // trusts the servers' keys.
    const std::string keys = fleet.dir() + "/keys";
    fs::create_directories(keys + "/workers");
    std::map<std::string, std::string> public_keys;
    for (const std::string who : {"reader", "writer", "worker", "rogue"}) {
        std::string out;
        ASSERT_EQ(fleet.ctl({"keygen", "--secret-file", keys + "/" + who + ".key", "--public-file",
                             keys + "/" + who + ".pub"},
                            &out),
                  0)
            << out;
        public_keys[who] = first_line(keys + "/" + who + ".pub");
        EXPECT_EQ(out, public_keys[who] + "\n");  // the public key only on the terminal
        EXPECT_EQ(fs::status(keys + "/" + who + ".key").permissions() & fs::perms::all,
                  fs::perms::owner_read | fs::perms::owner_write);
    }
    std::string refused_again;
    EXPECT_EQ(fleet.ctl({"keygen", "--secret-file", keys + "/worker.key", "--public-file",
                         keys + "/x.pub"},
                        &refused_again),
              kExitUsage)
        << refused_again;
    fs::copy_file(keys + "/worker.pub", keys + "/workers/worker-1");
    std::ofstream(keys + "/servers") << public_keys["reader"] << " reader-1\n"
                                     << public_keys["writer"] << " writer-1\n";
    auto curve = [&](const std::string& role, const std::string& key, const std::string& allowed) {
        auto s = files.settings(role);
        s["zmq.curve_secret_key_file"] = keys + "/" + key + ".key";
        s["zmq.curve_allowed_keys"] = allowed;
        return s;
    };

    fleet.make_exposure(22, kCameras);
    fleet.start("reader", "reader-1", curve("reader", "reader", keys + "/workers"));
    fleet.start("writer", "writer-1", curve("writer", "writer", keys + "/workers"));
    // A worker whose key is not allow-listed, and one without keys, start first: neither may
    // take a frame.
    fleet.start("worker", "worker-rogue", curve("worker", "rogue", keys + "/servers"));
    fleet.start("worker", "worker-plain", files.settings("worker"));
    ASSERT_TRUE(eventually(20, [&] {
        return metric(metrics_of(fleet, "reader-1"),
                      "ex2d_zap_requests_total{role=\"reader\",result=\"refused\"}") >= 1 &&
               metric(metrics_of(fleet, "worker-plain"),
                      "ex2d_peers_refused_total{role=\"worker\",reason=\"curve_required\"}") >= 2;
    }));
    fleet.start("worker", "worker-1", curve("worker", "worker", keys + "/servers"));
    ASSERT_EQ(fleet.submit(22), 0);
    ASSERT_TRUE(fleet.wait_exposure(22, 90));
    const Outcome o = fleet.check({22}, kCameras);
    std::printf("fleet over CURVE: %s\n", o.report().c_str());
    EXPECT_EQ(o.done, 2);
    EXPECT_EQ(o.lost + o.duplicates + o.partial + o.dead, 0);

    // The servers advertise their public keys next to their tcp:// endpoints.
    const std::string reader_entry = fleet.redis({"HGET", "ex2d:endpoints", "reader-1"}).str;
    EXPECT_TRUE(std::regex_search(reader_entry,
                                  std::regex("^reader ready [0-9]+ tcp://127\\.0\\.0\\.1:[0-9]+ ")))
        << reader_entry;
    EXPECT_EQ(reader_entry.substr(reader_entry.rfind(' ') + 1), public_keys["reader"]);
    EXPECT_EQ(fleet.redis({"HGET", "ex2d:proc:writer-1", "curve_key"}).str, public_keys["writer"]);

    // Only worker-1 extracted; the rogue's handshakes were refused and counted, and logged by
    // fingerprint; the keyless worker never connected.
    const std::string reader_metrics = metrics_of(fleet, "reader-1");
    EXPECT_GE(
        metric(reader_metrics, "ex2d_zap_requests_total{role=\"reader\",result=\"accepted\"}"), 1);
    EXPECT_GE(metric(metrics_of(fleet, "writer-1"),
                     "ex2d_zap_requests_total{role=\"writer\",result=\"refused\"}"),
              1);
    EXPECT_EQ(metric(metrics_of(fleet, "worker-1"),
                     "ex2d_frames_total{role=\"worker\",state=\"extracted\"}"),
              2);
    EXPECT_EQ(metric(metrics_of(fleet, "worker-rogue"),
                     "ex2d_frames_total{role=\"worker\",state=\"received\"}"),
              0);
    EXPECT_EQ(metric(metrics_of(fleet, "worker-plain"),
                     "ex2d_frames_total{role=\"worker\",state=\"received\"}"),
              0);
    EXPECT_GE(metric(metrics_of(fleet, "worker-rogue"),
                     "ex2d_peers_refused_total{role=\"worker\",reason=\"handshake_refused\"}"),
              1);
    EXPECT_EQ(metric(metrics_of(fleet, "worker-1"),
                     "ex2d_peers_refused_total{role=\"worker\",reason=\"handshake_refused\"}"),
              0);
    EXPECT_GE(fleet.count_log_lines("handshake refused by tcp://127.0.0.1:"), 1);
    EXPECT_GE(fleet.count_log_lines("zap refused key=" + public_keys["rogue"].substr(0, 8)), 1);
    EXPECT_EQ(fleet.count_log_lines("zap refused key=" + public_keys["worker"].substr(0, 8)), 0);

    // The plaintext guard: no keys and a non-loopback tcp:// bind is refused at start.
    Process& open = fleet.start("reader", "reader-open",
                                {{"zmq.bind", "tcp://0.0.0.0:*"},
                                 {"redis.user", "ex2d-reader"},
                                 {"redis.password_file", files.passwords + "/reader"}});
    EXPECT_EQ(open.wait(20), kExitUsage) << open.log();
    EXPECT_NE(open.log().find("zmq.allow_plaintext"), std::string::npos) << open.log();
    // A CURVE server without an allow-list is refused too.
    Process& unlisted = fleet.start("writer", "writer-unlisted", curve("writer", "writer", ""));
    EXPECT_EQ(unlisted.wait(20), kExitUsage) << unlisted.log();
    EXPECT_NE(unlisted.log().find("zmq.curve_allowed_keys is empty"), std::string::npos)
        << unlisted.log();

    // --print-config with every secret given: the password is redacted, key files are paths.
    const std::string direct =
        "direct-password-" + std::to_string(::getpid()) + "-on-the-command-line";
    for (const auto& role : kRoles) {
        auto s = curve(role, role == "worker" ? "worker" : role, keys + "/workers");
        s["redis.password"] = direct;
        s["service.log_level"] = "debug";
        std::vector<std::string> argv = {std::string(EX2D_BIN_DIR) + "/" + role + "/ex2d-" + role,
                                         "--print-config"};
        for (const auto& [k, v] : s) {
            argv.push_back("--" + k);
            argv.push_back(v);
        }
        Process p("print-config", argv, {{"EX2D_REDIS_PASSWORD", direct}},
                  fleet.dir() + "/logs/print-config-" + role + ".log");
        ASSERT_EQ(p.wait(20), 0) << p.log();
        EXPECT_NE(p.log().find("password: \"<redacted>\""), std::string::npos) << p.log();
        EXPECT_NE(p.log().find("curve_secret_key_file: \"" + keys), std::string::npos) << p.log();
        // A wrong direct password at debug level: refused, and not echoed.
        Process& failing = fleet.start(
            role, role + "-badpass", {{"redis.user", "ex2d-" + role}, {"redis.password", direct}});
        EXPECT_EQ(failing.wait(20), kExitUsage) << failing.log();
    }
    // No secret in any log: passwords, the direct password, the secret keys.
    std::vector<std::string> secrets = {direct};
    for (const auto& role : {"reader", "worker", "writer", "ctl", "admin"})
        secrets.push_back(files.password(role));
    for (const std::string who : {"reader", "writer", "worker", "rogue"}) {
        std::ifstream in(keys + "/" + who + ".key");
        for (std::string line; std::getline(in, line);) {
            if (line.size() == 40) secrets.push_back(line);
        }
    }
    EXPECT_EQ(secrets.size(), 10u);
    for (const auto& secret : secrets) {
        EXPECT_EQ(lines_with(fleet.dir() + "/logs", secret), std::vector<std::string>{})
            << secret.substr(0, 4);
    }
    EXPECT_GT(fleet.count_log_lines("\"level\":\"debug\""), 0);  // debug logs were on
}

}  // namespace
}  // namespace ex2d::fleet_test
