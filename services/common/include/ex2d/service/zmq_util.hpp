// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file zmq_util.hpp
/// Socket set-up and non-blocking multipart I/O shared by the fleet's processes
/// (docs/protocol.md, "Sockets and discovery").

#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/settings.hpp"

namespace ex2d::service {

/// A bounded send high-water mark and no receive limit (zmq_util.cpp says why), linger,
/// maximum message size; IMMEDIATE on connecting sockets; ZMTP heartbeats (which matter on
/// tcp://).
void configure_socket(zmq::socket_t& socket, const ZmqSettings& settings, bool connecting);

/// Closes `socket` at once, dropping what it has not yet sent, for a process that drains: the
/// protocol re-sends or re-delivers all of it (zmq_util.cpp says why linger must not be used).
void close_dropping_unsent(zmq::socket_t& socket);

/// Binds to `address` ({name} is replaced by the process name) and returns the endpoint
/// actually bound (with the port the kernel chose for "*").
std::string bind_socket(zmq::socket_t& socket, std::string address, const std::string& name);

/// Sends all parts without blocking. false when the peer is unreachable or its queue is full
/// (nothing was sent: a multipart message goes whole or not at all).
bool try_send(zmq::socket_t& socket, std::vector<zmq::message_t>& parts);

/// Receives one whole multipart message if one is waiting.
std::optional<std::vector<zmq::message_t>> try_recv(zmq::socket_t& socket);

/// Waits up to `timeout_ms` for any of `items` (sockets or file descriptors) to become
/// readable; false on timeout or when a signal (SIGTERM) interrupts the wait.
bool wait_any(zmq::pollitem_t* items, int count, long timeout_ms);

/// Waits up to `timeout_ms` for `socket` to become readable.
bool wait_readable(zmq::socket_t& socket, long timeout_ms);

}  // namespace ex2d::service
