// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/http_server.hpp"

#include <cstdio>
#include <mutex>

#include <civetweb.h>
#include <netdb.h>
#include <sys/socket.h>

namespace ex2d::service {
namespace {

/// Worker threads, one per connection being read or answered: probes and scrapes still find a
/// free one while this many idle connections are open.
constexpr const char* kThreads = "100";
/// How long a connection may take to send its request (and to take its answer).
constexpr const char* kRequestTimeoutMs = "1000";
/// Request line and headers, in bytes.
constexpr const char* kMaxRequestSize = "8192";

HttpResponse text_response(int status, std::string body)
{
    HttpResponse response;
    response.status = status;
    response.body = std::move(body);
    return response;
}

void send_response(mg_connection* connection, const HttpResponse& response)
{
    mg_printf(connection,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n%s\r\n",
              response.status, mg_get_response_code_text(connection, response.status),
              response.content_type.c_str(), response.body.size(),
              response.status == 405 ? "Allow: GET\r\n" : "");
    mg_write(connection, response.body.data(), response.body.size());
}

/// civetweb's listening_ports takes numeric addresses: "127.0.0.1:8080", "[::1]:8080". IPv6
/// only where civetweb was built with it (Debian 12's was not).
Status listening_port(const std::string& host, int port, std::string& spec)
{
    const std::string where = host + ":" + std::to_string(port);
    if (host.empty()) {
        spec = std::to_string(port);
        return Status::ok();
    }
    constexpr unsigned kFeatureIpv6 = 8;
    const bool have_ipv6 = mg_check_feature(kFeatureIpv6) != 0;
    addrinfo hints{};
    hints.ai_family = have_ipv6 ? AF_UNSPEC : AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* addresses = nullptr;
    const int resolved = ::getaddrinfo(host.c_str(), nullptr, &hints, &addresses);
    if (resolved != 0) {
        return Status::invalid("HTTP " + where + ": cannot resolve" +
                               (have_ipv6 ? "" : " to an IPv4 address (civetweb without IPv6)") +
                               ": " + gai_strerror(resolved));
    }
    char numeric[NI_MAXHOST] = {};
    const int named = ::getnameinfo(addresses->ai_addr, addresses->ai_addrlen, numeric,
                                    sizeof(numeric), nullptr, 0, NI_NUMERICHOST);
    const bool ipv6 = addresses->ai_family == AF_INET6;
    ::freeaddrinfo(addresses);
    if (named != 0) {
        return Status::invalid("HTTP " + where + ": cannot resolve: " + gai_strerror(named));
    }
    spec = (ipv6 ? "[" + std::string(numeric) + "]" : std::string(numeric)) + ":" +
           std::to_string(port);
    return Status::ok();
}

}  // namespace

struct HttpServer::Impl {
    std::mutex mutex;  ///< guards handlers
    std::map<std::string, Handler> handlers;
    mg_context* context = nullptr;
    int port = 0;

    /// Every path comes here (civetweb strips the query string from local_uri).
    static int dispatch(mg_connection* connection, void* data)
    {
        const HttpResponse response = static_cast<Impl*>(data)->respond(connection);
        send_response(connection, response);
        return response.status;
    }

    HttpResponse respond(mg_connection* connection)
    {
        const mg_request_info* request = mg_get_request_info(connection);
        if (std::string(request->request_method) != "GET") {
            return text_response(405, "only GET is supported\n");
        }
        Handler handler;
        {
            std::lock_guard<std::mutex> lock(mutex);
            const auto found = handlers.find(request->local_uri);
            if (found == handlers.end()) return text_response(404, "not found\n");
            handler = found->second;
        }
        try {
            return handler();
        } catch (const std::exception& e) {
            return text_response(500, std::string(e.what()) + "\n");
        }
    }
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {}

HttpServer::~HttpServer()
{
    stop();
}

void HttpServer::handle(const std::string& path, Handler handler)
{
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->handlers[path] = std::move(handler);
}

Status HttpServer::start(const std::string& host, int port)
{
    if (impl_->context != nullptr) return Status::invalid("HTTP server already started");
    std::string ports;
    if (Status resolved = listening_port(host, port, ports); !resolved.is_ok()) return resolved;

    static std::once_flag initialised;
    std::call_once(initialised, [] { mg_init_library(0); });
    const char* options[] = {"listening_ports",
                             ports.c_str(),
                             "num_threads",
                             kThreads,
                             "request_timeout_ms",
                             kRequestTimeoutMs,
                             "max_request_size",
                             kMaxRequestSize,
                             "enable_keep_alive",
                             "no",
                             nullptr};
    mg_callbacks callbacks{};
    mg_init_data init{&callbacks, nullptr, options};
    char text[256] = {};
    mg_error_data error{nullptr, text, sizeof(text)};
    impl_->context = mg_start2(&init, &error);
    if (impl_->context == nullptr) {
        return Status::invalid("HTTP " + host + ":" + std::to_string(port) +
                               ": cannot bind: " + text);
    }
    mg_set_request_handler(impl_->context, "/", &Impl::dispatch, impl_.get());
    mg_server_port bound{};
    if (mg_get_server_ports(impl_->context, 1, &bound) != 1) {
        stop();
        return Status::invalid("HTTP " + ports + ": no listening port");
    }
    impl_->port = bound.port;
    return Status::ok();
}

int HttpServer::port() const
{
    return impl_->port;
}

void HttpServer::stop()
{
    if (impl_->context == nullptr) return;
    mg_stop(impl_->context);
    impl_->context = nullptr;
}

}  // namespace ex2d::service
