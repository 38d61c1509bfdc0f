// SPDX-License-Identifier: BSD-3-Clause
// CURVE on the fleet's tcp:// links: key files, the ZAP handler's answers (RFC 27), real socket
// pairs where an allow-listed key gets its message through and an unknown key gets nothing
// (the refusal counted on both sides), and the plaintext guard.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "ex2d/service/curve.hpp"
#include "ex2d/service/metrics.hpp"

namespace {

namespace fs = std::filesystem;
using ex2d::service::CurveAllowList;
using ex2d::service::CurveKeyPair;
using ex2d::service::HandshakeMonitor;
using ex2d::service::Metrics;
using ex2d::service::SocketSecurity;
using ex2d::service::ZapHandler;

CurveKeyPair new_keys()
{
    auto keys = ex2d::service::generate_curve_keypair();
    EXPECT_TRUE(keys.is_ok()) << keys.status().to_string();
    return keys.value();
}

class CurveFiles : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir_ = fs::path(::testing::TempDir()) / ("ex2d_curve_" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    std::string write(const std::string& name, const std::string& text) const
    {
        std::ofstream(path(name)) << text;
        return path(name);
    }
    fs::path dir_;
};

bool eventually(double seconds, const std::function<bool()>& predicate)
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        if (predicate()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return predicate();
}

TEST_F(CurveFiles, KeygenFilesReadBack)
{
    const CurveKeyPair keys = new_keys();
    EXPECT_TRUE(ex2d::service::is_z85_key(keys.public_key));
    EXPECT_TRUE(ex2d::service::is_z85_key(keys.secret_key));
    ASSERT_TRUE(ex2d::service::write_curve_key_files(keys, path("a.key"), path("a.pub")).is_ok());
    struct stat st {};
    ASSERT_EQ(::stat(path("a.key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat(path("a.pub").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);

    auto read = ex2d::service::read_curve_secret_key(path("a.key"));
    ASSERT_TRUE(read.is_ok()) << read.status().to_string();
    EXPECT_EQ(read.value().secret_key, keys.secret_key);
    EXPECT_EQ(read.value().public_key, keys.public_key);  // derived from the secret key
    auto pub = ex2d::service::read_curve_public_keys(path("a.pub"));
    ASSERT_TRUE(pub.is_ok()) << pub.status().to_string();
    ASSERT_EQ(pub.value().size(), 1u);
    EXPECT_EQ(pub.value().begin()->first, keys.public_key);
}

TEST_F(CurveFiles, CzmqCertificatesAndListsAreRead)
{
    const CurveKeyPair a = new_keys(), b = new_keys(), c = new_keys();
    write("cert_secret",
          "#   ZeroMQ CURVE **Secret** Certificate\n\nmetadata\n    name = \"w1\"\ncurve\n"
          "    public-key = \"" +
              a.public_key + "\"\n    secret-key = \"" + a.secret_key + "\"\n");
    auto read = ex2d::service::read_curve_secret_key(path("cert_secret"));
    ASSERT_TRUE(read.is_ok()) << read.status().to_string();
    EXPECT_EQ(read.value().public_key, a.public_key);

    // A list: comments, a name after a key, a CZMQ public certificate.
    const std::string list =
        write("allowed", "# workers\n\n" + a.public_key + " worker-a\n" + b.public_key + "\n");
    auto keys = ex2d::service::read_curve_public_keys(list);
    ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
    EXPECT_EQ(keys.value(), (CurveAllowList{{a.public_key, "worker-a"}, {b.public_key, ""}}));

    // A folder (a mounted ConfigMap or Secret): one key per file, named after the file; the
    // hidden ..data entries are skipped.
    fs::create_directories(dir_ / "folder");
    write("folder/worker-b", b.public_key + "\n");
    write("folder/worker-c.cert", "metadata\ncurve\n    public-key = \"" + c.public_key + "\"\n");
    write("folder/.hidden", "not a key\n");
    keys = ex2d::service::read_curve_public_keys(path("folder"));
    ASSERT_TRUE(keys.is_ok()) << keys.status().to_string();
    EXPECT_EQ(keys.value(),
              (CurveAllowList{{b.public_key, "worker-b"}, {c.public_key, "worker-c.cert"}}));
}

TEST_F(CurveFiles, BadFilesAreNamedWithoutTheirContents)
{
    const std::string secret = "ThisIsNotAKeyButMustNeverBePrinted0123456";
    auto read = ex2d::service::read_curve_secret_key(write("bad.key", secret + "\n"));
    ASSERT_FALSE(read.is_ok());
    EXPECT_NE(read.status().message().find(path("bad.key")), std::string::npos);
    EXPECT_EQ(read.status().message().find(secret), std::string::npos) << read.status().message();

    read = ex2d::service::read_curve_secret_key(path("missing.key"));
    ASSERT_FALSE(read.is_ok());
    EXPECT_NE(read.status().message().find("missing.key"), std::string::npos);

    const CurveKeyPair a = new_keys();
    auto keys = ex2d::service::read_curve_public_keys(
        write("leak", "curve\n    secret-key = \"" + a.secret_key + "\"\n"));
    ASSERT_FALSE(keys.is_ok());
    EXPECT_NE(keys.status().message().find("secret key in a public key list"), std::string::npos);
    EXPECT_EQ(keys.status().message().find(a.secret_key), std::string::npos);

    keys =
        ex2d::service::read_curve_public_keys(write("garbage", a.public_key + "\nhello world\n"));
    ASSERT_FALSE(keys.is_ok());
    EXPECT_NE(keys.status().message().find("garbage:2: not a CURVE public key"), std::string::npos)
        << keys.status().message();
    EXPECT_FALSE(ex2d::service::is_z85_key(a.public_key.substr(1)));
    EXPECT_FALSE(ex2d::service::is_z85_key(std::string(40, ' ')));
}

TEST(CurveEndpoints, TcpAndLoopback)
{
    using ex2d::service::is_loopback_endpoint;
    using ex2d::service::is_tcp_endpoint;
    EXPECT_TRUE(is_tcp_endpoint("tcp://10.0.0.1:5555"));
    EXPECT_FALSE(is_tcp_endpoint("ipc:///run/ex2d/reader-1.sock"));
    EXPECT_TRUE(is_loopback_endpoint("tcp://127.0.0.1:*"));
    EXPECT_TRUE(is_loopback_endpoint("tcp://127.3.2.1:40000"));
    EXPECT_TRUE(is_loopback_endpoint("tcp://localhost:5555"));
    EXPECT_TRUE(is_loopback_endpoint("tcp://[::1]:5555"));
    EXPECT_FALSE(is_loopback_endpoint("tcp://0.0.0.0:*"));
    EXPECT_FALSE(is_loopback_endpoint("tcp://*:5555"));
    EXPECT_FALSE(is_loopback_endpoint("tcp://eth0:5555"));
    EXPECT_FALSE(is_loopback_endpoint("tcp://node17.cluster:5555"));
    EXPECT_FALSE(is_loopback_endpoint("tcp://[::]:5555"));
    EXPECT_FALSE(is_loopback_endpoint("ipc:///tmp/x.sock"));
}

std::string binary_key(const std::string& z85)
{
    uint8_t bytes[32];
    zmq_z85_decode(bytes, z85.c_str());
    return std::string(reinterpret_cast<const char*>(bytes), 32);
}

TEST(ZapAnswer, FollowsRfc27)
{
    const CurveKeyPair known = new_keys(), stranger = new_keys();
    const CurveAllowList allowed = {{known.public_key, "worker-1"}};
    bool accepted = true;
    std::string key;
    auto reply = ZapHandler::answer(
        {"1.0", "7", "ex2d", "10.1.2.3", "", "CURVE", binary_key(known.public_key)}, allowed,
        accepted, key);
    EXPECT_EQ(reply, (std::vector<std::string>{"1.0", "7", "200", "OK", "worker-1", ""}));
    EXPECT_TRUE(accepted);
    EXPECT_EQ(key, known.public_key);

    reply = ZapHandler::answer(
        {"1.0", "8", "ex2d", "10.1.2.3", "", "CURVE", binary_key(stranger.public_key)}, allowed,
        accepted, key);
    EXPECT_EQ(reply,
              (std::vector<std::string>{"1.0", "8", "400", "public key not allowed", "", ""}));
    EXPECT_FALSE(accepted);
    EXPECT_EQ(key, stranger.public_key);

    reply =
        ZapHandler::answer({"1.0", "9", "ex2d", "10.1.2.3", "", "NULL"}, allowed, accepted, key);
    EXPECT_EQ(reply[2], "400");
    EXPECT_FALSE(accepted);
    reply = ZapHandler::answer({"1.0", "10", "ex2d", "10.1.2.3", "", "PLAIN", "user", "pass"},
                               allowed, accepted, key);
    EXPECT_EQ(reply[2], "400");
    reply =
        ZapHandler::answer({"1.0", "11", "ex2d", "", "", "CURVE", "short"}, allowed, accepted, key);
    EXPECT_EQ(reply[2], "400");
    EXPECT_FALSE(accepted);
    reply = ZapHandler::answer({"2.0", "12", "ex2d", "", "", "CURVE", binary_key(known.public_key)},
                               allowed, accepted, key);
    EXPECT_EQ(reply[2], "500");
    EXPECT_FALSE(accepted);
    reply = ZapHandler::answer({"1.0"}, allowed, accepted, key);
    EXPECT_EQ(reply.size(), 6u);
    EXPECT_EQ(reply[2], "500");
}

/// A reader-like ROUTER with CURVE and the ZAP handler, and worker-like DEALERs.
TEST(CurveSockets, AllowedKeyDeliversUnknownKeyIsRefusedAndCounted)
{
    const CurveKeyPair server_keys = new_keys(), good = new_keys(), rogue = new_keys();
    Metrics server_metrics("reader");
    zmq::context_t server_context;
    zmq::socket_t router(server_context, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    SocketSecurity server(server_keys, {{good.public_key, "worker-good"}}, false, &server_metrics);
    auto curve = server.prepare_bind(server_context, router, "tcp://127.0.0.1:*");
    ASSERT_TRUE(curve.is_ok()) << curve.status().to_string();
    ASSERT_TRUE(curve.value());
    router.bind("tcp://127.0.0.1:*");
    const std::string endpoint = router.get(zmq::sockopt::last_endpoint);

    zmq::context_t client_context;
    Metrics rogue_metrics("worker"), good_metrics("worker");
    auto dealer = [&](SocketSecurity& security) {
        zmq::socket_t s(client_context, zmq::socket_type::dealer);
        s.set(zmq::sockopt::linger, 0);
        const auto allowed = security.prepare_connect(s, endpoint, server_keys.public_key);
        EXPECT_TRUE(allowed.is_ok()) << allowed.to_string();
        return s;
    };
    // The rogue trusts the server's key (it read it from Redis), but its own key is unknown.
    SocketSecurity rogue_security(rogue, {}, false, nullptr);
    zmq::socket_t rogue_socket = dealer(rogue_security);
    HandshakeMonitor rogue_watch(client_context, rogue_socket, "reader", &rogue_metrics);
    rogue_socket.connect(endpoint);
    ASSERT_TRUE(rogue_socket.send(zmq::str_buffer("from-rogue"), zmq::send_flags::dontwait));
    ASSERT_TRUE(eventually(10, [&] { return server_metrics.zap_requests("refused").Value() >= 1; }))
        << server_metrics.serialize();
    // The client learns that it was refused.
    ASSERT_TRUE(eventually(10, [&] {
        rogue_watch.poll();
        return rogue_watch.refusals() >= 1;
    }));
    EXPECT_GE(rogue_metrics.peers_refused("handshake_refused").Value(), 1);

    SocketSecurity good_security(good, {{server_keys.public_key, "reader"}}, false, nullptr);
    zmq::socket_t good_socket = dealer(good_security);
    HandshakeMonitor good_watch(client_context, good_socket, "reader", &good_metrics);
    good_socket.connect(endpoint);
    ASSERT_TRUE(good_socket.send(zmq::str_buffer("from-good"), zmq::send_flags::none));

    std::vector<std::string> received;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < end) {
        zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
        std::vector<zmq::message_t> parts;
        ASSERT_TRUE(zmq::recv_multipart(router, std::back_inserter(parts)));
        ASSERT_EQ(parts.size(), 2u);
        received.push_back(parts[1].to_string());
        // The routing id carries the ZAP user id in its metadata: the allow-list's name.
        EXPECT_STREQ(parts[1].gets("User-Id"), "worker-good");
    }
    EXPECT_EQ(received, std::vector<std::string>{"from-good"});
    EXPECT_EQ(good_watch.poll(), 0);
    EXPECT_EQ(good_metrics.peers_refused("handshake_refused").Value(), 0);
    EXPECT_GE(server_metrics.zap_requests("refused").Value(), 1);
    EXPECT_EQ(server_metrics.zap_requests("accepted").Value(), 1);
    const std::string exposition = server_metrics.serialize();
    EXPECT_NE(exposition.find("ex2d_zap_requests_total{role=\"reader\",result=\"refused\"}"),
              std::string::npos)
        << exposition;
    rogue_socket.close();
    good_socket.close();
    router.close();
}

TEST(CurveSockets, PlaintextClientGetsNothingThroughACurveServer)
{
    const CurveKeyPair server_keys = new_keys(), good = new_keys();
    zmq::context_t context;
    zmq::socket_t pull(context, zmq::socket_type::pull);
    pull.set(zmq::sockopt::linger, 0);
    Metrics metrics("writer");
    SocketSecurity server(server_keys, {{good.public_key, ""}}, false, &metrics);
    ASSERT_TRUE(server.prepare_bind(context, pull, "tcp://127.0.0.1:*").is_ok());
    pull.bind("tcp://127.0.0.1:*");
    const std::string endpoint = pull.get(zmq::sockopt::last_endpoint);
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.connect(endpoint);  // no keys at all
    (void)push.send(zmq::str_buffer("plaintext"), zmq::send_flags::dontwait);
    pull.set(zmq::sockopt::rcvtimeo, 1500);
    zmq::message_t message;
    EXPECT_FALSE(pull.recv(message).has_value());
    push.close();
    pull.close();
}

TEST(CurvePolicy, PlaintextGuardAndRequiredKeys)
{
    zmq::context_t context;
    zmq::socket_t socket(context, zmq::socket_type::pull);
    socket.set(zmq::sockopt::linger, 0);
    Metrics metrics("worker");

    SocketSecurity none({}, {}, false, &metrics);
    EXPECT_FALSE(none.curve_enabled());
    auto bound = none.prepare_bind(context, socket, "tcp://0.0.0.0:*");
    ASSERT_FALSE(bound.is_ok());
    EXPECT_NE(bound.status().message().find("zmq.allow_plaintext"), std::string::npos);
    EXPECT_FALSE(none.prepare_bind(context, socket, "tcp://*:5555").is_ok());
    ASSERT_TRUE(none.prepare_bind(context, socket, "tcp://127.0.0.1:*").is_ok());
    EXPECT_FALSE(none.prepare_bind(context, socket, "tcp://127.0.0.1:*").value());
    EXPECT_FALSE(none.prepare_bind(context, socket, "ipc:///tmp/x.sock").value());
    SocketSecurity plaintext({}, {}, true, nullptr);
    EXPECT_TRUE(plaintext.prepare_bind(context, socket, "tcp://0.0.0.0:*").is_ok());

    const CurveKeyPair keys = new_keys(), server = new_keys(), other = new_keys();
    SocketSecurity no_list(keys, {}, false, nullptr);
    bound = no_list.prepare_bind(context, socket, "tcp://0.0.0.0:*");
    ASSERT_FALSE(bound.is_ok());
    EXPECT_NE(bound.status().message().find("zmq.curve_allowed_keys is empty"), std::string::npos);

    // The connecting side.
    std::string reason;
    EXPECT_TRUE(none.prepare_connect(socket, "tcp://127.0.0.1:4000", "", &reason).is_ok());
    EXPECT_FALSE(none.prepare_connect(socket, "tcp://10.0.0.5:4000", "", &reason).is_ok());
    EXPECT_EQ(reason, "plaintext_peer");
    EXPECT_FALSE(
        none.prepare_connect(socket, "tcp://10.0.0.5:4000", server.public_key, &reason).is_ok());
    EXPECT_EQ(reason, "curve_required");
    EXPECT_TRUE(none.prepare_connect(socket, "ipc:///tmp/r.sock", "", &reason).is_ok());

    SocketSecurity worker(keys, {{server.public_key, "reader-1"}}, false, &metrics);
    EXPECT_TRUE(
        worker.prepare_connect(socket, "tcp://10.0.0.5:4000", server.public_key, &reason).is_ok());
    EXPECT_EQ(socket.get(zmq::sockopt::mechanism), ZMQ_CURVE);
    EXPECT_TRUE(worker.prepare_connect(socket, "ipc:///tmp/r.sock", "", &reason).is_ok());
    EXPECT_EQ(socket.get(zmq::sockopt::mechanism), ZMQ_NULL);
    EXPECT_FALSE(worker.prepare_connect(socket, "tcp://127.0.0.1:4000", "", &reason).is_ok());
    EXPECT_EQ(reason, "plaintext_peer");  // keys configured: CURVE required, even on loopback
    EXPECT_FALSE(
        worker.prepare_connect(socket, "tcp://10.0.0.5:4000", other.public_key, &reason).is_ok());
    EXPECT_EQ(reason, "untrusted_key");
    EXPECT_FALSE(worker.prepare_connect(socket, "tcp://10.0.0.5:4000", "short", &reason).is_ok());
    EXPECT_EQ(reason, "bad_key");
    EXPECT_EQ(metrics.peers_refused("plaintext_peer").Value(), 2);
    EXPECT_EQ(metrics.peers_refused("curve_required").Value(), 1);
    EXPECT_EQ(metrics.peers_refused("untrusted_key").Value(), 1);
    socket.close();
}

}  // namespace
