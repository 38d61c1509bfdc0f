// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/curve.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <sys/stat.h>

#include <zmq_addon.hpp>

#include "ex2d/logging.hpp"
#include "ex2d/service/metrics.hpp"

namespace ex2d::service {

namespace fs = std::filesystem;

namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapDomain = "ex2d";
constexpr auto kRefusalLogInterval = std::chrono::seconds(60);

std::string trim(const std::string& text)
{
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

/// The quoted value of a CZMQ certificate line `name = "value"`, or "".
std::string zpl_value(const std::string& line, const std::string& name)
{
    const std::regex pattern("^\\s*" + name + "\\s*=\\s*\"([^\"]*)\"\\s*$");
    std::smatch m;
    if (std::regex_match(line, m, pattern)) return m[1];
    return "";
}

/// Warns when a file holding a secret can be read by every user of the machine.
void warn_if_world_readable(const std::string& path, const char* what)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH)) {
        logger()->warn("{} {} is readable by every user (mode {:o}); make it 0600 or 0400", what,
                       path, st.st_mode & 07777);
    }
}

std::string host_of(const std::string& endpoint)
{
    // tcp://host:port, tcp://[v6]:port, tcp://iface;host:port (source address first)
    std::string rest = endpoint.substr(6);
    const auto semicolon = rest.find(';');
    if (semicolon != std::string::npos) rest = rest.substr(semicolon + 1);
    if (!rest.empty() && rest[0] == '[') {
        const auto close = rest.find(']');
        return close == std::string::npos ? rest : rest.substr(1, close - 1);
    }
    const auto colon = rest.rfind(':');
    return colon == std::string::npos ? rest : rest.substr(0, colon);
}

void count_refused_peer(Metrics* metrics, const std::string& reason)
{
    if (metrics) metrics->peers_refused(reason).Increment();
}

}  // namespace

bool is_z85_key(const std::string& text)
{
    if (text.size() != kCurveKeyChars) return false;
    uint8_t bytes[32];
    return zmq_z85_decode(bytes, text.c_str()) != nullptr;
}

std::string key_fingerprint(const std::string& public_key)
{
    return public_key.substr(0, 8);
}

Result<CurveKeyPair> generate_curve_keypair()
{
    if (!zmq_has("curve")) return Status::invalid("this libzmq was built without CURVE");
    char public_key[kCurveKeyChars + 1] = {};
    char secret_key[kCurveKeyChars + 1] = {};
    if (zmq_curve_keypair(public_key, secret_key) != 0) {
        return Status::io(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
    }
    CurveKeyPair keys{public_key, secret_key};
    std::memset(secret_key, 0, sizeof secret_key);
    return keys;
}

Result<CurveKeyPair> read_curve_secret_key(const std::string& path)
{
    std::ifstream in(path);
    if (!in) {
        return Status::invalid(path +
                               ": cannot read the CURVE secret key file: " + std::strerror(errno));
    }
    std::string found;
    for (std::string line; std::getline(in, line);) {
        const std::string text = trim(line);
        // Z85 has '#' and '=' in its alphabet: a key is recognised before a comment.
        if (is_z85_key(text)) {
            found = text;
            break;
        }
        if (text.empty() || text[0] == '#') continue;
        const std::string quoted = zpl_value(text, "secret-key");
        if (!quoted.empty()) {
            found = quoted;
            break;
        }
    }
    if (!is_z85_key(found)) {
        // The file's contents are a secret: the message says what was expected, not what was found.
        return Status::invalid(path +
                               ": no CURVE secret key (a line of 40 Z85 characters, as "
                               "written by ex2dctl keygen)");
    }
    warn_if_world_readable(path, "CURVE secret key file");
    char public_key[kCurveKeyChars + 1] = {};
    if (zmq_curve_public(public_key, found.c_str()) != 0) {
        return Status::invalid(path + ": the CURVE secret key is not valid");
    }
    return CurveKeyPair{public_key, found};
}

Result<CurveAllowList> read_curve_public_keys(const std::string& path)
{
    std::error_code ec;
    std::vector<std::string> files;
    if (fs::is_directory(path, ec)) {
        for (const auto& entry : fs::directory_iterator(path, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.empty() || name[0] == '.') continue;
            if (entry.is_regular_file(ec)) files.push_back(entry.path().string());
        }
        if (ec)
            return Status::invalid(path + ": cannot list the CURVE public keys: " + ec.message());
        std::sort(files.begin(), files.end());
    } else {
        files.push_back(path);
    }
    CurveAllowList keys;
    for (const auto& file : files) {
        std::ifstream in(file);
        if (!in) {
            return Status::invalid(file +
                                   ": cannot read the CURVE public keys: " + std::strerror(errno));
        }
        int number = 0;
        for (std::string line; std::getline(in, line);) {
            ++number;
            const std::string text = trim(line);
            std::istringstream words(text);
            std::string key, name;
            words >> key;
            std::getline(words, name);
            name = trim(name);
            // Z85 has '#' and '=' in its alphabet: a key is recognised before a comment.
            if (!is_z85_key(key)) {
                if (text.empty() || text[0] == '#') continue;
                if (!zpl_value(text, "secret-key").empty()) {
                    return Status::invalid(file + ":" + std::to_string(number) +
                                           ": a secret key in a public key list; remove it "
                                           "and replace that key pair");
                }
                key = zpl_value(text, "public-key");
                name.clear();
                // Other lines of a CZMQ certificate (metadata, curve, name = "value").
                if (key.empty() && (text == "metadata" || text == "curve" ||
                                    text.find('=') != std::string::npos)) {
                    continue;
                }
            }
            if (!is_z85_key(key)) {
                return Status::invalid(file + ":" + std::to_string(number) +
                                       ": not a CURVE public key (40 Z85 characters)");
            }
            if (name.empty() && files.size() > 1) name = fs::path(file).filename().string();
            keys[key] = name;
        }
    }
    return keys;
}

Status write_curve_key_files(const CurveKeyPair& keys, const std::string& secret_path,
                             const std::string& public_path)
{
    auto write = [](const std::string& path, const std::string& text, mode_t mode) -> Status {
        const std::string tmp = path + ".tmp";
        const mode_t old_mask = ::umask(0077);
        {
            std::ofstream out(tmp, std::ios::trunc);
            if (!out) {
                ::umask(old_mask);
                return Status::io(path + ": cannot write: " + std::strerror(errno));
            }
            out << text;
            out.flush();
            if (!out) {
                ::umask(old_mask);
                return Status::io(path + ": cannot write: " + std::strerror(errno));
            }
        }
        ::umask(old_mask);
        if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
            return Status::io(path + ": cannot write: " + std::strerror(errno));
        }
        return Status::ok();
    };
    EX2D_RETURN_NOT_OK(write(secret_path,
                             "# ex2d CURVE secret key (Z85). Keep it private: mode 0600, a "
                             "Kubernetes Secret.\n" +
                                 keys.secret_key + "\n",
                             0600));
    return write(public_path, keys.public_key + "\n", 0644);
}

bool is_tcp_endpoint(const std::string& endpoint)
{
    return endpoint.rfind("tcp://", 0) == 0;
}

bool is_loopback_endpoint(const std::string& endpoint)
{
    if (!is_tcp_endpoint(endpoint)) return false;
    const std::string host = host_of(endpoint);
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// ---------------------------------------------------------------------------------------------

ZapHandler::ZapHandler(zmq::context_t& context, CurveAllowList allowed, Metrics* metrics)
    : socket_(context, zmq::socket_type::rep), allowed_(std::move(allowed)), metrics_(metrics)
{
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(kZapEndpoint);
    thread_ = std::thread([this] { run(); });
}

ZapHandler::~ZapHandler()
{
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    socket_.close();
}

std::vector<std::string> ZapHandler::answer(const std::vector<std::string>& request,
                                            const CurveAllowList& allowed, bool& accepted,
                                            std::string& client_key)
{
    accepted = false;
    client_key.clear();
    const std::string request_id = request.size() > 1 ? request[1] : "";
    auto reply = [&](const char* code, const std::string& text, const std::string& user) {
        return std::vector<std::string>{"1.0", request_id, code, text, user, ""};
    };
    // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
    if (request.size() < 6 || request[0] != "1.0") return reply("500", "malformed ZAP request", "");
    const std::string& mechanism = request[5];
    if (mechanism != "CURVE") return reply("400", "only CURVE clients are admitted", "");
    if (request.size() != 7 || request[6].size() != 32) {
        return reply("400", "malformed CURVE credentials", "");
    }
    char z85[kCurveKeyChars + 1] = {};
    zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(request[6].data()), 32);
    client_key = z85;
    const auto found = allowed.find(client_key);
    if (found == allowed.end()) return reply("400", "public key not allowed", "");
    accepted = true;
    return reply("200", "OK", found->second.empty() ? key_fingerprint(client_key) : found->second);
}

void ZapHandler::run()
{
    while (!stop_) {
        zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
        try {
            if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) <= 0) continue;
            std::vector<zmq::message_t> parts;
            if (!zmq::recv_multipart(socket_, std::back_inserter(parts),
                                     zmq::recv_flags::dontwait)) {
                continue;
            }
            std::vector<std::string> request;
            request.reserve(parts.size());
            for (const auto& p : parts) request.push_back(p.to_string());
            bool accepted = false;
            std::string key;
            const auto reply = answer(request, allowed_, accepted, key);
            std::vector<zmq::const_buffer> out;
            out.reserve(reply.size());
            for (const auto& r : reply) out.push_back(zmq::buffer(r));
            zmq::send_multipart(socket_, out);
            if (accepted) {
                ++accepted_;
                if (metrics_) metrics_->zap_requests("accepted").Increment();
                logger()->debug("zap accepted key={} address={}", key_fingerprint(key),
                                request.size() > 3 ? request[3] : "");
                continue;
            }
            ++refused_;
            if (metrics_) metrics_->zap_requests("refused").Increment();
            const auto now = std::chrono::steady_clock::now();
            auto& last = last_logged_[key];
            if (last.time_since_epoch().count() == 0 || now - last >= kRefusalLogInterval) {
                last = now;
                logger()->warn("zap refused key={} mechanism={} address={} reason={}",
                               key.empty() ? "none" : key_fingerprint(key),
                               request.size() > 5 ? request[5] : "?",
                               request.size() > 3 ? request[3] : "?", reply[3]);
            }
        } catch (const zmq::error_t& e) {
            if (e.num() == ETERM) return;
            if (e.num() != EINTR) logger()->error("zap handler: {}", e.what());
        }
    }
}

// ---------------------------------------------------------------------------------------------

HandshakeMonitor::HandshakeMonitor(zmq::context_t& context, zmq::socket_t& socket,
                                   const std::string& label, Metrics* metrics)
    : pair_(context, zmq::socket_type::pair), label_(label), metrics_(metrics)
{
    static std::atomic<int> counter{0};
    const std::string address =
        "inproc://ex2d-handshakes-" + label + "-" + std::to_string(++counter);
    if (zmq_socket_monitor(socket.handle(), address.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0) {
        throw zmq::error_t();
    }
    pair_.set(zmq::sockopt::linger, 0);
    pair_.connect(address);
}

HandshakeMonitor::~HandshakeMonitor()
{
    pair_.close();
}

int HandshakeMonitor::poll()
{
    int refused = 0;
    for (;;) {
        std::vector<zmq::message_t> parts;
        try {
            if (!zmq::recv_multipart(pair_, std::back_inserter(parts), zmq::recv_flags::dontwait))
                break;
        } catch (const zmq::error_t&) {
            break;
        }
        // Event frame: uint16 event, uint32 value (the ZAP status code); then the endpoint.
        if (parts.size() < 2 || parts[0].size() < 6) continue;
        uint16_t event = 0;
        uint32_t value = 0;
        std::memcpy(&event, parts[0].data(), 2);
        std::memcpy(&value, static_cast<const char*>(parts[0].data()) + 2, 4);
        const std::string endpoint = parts[1].to_string();
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            if (reported_.erase(endpoint))
                logger()->info("{} handshake with {} succeeded", label_, endpoint);
            continue;
        }
        if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
        ++refused;
        ++refusals_;
        if (metrics_) metrics_->peers_refused("handshake_refused").Increment();
        if (!reported_[endpoint]) {
            reported_[endpoint] = true;
            logger()->error(
                "{} handshake refused by {} (status {}): this process's CURVE public "
                "key is not in that server's zmq.curve_allowed_keys",
                label_, endpoint, value);
        }
    }
    return refused;
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<SocketSecurity>> SocketSecurity::from_settings(const ZmqSettings& settings,
                                                                      Metrics* metrics)
{
    CurveKeyPair keys;
    CurveAllowList allowed;
    const std::string& secret_file = settings.curve_secret_key_file;
    const std::string& allowed_path = settings.curve_allowed_keys;
    if (!secret_file.empty()) {
        if (!zmq_has("curve")) {
            return Status::invalid("zmq.curve_secret_key_file is set but this libzmq has no CURVE");
        }
        auto read = read_curve_secret_key(secret_file);
        if (!read.is_ok())
            return Status::invalid("zmq.curve_secret_key_file: " + read.status().message());
        keys = std::move(read).value();
    }
    if (!allowed_path.empty()) {
        auto read = read_curve_public_keys(allowed_path);
        if (!read.is_ok())
            return Status::invalid("zmq.curve_allowed_keys: " + read.status().message());
        allowed = std::move(read).value();
        if (allowed.empty()) {
            return Status::invalid("zmq.curve_allowed_keys: " + allowed_path + " lists no key");
        }
    }
    return std::make_unique<SocketSecurity>(std::move(keys), std::move(allowed),
                                            settings.allow_plaintext, metrics);
}

SocketSecurity::SocketSecurity(CurveKeyPair keys, CurveAllowList allowed, bool allow_plaintext,
                               Metrics* metrics)
    : keys_(std::move(keys)),
      allowed_(std::move(allowed)),
      allow_plaintext_(allow_plaintext),
      metrics_(metrics)
{
}

Result<bool> SocketSecurity::prepare_bind(zmq::context_t& context, zmq::socket_t& socket,
                                          const std::string& address)
{
    if (!is_tcp_endpoint(address)) return false;
    if (!curve_enabled()) {
        if (is_loopback_endpoint(address) || allow_plaintext_) return false;
        return Status::invalid("zmq.bind " + address +
                               " accepts connections from other hosts without encryption: set "
                               "zmq.curve_secret_key_file and zmq.curve_allowed_keys, or "
                               "zmq.allow_plaintext true on an isolated network");
    }
    if (allowed_.empty()) {
        return Status::invalid("zmq.curve_allowed_keys is empty: a CURVE server on " + address +
                               " would admit any client key; list the workers' public keys");
    }
    if (!zap_) {
        try {
            zap_ = std::make_unique<ZapHandler>(context, allowed_, metrics_);
        } catch (const zmq::error_t& e) {
            return Status::invalid(std::string("cannot start the ZAP handler: ") + e.what());
        }
    }
    socket.set(zmq::sockopt::curve_server, 1);
    socket.set(zmq::sockopt::curve_secretkey, keys_.secret_key);
    socket.set(zmq::sockopt::zap_domain, kZapDomain);
    logger()->info("curve server on {} key={} allowed_keys={}", address,
                   key_fingerprint(keys_.public_key), allowed_.size());
    return true;
}

Status SocketSecurity::prepare_connect(zmq::socket_t& socket, const std::string& endpoint,
                                       const std::string& server_key, std::string* reason)
{
    auto refuse = [&](const char* label, const std::string& why) {
        if (reason) *reason = label;
        count_refused_peer(metrics_, label);
        return Status::invalid(why);
    };
    if (!is_tcp_endpoint(endpoint)) {
        // ipc:// stays within the node: the NULL mechanism for this connection.
        if (curve_enabled()) socket.set(zmq::sockopt::curve_server, 0);
        return Status::ok();
    }
    if (!server_key.empty()) {
        if (!is_z85_key(server_key)) {
            return refuse("bad_key", "the peer advertises a malformed CURVE key");
        }
        if (!curve_enabled()) {
            return refuse("curve_required",
                          "the peer requires CURVE: set zmq.curve_secret_key_file");
        }
        if (!allowed_.empty() && !allowed_.count(server_key)) {
            return refuse("untrusted_key", "the peer's CURVE key " + key_fingerprint(server_key) +
                                               " is not in zmq.curve_allowed_keys");
        }
        socket.set(zmq::sockopt::curve_serverkey, server_key);
        socket.set(zmq::sockopt::curve_publickey, keys_.public_key);
        socket.set(zmq::sockopt::curve_secretkey, keys_.secret_key);
        return Status::ok();
    }
    if (curve_enabled()) {
        return refuse("plaintext_peer",
                      "the peer advertises no CURVE key and this process requires CURVE on tcp://");
    }
    if (!is_loopback_endpoint(endpoint) && !allow_plaintext_) {
        return refuse("plaintext_peer",
                      "plaintext tcp:// beyond loopback: give the fleet CURVE keys, or set "
                      "zmq.allow_plaintext true on an isolated network");
    }
    return Status::ok();
}

}  // namespace ex2d::service
