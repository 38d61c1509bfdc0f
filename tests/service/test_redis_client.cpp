// SPDX-License-Identifier: BSD-3-Clause
// RedisClient's connection errors: a Redis that accepts the connection and then never answers
// AUTH (cut off by a partition between connect and reply, as multihost.redis-cut caught) is
// unreachable, which services and `ex2dctl wait` ride out; only an error reply is a refused
// password, which they do not retry. A refused password against a real redis-server is in
// FleetSecurity.
#include <atomic>
#include <stdexcept>
#include <string>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace {

using ex2d::StatusCode;
using ex2d::service::RedisClient;
using ex2d::service::RedisOptions;

/// A loopback TCP port whose connections complete in the kernel's backlog and never get a
/// byte back: a peer that stopped answering after the handshake.
class SilentListener {
public:
    SilentListener()
    {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd_ < 0) throw std::runtime_error("socket() failed");
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd_, 16) != 0 ||
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            ::close(fd_);
            throw std::runtime_error("cannot listen on a loopback port");
        }
        port_ = ntohs(addr.sin_port);
    }
    ~SilentListener() { ::close(fd_); }
    SilentListener(const SilentListener&) = delete;
    SilentListener& operator=(const SilentListener&) = delete;
    int port() const { return port_; }

private:
    int fd_ = -1;
    int port_ = 0;
};

RedisOptions silent_redis(const SilentListener& listener)
{
    return {"127.0.0.1", listener.port(), "ex2d-reader", "a-password-never-logged", 200};
}

TEST(RedisClient, NoReplyToAuthIsUnreachableNotARefusedPassword)
{
    SilentListener listener;
    RedisClient client(silent_redis(listener));
    const ex2d::Status s = client.connect_once();
    EXPECT_EQ(s.code(), StatusCode::io_error) << s.message();
    const std::string want = "redis 127.0.0.1:" + std::to_string(listener.port()) +
                             ": no reply to AUTH as user 'ex2d-reader'";
    EXPECT_EQ(s.message().rfind(want, 0), 0u) << s.message();
    EXPECT_EQ(s.message().find("authentication failed"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("a-password-never-logged"), std::string::npos) << s.message();
}

TEST(RedisClient, ConnectKeepsTryingWhileAuthGetsNoReply)
{
    SilentListener listener;
    std::atomic<int> asked{0};
    // A service's connect: it retries (asking keep_trying between attempts) until told to stop.
    RedisClient client(silent_redis(listener), [&] { return ++asked < 3; });
    const ex2d::Status s = client.connect();
    EXPECT_EQ(s.code(), StatusCode::io_error) << s.message();
    EXPECT_EQ(asked.load(), 3);
}

}  // namespace
