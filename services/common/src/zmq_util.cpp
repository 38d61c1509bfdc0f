// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/zmq_util.hpp"

#include <unistd.h>

#include <zmq_addon.hpp>

namespace ex2d::service {

void configure_socket(zmq::socket_t& socket, const ZmqSettings& settings, bool connecting)
{
    socket.set(zmq::sockopt::sndhwm, settings.hwm);
    // No receive limit: libzmq 4.3.4 stops reading a connection whose receive queue is full,
    // and a reset on that connection followed by a ZMTP heartbeat then aborts the process
    // (`!_io_error`, stream_engine_base.cpp:331; zeromq/libzmq#4364). A reader or writer
    // waiting for Redis does not read for seconds, and workers come and go meanwhile. What a
    // peer may send is bounded by the protocol instead: frames against credits, results
    // against grants (docs/protocol.md).
    socket.set(zmq::sockopt::rcvhwm, 0);
    socket.set(zmq::sockopt::linger, settings.linger_ms);
    socket.set(zmq::sockopt::maxmsgsize, int64_t(settings.max_message_bytes));
    socket.set(zmq::sockopt::heartbeat_ivl, settings.heartbeat_ivl_ms);
    socket.set(zmq::sockopt::heartbeat_timeout, settings.heartbeat_timeout_ms);
    socket.set(zmq::sockopt::heartbeat_ttl, settings.heartbeat_timeout_ms);
    socket.set(zmq::sockopt::reconnect_ivl, 100);
    socket.set(zmq::sockopt::reconnect_ivl_max, 5000);
    // Queue nothing towards a peer that is not connected: a frame waits with its owner (and
    // its lease) rather than in a pipe to a process that may never come.
    if (connecting) socket.set(zmq::sockopt::immediate, 1);
}

void close_dropping_unsent(zmq::socket_t& socket)
{
    // A socket closed with a linger keeps its connections open until their queues drain or
    // the linger ends, and refuses what they receive meanwhile. libzmq 4.3.4 then stops reading
    // such a connection, and a reset on it followed by a ZMTP heartbeat aborts the process
    // (the assertion configure_socket avoids while the process runs; zeromq/libzmq#4364).
    // Peers that were cut off meet exactly this: their queue cannot drain, and they send and
    // reset when the cut heals. What a draining reader, writer or worker's reader link still
    // has queued is a leased FRAME, a NO_WORK, a GRANT or a CREDIT: the job's lease brings a
    // frame back, and the others are answers the peer asks for again.
    socket.set(zmq::sockopt::linger, 0);
    socket.close();
}

std::string bind_socket(zmq::socket_t& socket, std::string address, const std::string& name)
{
    const auto pos = address.find("{name}");
    if (pos != std::string::npos) address.replace(pos, 6, name);
    socket.bind(address);
    std::string endpoint = socket.get(zmq::sockopt::last_endpoint);
    // Peers on other nodes cannot connect to a wildcard address: advertise this host's name.
    const auto wildcard = endpoint.find("0.0.0.0");
    if (wildcard != std::string::npos) {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        endpoint.replace(wildcard, 7, host);
    }
    return endpoint;
}

bool try_send(zmq::socket_t& socket, std::vector<zmq::message_t>& parts)
{
    try {
        for (std::size_t i = 0; i < parts.size(); ++i) {
            auto flags = zmq::send_flags::dontwait;
            if (i + 1 < parts.size()) flags = flags | zmq::send_flags::sndmore;
            if (!socket.send(parts[i], flags)) {
                // Only the first part can meet a full queue; later parts of a message follow it.
                return false;
            }
        }
    } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH || e.num() == EAGAIN || e.num() == EINTR) return false;
        throw;
    }
    return true;
}

std::optional<std::vector<zmq::message_t>> try_recv(zmq::socket_t& socket)
{
    std::vector<zmq::message_t> parts;
    try {
        auto received =
            zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait);
        if (!received) return std::nullopt;
    } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) return std::nullopt;
        throw;
    }
    return parts;
}

bool wait_any(zmq::pollitem_t* items, int count, long timeout_ms)
{
    try {
        return zmq::poll(items, std::size_t(count), std::chrono::milliseconds(timeout_ms)) > 0;
    } catch (const zmq::error_t& e) {
        // SIGTERM interrupts the wait; the main loop then sees the stop request.
        if (e.num() == EINTR) return false;
        throw;
    }
}

bool wait_readable(zmq::socket_t& socket, long timeout_ms)
{
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    return wait_any(&item, 1, timeout_ms);
}

}  // namespace ex2d::service
