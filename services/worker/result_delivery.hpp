// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// One extracted frame on its way to a writer: offered to one writer at a time, sent only to a
// writer that granted room for it, and given up after worker.result_timeout_s (docs/protocol.md,
// "Writer credit: OFFER, GRANT, DECLINE").

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/shm_slots.hpp"
#include "ex2d/service/wire.hpp"
#include "peer_connections.hpp"

namespace ex2d::worker {

class ResultDelivery {
public:
    using Clock = std::chrono::steady_clock;
    enum class Progress { waiting, sent, timed_out };

    ResultDelivery(zmq::socket_t& writers, const PeerConnections& links,
                   service::SlotMappings& writer_slots, std::string worker_name,
                   Clock::duration offer_timeout, Clock::duration result_timeout);

    /// Takes a result to deliver; only one at a time.
    void start(service::Job job, std::vector<zmq::message_t> parts);
    bool busy() const { return job_.has_value(); }
    const service::Job& job() const { return *job_; }
    std::size_t bytes() const { return bytes_; }
    /// Whether the result that was sent went through the writer's shared-memory slot.
    bool sent_in_slot() const { return sent_in_slot_; }
    /// Forgets the result (sent, handed back or dropped).
    void clear();

    /// Offers the result to the next writer when no offer is waiting; timed_out once the
    /// result has waited for a writer longer than the result timeout.
    Progress advance();
    /// A message from the writer with routing id `writer`: on a GRANT for this result the
    /// result is sent there (sent); a grant it cannot use is declined.
    Progress on_message(const std::string& writer, const wire::IncomingMessage& message);

private:
    bool send_small(const std::string& writer, wire::MessageType type,
                    const std::optional<service::SlotLoan>& answered = std::nullopt);
    /// The result for `writer`: its arrays in the slot the grant lent, where this process can
    /// map it and it holds them, else in the message.
    std::vector<zmq::message_t> result_for(const std::string& writer,
                                           const std::optional<service::SlotLoan>& slot);

    zmq::socket_t& writers_;
    const PeerConnections& links_;
    service::SlotMappings& writer_slots_;
    std::string worker_name_;
    Clock::duration offer_timeout_, result_timeout_;
    std::optional<service::Job> job_;
    std::vector<zmq::message_t> parts_;
    std::size_t bytes_ = 0;
    bool sent_in_slot_ = false;
    Clock::time_point ready_at_;
    std::string offered_to_;  ///< routing id of the writer whose GRANT is awaited
    Clock::time_point offered_at_;
    std::size_t next_writer_ = 0;
};

}  // namespace ex2d::worker
