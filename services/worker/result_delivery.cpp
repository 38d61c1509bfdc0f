// SPDX-License-Identifier: BSD-3-Clause
#include "result_delivery.hpp"

#include "ex2d/service/zmq_util.hpp"

namespace ex2d::worker {

ResultDelivery::ResultDelivery(zmq::socket_t& writers, const PeerConnections& links,
                               service::SlotMappings& writer_slots, std::string worker_name,
                               Clock::duration offer_timeout, Clock::duration result_timeout)
    : writers_(writers),
      links_(links),
      writer_slots_(writer_slots),
      worker_name_(std::move(worker_name)),
      offer_timeout_(offer_timeout),
      result_timeout_(result_timeout)
{
}

void ResultDelivery::start(service::Job job, std::vector<zmq::message_t> parts)
{
    job_ = std::move(job);
    parts_ = std::move(parts);
    bytes_ = 0;
    for (const auto& p : parts_) bytes_ += p.size();
    sent_in_slot_ = false;
    ready_at_ = Clock::now();
    offered_to_.clear();
}

void ResultDelivery::clear()
{
    job_.reset();
    parts_.clear();
    bytes_ = 0;
    offered_to_.clear();
}

bool ResultDelivery::send_small(const std::string& writer, wire::MessageType type,
                                const std::optional<service::SlotLoan>& answered)
{
    wire::OutgoingMessage m;
    m.type = type;
    m.meta["worker"] = worker_name_;
    if (answered) {
        m.answers_slot = answered->token;
        m.answers_generation = answered->generation;
    }
    if (job_) {
        m.job_id = job_->job;
        m.epoch = std::uint64_t(job_->epoch);
        m.meta["job"] = job_->job;
        m.meta["bytes"] = bytes_;
    }
    auto parts = wire::encode(m);
    parts.insert(parts.begin(), zmq::message_t(writer.data(), writer.size()));
    return service::try_send(writers_, parts);
}

ResultDelivery::Progress ResultDelivery::advance()
{
    if (!job_) return Progress::waiting;
    const auto now = Clock::now();
    if (now - ready_at_ > result_timeout_) return Progress::timed_out;
    const bool waiting_on_offer =
        !offered_to_.empty() && links_.is_live(offered_to_) && now - offered_at_ < offer_timeout_;
    if (waiting_on_offer) return Progress::waiting;
    const std::vector<std::string> writers = links_.live_routing_ids();
    // Round robin, and away from a writer that let its offer lapse while another is there.
    for (std::size_t tried = 0; tried < writers.size(); ++tried) {
        const std::string& writer = writers[next_writer_++ % writers.size()];
        if (writer == offered_to_ && writers.size() > 1) continue;
        if (send_small(writer, wire::MessageType::offer)) {
            offered_to_ = writer;
            offered_at_ = now;
            return Progress::waiting;
        }
    }
    return Progress::waiting;
}

std::vector<zmq::message_t> ResultDelivery::result_for(const std::string& writer,
                                                       const std::optional<service::SlotLoan>& slot)
{
    std::vector<zmq::message_t> out;
    out.reserve(parts_.size() + 1);
    out.emplace_back(writer.data(), writer.size());
    auto placed = writer_slots_.place(parts_, slot);
    sent_in_slot_ = placed.has_value();
    if (sent_in_slot_) {
        for (auto& p : *placed) out.push_back(std::move(p));
        return out;
    }
    // Copies share the array buffers (ZeroMQ counts references), so a failed send keeps them.
    for (auto& part : parts_) {
        out.emplace_back();
        out.back().copy(part);
    }
    return out;
}

ResultDelivery::Progress ResultDelivery::on_message(const std::string& writer,
                                                    const wire::IncomingMessage& message)
{
    if (message.type != wire::MessageType::grant) return Progress::waiting;
    const auto slot = service::SlotLoan::from_meta(message.meta);
    if (!job_ || message.job_id != job_->job) {
        // The result went to another writer, or was handed back: free this writer's credit.
        send_small(writer, wire::MessageType::decline, slot);
        return Progress::waiting;
    }
    std::vector<zmq::message_t> out = result_for(writer, slot);
    if (!service::try_send(writers_, out)) {
        offered_to_.clear();
        return Progress::waiting;
    }
    return Progress::sent;
}

}  // namespace ex2d::worker
