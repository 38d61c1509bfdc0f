// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/http_server.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ex2d::service {
namespace {

constexpr int kPollMs = 100;               ///< how long stop() may wait for the thread
constexpr std::size_t kMaxRequest = 8192;  ///< request line and headers
constexpr auto kReadTimeout = std::chrono::seconds(1);

const char* reason_phrase(int status)
{
    switch (status) {
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 503:
            return "Service Unavailable";
        default:
            return "Unknown";
    }
}

void send_all(int fd, const std::string& data)
{
    std::size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the client went away or stalled past SO_SNDTIMEO
        sent += std::size_t(n);
    }
}

void send_response(int fd, const HttpResponse& response)
{
    std::string head =
        "HTTP/1.0 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
        "\r\nContent-Type: " + response.content_type +
        "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n";
    if (response.status == 405) head += "Allow: GET\r\n";
    send_all(fd, head + "\r\n" + response.body);
}

HttpResponse text_response(int status, std::string body)
{
    HttpResponse response;
    response.status = status;
    response.body = std::move(body);
    return response;
}

/// Reads the request head (up to the blank line) within the timeout and size cap, so that the
/// client's bytes are consumed before close (unread bytes would turn the close into a reset).
/// Returns 0 when complete, else the status to answer with.
int read_head(int fd, std::string& head)
{
    const auto deadline = std::chrono::steady_clock::now() + kReadTimeout;
    char buffer[2048];
    while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
        if (head.size() > kMaxRequest) return 431;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return 408;
        pollfd pfd{fd, POLLIN, 0};
        const int ready = ::poll(&pfd, 1, int(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return 408;
        const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return head.empty() ? -1 : 400;  // -1: closed without a request
        head.append(buffer, std::size_t(n));
    }
    return head.size() > kMaxRequest ? 431 : 0;
}

/// Reads what the client sent beyond the request head (bounded), because closing a socket with
/// unread input sends a reset that can destroy the response before the client reads it.
void discard_input(int fd)
{
    char buffer[4096];
    for (int i = 0; i < 16; ++i) {
        if (::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) <= 0) return;
    }
}

}  // namespace

struct HttpServer::Impl {
    std::mutex mutex;  ///< guards handlers
    std::map<std::string, Handler> handlers;
    int fd = -1;
    int port = 0;
    std::atomic<bool> stopping{false};
    std::thread thread;

    void serve()
    {
        while (!stopping.load()) {
            pollfd pfd{fd, POLLIN, 0};
            const int ready = ::poll(&pfd, 1, kPollMs);
            if (ready <= 0) continue;
            const int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            timeval send_timeout{1, 0};
            ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
            handle_connection(client);
            ::shutdown(client, SHUT_WR);
            discard_input(client);
            ::close(client);
        }
    }

    void handle_connection(int client)
    {
        std::string head;
        const int error = read_head(client, head);
        if (error < 0) return;
        if (error > 0) {
            send_response(client, text_response(error, std::string(reason_phrase(error)) + "\n"));
            return;
        }
        send_response(client, respond(head.substr(0, head.find_first_of("\r\n"))));
    }

    HttpResponse respond(const std::string& request_line)
    {
        // "GET /metrics HTTP/1.1"
        const auto first = request_line.find(' ');
        const auto second = request_line.find(' ', first + 1);
        if (first == std::string::npos || second == std::string::npos ||
            request_line.compare(second + 1, 5, "HTTP/") != 0) {
            return text_response(400, "bad request\n");
        }
        const std::string method = request_line.substr(0, first);
        std::string path = request_line.substr(first + 1, second - first - 1);
        path = path.substr(0, path.find('?'));
        if (method != "GET") return text_response(405, "only GET is supported\n");
        Handler handler;
        {
            std::lock_guard<std::mutex> lock(mutex);
            const auto found = handlers.find(path);
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
    if (impl_->fd >= 0) return Status::invalid("HTTP server already started");
    const std::string where = host + ":" + std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* addresses = nullptr;
    const int resolved = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                                       std::to_string(port).c_str(), &hints, &addresses);
    if (resolved != 0) {
        return Status::invalid("HTTP " + where + ": cannot resolve: " + gai_strerror(resolved));
    }
    std::string failure = "no address";
    for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
        const int fd =
            ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            failure = std::strerror(errno);
            continue;
        }
        // A restarted process can bind again while the old connections sit in TIME_WAIT.
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 16) != 0) {
            failure = std::strerror(errno);
            ::close(fd);
            continue;
        }
        impl_->fd = fd;
        break;
    }
    ::freeaddrinfo(addresses);
    if (impl_->fd < 0) return Status::invalid("HTTP " + where + ": cannot bind: " + failure);

    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(impl_->fd, reinterpret_cast<sockaddr*>(&bound), &length);
    impl_->port = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    impl_->stopping = false;
    impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
    return Status::ok();
}

int HttpServer::port() const
{
    return impl_->port;
}

void HttpServer::stop()
{
    impl_->stopping = true;
    if (impl_->thread.joinable()) impl_->thread.join();
    if (impl_->fd >= 0) {
        ::close(impl_->fd);
        impl_->fd = -1;
    }
}

}  // namespace ex2d::service
