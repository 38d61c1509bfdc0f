// SPDX-License-Identifier: BSD-3-Clause
// A receiving socket whose process stops reading while its peer goes away: what a reader or a
// writer does while it waits for an unreachable Redis and a worker exits meanwhile. libzmq
// 4.3.4 (Debian 12) stops reading the connection once the socket's receive queue is full;
// an error on the connection then only marks it broken, and the next ZMTP heartbeat tries to
// write to it and aborts the process (`Assertion failed: !_io_error
// (src/stream_engine_base.cpp:331)`, zeromq/libzmq#4364). The fleet's sockets set no receive
// limit (the credit and grant protocol bounds what a peer can send), so the connection is
// never stopped and the process lives; the same socket with a receive limit of 2 aborts.
// A socket closed with a linger refuses what its connections receive until the linger ends,
// which stops them the same way: a draining process closes with close_dropping_unsent.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "ex2d/service/zmq_util.hpp"

namespace {

using ex2d::service::ZmqSettings;

ZmqSettings fleet_like_settings()
{
    ZmqSettings s;
    s.hwm = 2;
    s.linger_ms = 0;
    s.max_message_bytes = -1;
    // The last heartbeat before the stall is sent at the connection's start; the next comes
    // 2 s later, after the reset, which is when libzmq's defect bites.
    s.heartbeat_ivl_ms = 2000;
    s.heartbeat_timeout_ms = 10000;
    return s;
}

/// Connects `dealer` to `endpoint` and returns the file descriptor of its TCP connection (from
/// the socket monitor's CONNECTED event).
int connection_fd(zmq::context_t& context, zmq::socket_t& dealer, const std::string& endpoint)
{
    const std::string monitor_endpoint = "inproc://stall-monitor";
    if (zmq_socket_monitor(dealer.handle(), monitor_endpoint.c_str(), ZMQ_EVENT_CONNECTED) != 0)
        throw std::runtime_error("zmq_socket_monitor failed");
    zmq::socket_t monitor(context, zmq::socket_type::pair);
    monitor.connect(monitor_endpoint);
    dealer.connect(endpoint);
    std::vector<zmq::message_t> event;
    if (!zmq::recv_multipart(monitor, std::back_inserter(event)) || event[0].size() < 6)
        throw std::runtime_error("no CONNECTED event");
    std::uint32_t fd = 0;
    std::memcpy(&fd, event[0].data<char>() + 2, sizeof fd);
    return int(fd);
}

/// Runs `body` in a child process and returns the child's wait status.
template <typename Body>
int child_status(Body body)
{
    const pid_t child = ::fork();
    if (child == 0) {
        body();
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return status;
}

/// Resets the TCP connection `fd` when its socket closes, as a process killed with its
/// connection half-read does: the peer's kernel reports an error on the connection.
void reset_on_close(int fd)
{
    const linger abort_on_close{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
}

std::string describe(int status)
{
    return "wait status " + std::to_string(status) +
           (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : "");
}

/// In a child process: a ROUTER configured by configure_socket (with `rcvhwm` overriding the
/// receive limit when >= 0) that never reads, a DEALER that sends it 20 messages of 64 KB and
/// then resets the connection, and the next heartbeat. Returns the child's wait status.
int stalled_receiver_status(int rcvhwm)
{
    return child_status([rcvhwm] {
        zmq::context_t context;
        zmq::socket_t router(context, zmq::socket_type::router);
        ex2d::service::configure_socket(router, fleet_like_settings(), false);
        if (rcvhwm >= 0) router.set(zmq::sockopt::rcvhwm, rcvhwm);
        router.bind("tcp://127.0.0.1:*");
        const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
        {
            zmq::socket_t dealer(context, zmq::socket_type::dealer);
            ex2d::service::configure_socket(dealer, fleet_like_settings(), true);
            dealer.set(zmq::sockopt::sndhwm, 1000);
            const int connection = connection_fd(context, dealer, endpoint);
            // The handshake first: IMMEDIATE holds messages back until it is done.
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            const std::vector<char> payload(64 * 1024, 'x');
            for (int i = 0; i < 20; ++i) {
                (void)dealer.send(zmq::buffer(payload), zmq::send_flags::dontwait);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            reset_on_close(connection);
        }
        std::this_thread::sleep_for(std::chrono::seconds(3));
    });
}

/// In a child process, what a draining reader meets: a ROUTER (configured by configure_socket,
/// with a linger of 3 s) holds frames for a worker that does not read them, so they cannot
/// drain. The router is closed (by close_dropping_unsent when `drop_unsent`, else with its
/// linger); the worker then sends a credit and resets the connection, and the router's next
/// heartbeat comes while the context waits for the linger.
int closed_router_status(bool drop_unsent)
{
    return child_status([drop_unsent] {
        auto settings = fleet_like_settings();
        settings.linger_ms = 3000;
        settings.heartbeat_ivl_ms = 300;
        zmq::context_t context;
        zmq::socket_t router(context, zmq::socket_type::router);
        ex2d::service::configure_socket(router, settings, false);
        router.set(zmq::sockopt::sndhwm, 1000);
        router.bind("tcp://127.0.0.1:*");
        const std::string endpoint = router.get(zmq::sockopt::last_endpoint);
        zmq::socket_t worker(context, zmq::socket_type::dealer);
        ex2d::service::configure_socket(worker, settings, true);
        // The worker's queue holds 2 messages, then its connection is no longer read: the
        // router's frames cannot drain. The stand-in sends no heartbeat, which would abort on
        // its own stalled connection (the case above).
        worker.set(zmq::sockopt::rcvhwm, 2);
        worker.set(zmq::sockopt::heartbeat_ivl, 0);
        const int connection = connection_fd(context, worker, endpoint);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        (void)worker.send(zmq::str_buffer("credit"), zmq::send_flags::none);
        std::vector<zmq::message_t> credit;
        if (!ex2d::service::wait_readable(router, 5000) ||
            !zmq::recv_multipart(router, std::back_inserter(credit))) {
            ::_exit(3);
        }
        const std::vector<char> frame(256 * 1024, 'x');
        for (int i = 0; i < 64; ++i) {
            zmq::message_t to(credit[0].data(), credit[0].size());
            (void)router.send(to, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
            (void)router.send(zmq::buffer(frame), zmq::send_flags::dontwait);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        if (drop_unsent) {
            ex2d::service::close_dropping_unsent(router);
        } else {
            router.close();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        (void)worker.send(zmq::str_buffer("credit"), zmq::send_flags::none);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        reset_on_close(connection);
        worker.set(zmq::sockopt::linger, 0);
        worker.close();
        std::this_thread::sleep_for(std::chrono::seconds(1));
    });
}

// The timings above make the defect strike every time here (8 of 8 runs with a receive
// limit); each case still runs the child twice against a slow machine's timing.
constexpr int kAttempts = 2;

TEST(ZmqStall, FleetSocketOutlivesAPeerLeavingWhileItIsNotRead)
{
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        const int status = stalled_receiver_status(-1);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "attempt " << attempt << ": the process ended with " << describe(status);
    }
}

TEST(ZmqStall, AReceiveLimitMakesLibzmqAbort)
{
    // The reason for the rule above; should a libzmq without the defect get here, the test
    // says so and the rule may go.
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        const int status = stalled_receiver_status(2);
        if (WIFSIGNALED(status)) {
            EXPECT_EQ(WTERMSIG(status), SIGABRT);
            return;
        }
    }
    GTEST_SKIP() << "this libzmq survived a stalled connection " << kAttempts << " times";
}

TEST(ZmqStall, ASocketClosedDroppingUnsentOutlivesAPeerResettingAfterTheClose)
{
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        const int status = closed_router_status(true);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "attempt " << attempt << ": the process ended with " << describe(status);
    }
}

TEST(ZmqStall, ASocketClosedWithALingerMakesLibzmqAbort)
{
    // Why close_dropping_unsent drops what is queued rather than lingering.
    for (int attempt = 1; attempt <= kAttempts; ++attempt) {
        const int status = closed_router_status(false);
        ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << "no credit arrived";
        if (WIFSIGNALED(status)) {
            EXPECT_EQ(WTERMSIG(status), SIGABRT);
            return;
        }
    }
    GTEST_SKIP() << "this libzmq survived a reset during a linger " << kAttempts << " times";
}

}  // namespace
