// SPDX-License-Identifier: BSD-3-Clause
// /healthz, /readyz and /metrics served by GNU libmicrohttpd from one thread polling every
// connection with epoll: idle or slow clients cost a file descriptor, not the thread, so a
// probe is answered at once however many connections sit open (a server that handled one
// connection at a time made Kubernetes probes wait 5 s behind idle ones). The thread has the
// process's default stack, which a CUDA worker's static TLS needs (a library that starts its
// threads with a 100 KiB stack cannot start them there).
#include "ex2d/service/http_server.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ex2d::service {
namespace {

constexpr unsigned kConnectionTimeoutS = 1;      ///< an incomplete request is dropped after it
constexpr std::size_t kConnectionMemory = 8192;  ///< request line and headers, per connection
constexpr unsigned kConnectionLimit = 1000;      ///< open connections at once
constexpr int kListenBacklog = 64;

HttpResponse text_response(int status, std::string body)
{
    HttpResponse response;
    response.status = status;
    response.body = std::move(body);
    return response;
}

}  // namespace

struct HttpServer::Impl {
    std::mutex mutex;  ///< guards handlers
    std::map<std::string, Handler> handlers;
    int port = 0;
    MHD_Daemon* daemon = nullptr;

    HttpResponse respond(const std::string& method, const std::string& url)
    {
        if (method != "GET" && method != "HEAD")
            return text_response(405, "only GET is supported\n");
        Handler handler;
        {
            std::lock_guard<std::mutex> lock(mutex);
            const auto found = handlers.find(url);
            if (found == handlers.end()) return text_response(404, "not found\n");
            handler = found->second;
        }
        try {
            return handler();
        } catch (const std::exception& e) {
            return text_response(500, std::string(e.what()) + "\n");
        }
    }

    // libmicrohttpd's request callback: the URL comes without its query string.
    static MHD_Result answer(void* self, MHD_Connection* connection, const char* url,
                             const char* method, const char* /*version*/,
                             const char* /*upload_data*/, std::size_t* upload_data_size,
                             void** /*request_state*/)
    {
        // A body (none is expected) arrives in further calls; it is read and ignored so that
        // the reply goes out once the request is complete.
        if (*upload_data_size != 0) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        const HttpResponse reply = static_cast<Impl*>(self)->respond(method, url);
        MHD_Response* response = MHD_create_response_from_buffer(
            reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
        if (response == nullptr) return MHD_NO;
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type.c_str());
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
        if (reply.status == 405) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET");
        const MHD_Result queued = MHD_queue_response(connection, unsigned(reply.status), response);
        MHD_destroy_response(response);
        return queued;
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
    if (impl_->daemon != nullptr) return Status::invalid("HTTP server already started");
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
    int fd = -1;
    for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            failure = std::strerror(errno);
            continue;
        }
        // A restarted process can bind again while the old connections sit in TIME_WAIT.
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0) {
            failure = std::strerror(errno);
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(addresses);
    if (fd < 0) return Status::invalid("HTTP " + where + ": cannot bind: " + failure);

    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    const int bound_port = bound.ss_family == AF_INET6
                               ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    impl_->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, nullptr,
                                     nullptr, &Impl::answer, impl_.get(), MHD_OPTION_LISTEN_SOCKET,
                                     fd, MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutS,
                                     MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory,
                                     MHD_OPTION_CONNECTION_LIMIT, kConnectionLimit, MHD_OPTION_END);
    // From here the listening socket is libmicrohttpd's: it closes it when it stops, and on a
    // failed start too, so it is never closed here.
    if (impl_->daemon == nullptr) {
        return Status::invalid("HTTP " + where + ": libmicrohttpd could not start");
    }
    impl_->port = bound_port;
    return Status::ok();
}

int HttpServer::port() const
{
    return impl_->port;
}

void HttpServer::stop()
{
    if (impl_->daemon != nullptr) {
        MHD_stop_daemon(impl_->daemon);  // joins its thread, closes the listening socket
        impl_->daemon = nullptr;
    }
}

}  // namespace ex2d::service
