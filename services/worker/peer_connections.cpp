// SPDX-License-Identifier: BSD-3-Clause
#include "peer_connections.hpp"

#include "ex2d/logging.hpp"

namespace ex2d::worker {

PeerConnections::PeerConnections(zmq::socket_t& socket, service::SocketSecurity& security,
                                 std::string role, bool routed)
    : socket_(socket), security_(security), role_(std::move(role)), routed_(routed)
{
}

void PeerConnections::disconnect(const std::string& endpoint, const char* why)
{
    auto it = by_endpoint_.find(endpoint);
    if (it == by_endpoint_.end()) return;
    try {
        socket_.disconnect(endpoint);
    } catch (const zmq::error_t&) {
    }
    logger()->info("disconnected from {} {} {} ({})", role_, it->second.name, endpoint, why);
    by_endpoint_.erase(it);
}

void PeerConnections::sync(const PeerMap& live, const PeerMap& kept)
{
    // A peer whose heartbeat has merely lapsed (stopped, paused, swapping) stays connected
    // until its entry is removed: libzmq 4.3.4 aborts (session_base.cpp:260) when an endpoint
    // is disconnected while a multipart message to a stalled peer is half-sent and the ZMTP
    // heartbeat then times out. The heartbeat timeout drops that connection safely by itself.
    std::map<std::string, std::string> kept_keys;  // endpoint -> key of the newest entry
    for (const auto& [name, peer] : kept) kept_keys[peer.endpoint] = peer.key;
    for (const auto& [name, peer] : live) kept_keys[peer.endpoint] = peer.key;
    std::vector<std::string> stale;
    for (const auto& [endpoint, connection] : by_endpoint_) {
        auto found = kept_keys.find(endpoint);
        if (found == kept_keys.end() || found->second != connection.key) stale.push_back(endpoint);
    }
    for (const auto& endpoint : stale) {
        disconnect(endpoint, kept_keys.count(endpoint) ? "new key" : "no process advertises it");
    }
    for (auto& [endpoint, connection] : by_endpoint_) connection.live = false;
    for (const auto& [name, peer] : live) {
        auto connected = by_endpoint_.find(peer.endpoint);
        if (connected != by_endpoint_.end()) {
            connected->second.name = name;
            connected->second.live = true;
            continue;
        }
        // A peer refused for its keys is tried again only once its entry changes.
        auto refused = refused_.find(name);
        if (refused != refused_.end() && refused->second == peer) continue;
        std::string reason;
        const Status allowed = security_.prepare_connect(socket_, peer.endpoint, peer.key, &reason);
        if (!allowed.is_ok()) {
            refused_[name] = peer;
            logger()->warn("peer refused role={} name={} endpoint={} reason={}: {}", role_, name,
                           peer.endpoint, reason, allowed.message());
            continue;
        }
        refused_.erase(name);
        Connection connection{peer.key, "", name, true};
        try {
            if (routed_) {
                connection.routing_id = name + "#" + std::to_string(++next_id_);
                socket_.set(zmq::sockopt::connect_routing_id, connection.routing_id);
            }
            socket_.connect(peer.endpoint);
            by_endpoint_[peer.endpoint] = connection;
            logger()->info(
                "connected to {} {} {}{}", role_, name, peer.endpoint,
                peer.key.empty() ? "" : " curve_key=" + service::key_fingerprint(peer.key));
        } catch (const zmq::error_t& e) {
            logger()->warn("cannot connect to {} {} {}: {}", role_, name, peer.endpoint, e.what());
        }
    }
    for (auto it = refused_.begin(); it != refused_.end();) {
        if (kept.count(it->first))
            ++it;
        else
            it = refused_.erase(it);
    }
}

std::vector<std::string> PeerConnections::live_routing_ids() const
{
    std::vector<std::string> ids;
    for (const auto& [endpoint, connection] : by_endpoint_) {
        if (connection.live) ids.push_back(connection.routing_id);
    }
    return ids;
}

bool PeerConnections::is_live(const std::string& id) const
{
    for (const auto& [endpoint, connection] : by_endpoint_) {
        if (connection.routing_id == id) return connection.live;
    }
    return false;
}

}  // namespace ex2d::worker
