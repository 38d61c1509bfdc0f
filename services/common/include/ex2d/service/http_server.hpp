// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file http_server.hpp
/// The services' HTTP endpoint for /healthz, /readyz and /metrics (GNU libmicrohttpd, one
/// thread polling all connections): idle, slow or hostile clients cannot stall it; requests are
/// capped in size and dropped after 1 s if incomplete.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ex2d/status.hpp"

namespace ex2d::service {

struct HttpResponse {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
};

class HttpServer {
public:
    using Handler = std::function<HttpResponse()>;
    HttpServer();
    ~HttpServer();  ///< stops the thread and closes the socket
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    /// Registers a GET handler for an exact path, before start().
    void handle(const std::string& path, Handler handler);
    /// Binds host:port (port 0 = any free port) and starts serving. Unknown paths get 404.
    Status start(const std::string& host, int port);
    /// The bound port (valid after start()).
    int port() const;
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ex2d::service
