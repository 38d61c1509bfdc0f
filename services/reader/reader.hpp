// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2d-reader: takes frame jobs from Redis (nightly lane first), reads the preproc file and the
// PSF with the engine's readers, applies the mask rule and sends each frame to a worker that
// asked for one (docs/protocol.md). Also runs the reaper for the lanes' streams.

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <zmq.hpp>

#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/settings.hpp"
#include "ex2d/service/shm_slots.hpp"
#include "job_feed.hpp"
#include "load_frame.hpp"

namespace ex2d::reader {

using Clock = std::chrono::steady_clock;

class Reader : public service::FleetService {
public:
    explicit Reader(service::ServiceContext& ctx);
    Status start() override;
    bool step() override;
    void drain(Clock::time_point deadline) override;

private:
    struct Loaded {
        service::Job job;
        std::vector<zmq::message_t> parts;
        Clock::time_point loaded_at;
    };
    struct Credit {
        std::string identity;
        Clock::time_point received_at;
        std::optional<service::SlotLoan> slot;  ///< the worker's slot, when it lent one
    };

    void receive_messages(long wait_ms, bool wants_job);
    bool dispatch();
    /// The frame as it goes to `credit`'s worker: its arrays in the worker's slot where the
    /// credit lent one that this process can map and that holds them, else in the message.
    /// `in_slot` says which; `parts` keep the frame's own parts either way.
    std::vector<zmq::message_t> frame_for(const Credit& credit, std::vector<zmq::message_t>& parts,
                                          bool& in_slot);
    /// Loads the next job: a re-delivered one, else one from the feed (asking it for one
    /// when it has none yet). false when there was none to load.
    bool load_next();
    std::optional<service::Job> next_job();
    /// How long the main loop may sleep when nothing is ready: until the oldest credit must be
    /// answered, the reaper is due, or at most 500 ms (a drain request is seen within that).
    long sleep_ms() const;
    void reap();

    const service::ReaderSettings settings_;
    FrameLoader loader_;
    std::unique_ptr<JobFeed> feed_;  ///< goes before the keeper: it holds the jobs it takes
    zmq::socket_t router_;
    std::deque<Loaded> ready_;
    std::deque<service::Job> claimed_;  ///< own pending after a restart, and reaped jobs
    std::deque<Credit> credits_;
    service::SlotMappings worker_slots_;
    Clock::time_point next_reap_;
    Clock::time_point next_depth_;
    long frames_sent_ = 0;
};

}  // namespace ex2d::reader
