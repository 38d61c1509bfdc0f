// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The readers or writers one worker socket is connected to, kept per endpoint: a process
// restarted under a new name on the same endpoint shares its predecessor's connection, and an
// endpoint is dropped only when no entry that names it is kept (docs/protocol.md, "Sockets
// and discovery").

#include <map>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/curve.hpp"

namespace ex2d::worker {

/// A reader or writer as advertised in Redis: its endpoint and CURVE public key (empty for a
/// plaintext server).
struct Peer {
    std::string endpoint, key;
    bool operator==(const Peer& o) const { return endpoint == o.endpoint && key == o.key; }
    bool operator!=(const Peer& o) const { return !(*this == o); }
};

/// Peers by process name.
using PeerMap = std::map<std::string, Peer>;

class PeerConnections {
public:
    /// `routed`: the socket is a ROUTER, and each connection gets a routing id of its own
    /// (the first name seen there and a counter, never reused: libzmq aborts on a duplicate).
    PeerConnections(zmq::socket_t& socket, service::SocketSecurity& security, std::string role,
                    bool routed);

    /// One discovery round: connects to `live` endpoints not connected yet, and disconnects
    /// from endpoints that no entry of `kept` names any more (or names with another key).
    void sync(const PeerMap& live, const PeerMap& kept);

    bool empty() const { return by_endpoint_.empty(); }
    /// Routing ids of the connections whose process heart-beat in the last round, in endpoint
    /// order (routed sockets only): a killed or stopped peer is not offered work while its
    /// connection lingers.
    std::vector<std::string> live_routing_ids() const;
    /// True while the connection with routing id `id` leads to a live process.
    bool is_live(const std::string& id) const;

private:
    struct Connection {
        std::string key;
        std::string routing_id;
        std::string name;   ///< for logs: the latest process seen on this endpoint
        bool live = false;  ///< some process on it heart-beat within the registration lifetime
    };
    void disconnect(const std::string& endpoint, const char* why);

    zmq::socket_t& socket_;
    service::SocketSecurity& security_;
    std::string role_;
    bool routed_;
    long next_id_ = 0;
    std::map<std::string, Connection> by_endpoint_;
    PeerMap refused_;  ///< not connected for want of keys, by name
};

}  // namespace ex2d::worker
