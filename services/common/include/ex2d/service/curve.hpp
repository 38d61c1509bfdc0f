// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file curve.hpp
/// CurveZMQ on the fleet's tcp:// links (docs/protocol.md, "Security"): key files, the ZAP
/// handler that admits only allow-listed client keys (ZeroMQ RFC 27), and the per-socket
/// policy: CURVE server on a tcp:// bind, CURVE client towards a peer that advertises a key,
/// NULL on ipc://, and no plaintext tcp:// beyond loopback unless zmq.allow_plaintext.
///
/// Secret keys never leave this module: they are not logged, not printed, not published.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/settings.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {

class Metrics;

/// The Z85 text of a CURVE key is 40 characters (32 bytes).
constexpr std::size_t kCurveKeyChars = 40;

struct CurveKeyPair {
    std::string public_key;  ///< Z85
    std::string secret_key;  ///< Z85; never logged
};

/// Allowed public keys (Z85) and the name given to each (empty when none).
using CurveAllowList = std::map<std::string, std::string>;

/// True for 40 characters of the Z85 alphabet that decode to a key.
bool is_z85_key(const std::string& text);
/// A short, non-secret tag of a public key for logs: its first 8 characters.
std::string key_fingerprint(const std::string& public_key);

/// A new key pair (zmq_curve_keypair).
Result<CurveKeyPair> generate_curve_keypair();
/// Reads a secret key file: the first line that is a Z85 key, or a CZMQ certificate's
/// `secret-key = "..."` line; the public key is derived from it. Errors name the file, never
/// its contents.
Result<CurveKeyPair> read_curve_secret_key(const std::string& path);
/// Reads public keys from a file (one Z85 key per line, optionally followed by a name; blank
/// lines and # comments skipped; CZMQ `public-key = "..."` lines accepted) or from every
/// regular file of a folder (names starting with '.' skipped, as Kubernetes' ..data links).
Result<CurveAllowList> read_curve_public_keys(const std::string& path);
/// Writes a secret key file (mode 0600) and a public key file (mode 0644).
Status write_curve_key_files(const CurveKeyPair& keys, const std::string& secret_path,
                             const std::string& public_path);

/// tcp:// endpoint (not ipc://, inproc://).
bool is_tcp_endpoint(const std::string& endpoint);
/// tcp:// on 127.0.0.0/8, ::1 or localhost.
bool is_loopback_endpoint(const std::string& endpoint);

/// The ZAP handler (RFC 27): a REP socket on inproc://zeromq.zap.01 of `context`, answered on
/// its own thread, that accepts CURVE clients whose public key is allow-listed and refuses
/// every other request with 400. Refusals are logged (fingerprint and peer address, at most
/// once a minute per key) and counted in ex2d_zap_requests_total{result}.
class ZapHandler {
public:
    /// Binds at once, so that sockets bound afterwards are covered; throws zmq::error_t when
    /// another handler is bound in the context.
    ZapHandler(zmq::context_t& context, CurveAllowList allowed, Metrics* metrics);
    ~ZapHandler();  ///< stops the thread and closes the socket
    ZapHandler(const ZapHandler&) = delete;
    ZapHandler& operator=(const ZapHandler&) = delete;

    long accepted() const { return accepted_; }
    long refused() const { return refused_; }

    /// The reply frames to one request's frames (the REP envelope removed): version "1.0",
    /// the request id, "200"/"400"/"500", a status text, the user id (the key's name from the
    /// allow-list, else its fingerprint) and empty metadata. `accepted` and `client_key`
    /// (Z85, empty when absent) tell what was decided.
    static std::vector<std::string> answer(const std::vector<std::string>& request,
                                           const CurveAllowList& allowed, bool& accepted,
                                           std::string& client_key);

private:
    void run();

    zmq::socket_t socket_;
    CurveAllowList allowed_;
    Metrics* metrics_;
    std::atomic<bool> stop_{false};
    std::atomic<long> accepted_{0}, refused_{0};
    std::map<std::string, std::chrono::steady_clock::time_point> last_logged_;
    std::thread thread_;
};

/// Watches the handshakes of a connecting socket (zmq_socket_monitor) so that a client learns
/// why it gets nothing: a handshake the server refused (ZAP status 400, our key not allowed) is
/// logged once per endpoint and counted in ex2d_peers_refused_total{reason="handshake_refused"}.
class HandshakeMonitor {
public:
    HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket, const std::string& label,
                     Metrics* metrics);
    ~HandshakeMonitor();
    HandshakeMonitor(const HandshakeMonitor&) = delete;
    HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;

    /// Reads the pending events without blocking; returns the refusals among them.
    int poll();
    long refusals() const { return refusals_; }

private:
    zmq::socket_t pair_;
    std::string label_;
    Metrics* metrics_;
    std::map<std::string, bool> reported_;  ///< endpoints whose refusal was logged
    long refusals_ = 0;
};

/// What a process does about CURVE, from zmq.curve_secret_key_file, zmq.curve_allowed_keys
/// and zmq.allow_plaintext.
class SocketSecurity {
public:
    /// Reads the key files; a missing or malformed file is an invalid_argument naming the
    /// key and the file. `metrics` may be null (tests).
    static Result<std::unique_ptr<SocketSecurity>> from_settings(const ZmqSettings& settings,
                                                                 Metrics* metrics);
    /// Keys given directly (tests); an empty secret key = CURVE off.
    SocketSecurity(CurveKeyPair keys, CurveAllowList allowed, bool allow_plaintext,
                   Metrics* metrics);

    bool curve_enabled() const { return !keys_.secret_key.empty(); }
    /// This process's public key (Z85), empty when CURVE is off.
    const std::string& public_key() const { return keys_.public_key; }
    const CurveAllowList& allowed() const { return allowed_; }

    /// Binding side, before bind(address): on tcp:// with a key, makes `socket` a CURVE server
    /// and starts the ZAP handler in `context` (an allow-list is required); on tcp:// without
    /// a key, refuses a non-loopback address unless plaintext is allowed; ipc:// unchanged.
    /// Returns whether the socket is a CURVE server.
    Result<bool> prepare_bind(zmq::context_t& context, zmq::socket_t& socket,
                              const std::string& address);

    /// Connecting side, right before socket.connect(endpoint): sets the options of that
    /// connection from the peer's advertised key (empty = plaintext peer). An error says why
    /// the peer must not be connected (counted in ex2d_peers_refused_total{reason}; `reason`
    /// is set to the label).
    Status prepare_connect(zmq::socket_t& socket, const std::string& endpoint,
                           const std::string& server_key, std::string* reason = nullptr);

private:
    CurveKeyPair keys_;
    CurveAllowList allowed_;
    bool allow_plaintext_ = false;
    Metrics* metrics_ = nullptr;
    std::unique_ptr<ZapHandler> zap_;
};

}  // namespace ex2d::service
