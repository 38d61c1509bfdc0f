// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2d-worker: asks readers for frames (credit), extracts them with the engine on the CPU or a
// GPU, and hands the extracted frame to a writer that has granted room for it. The backend and the parsed PSFs stay
// between frames; extraction runs on its own thread so that the service keeps answering
// health checks, renewing leases and receiving the next frame. A frame whose reader left the
// trace-shift step to the workers (reader.trace_shifts_in: worker) gets it on a third thread
// while it waits, so that the step overlaps the extraction of the frame before.

#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <zmq.hpp>

#include "ex2d/extraction_backend.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/lru_cache.hpp"
#include "ex2d/service/settings.hpp"
#include "ex2d/service/shm_slots.hpp"
#include "device_failures.hpp"
#include "peer_connections.hpp"
#include "result_delivery.hpp"
#include "trace_shift_step.hpp"

namespace ex2d::worker {

using Clock = std::chrono::steady_clock;

class Worker : public service::FleetService {
public:
    explicit Worker(service::ServiceContext& ctx);
    ~Worker() override;
    Status start() override;
    bool step() override;
    void drain(Clock::time_point deadline) override;
    int exit_code() const override { return exit_code_; }

private:
    /// A frame received and not yet extracting.
    struct WaitingFrame {
        service::Job job;
        /// Absent while the trace-shift thread holds them.
        std::optional<service::FrameInputs> inputs;
        bool step_pending = false;  ///< its trace-shift step is this worker's and has not run
        bool step_here = false;     ///< its trace-shift step ran (or runs) on this worker
        /// The trace-shifted PSF, parsed by the step's thread: the frame's own, so not cached.
        std::shared_ptr<const GaussHermitePsf> shifted_psf;
        /// When the extraction thread was first free for it while its step still ran.
        std::optional<Clock::time_point> needed_at;
    };
    /// What the trace-shift thread hands back.
    struct TraceShiftDone {
        service::FrameInputs inputs;
        service::TraceShiftOutcome outcome;
        std::shared_ptr<const GaussHermitePsf> shifted_psf;
        Status status;  ///< not ok: a PSF could not be parsed, and the frame fails
        double seconds = 0;
    };

    void discover();
    void ask_for_frames();
    void receive_messages(long wait_ms);
    void receive_from_writers();
    /// Takes the message: its parts are freed when it returns, before the slot is given back.
    // NOLINTNEXTLINE(performance-unnecessary-value-param)
    void accept_frame(wire::IncomingMessage message);
    /// Starts the trace-shift step of the first waiting frame that needs it, one at a time.
    void start_trace_shifts();
    void collect_trace_shifts();
    /// Runs on the trace-shift thread.
    TraceShiftDone shift_traces(service::FrameInputs inputs);
    /// Whether the first waiting frame can go to the extraction thread.
    bool front_ready() const;
    void start_extraction();
    void collect_extraction();
    void fail_frame(const service::Job& job, const std::string& error);
    /// The device failed in the middle of `job`: the frame goes back to the queue, the
    /// failure is recorded, and the process ends with kExitDevice.
    void device_failed(const service::Job& job, const std::string& error);
    /// Whether this host's device failed worker.max_device_failures times within the window
    /// (this worker's predecessors'): then it takes no work.
    bool device_retired();
    void send_result();
    /// `shifted_psf`: the frame's own PSF from this worker's trace-shift step; null: its
    /// psf_file, through the cache.
    Result<service::FrameOutputs> extract(service::FrameInputs& inputs,
                                          std::shared_ptr<const GaussHermitePsf> shifted_psf);
    /// Float64 planes of a frame already extracted, to decode the next one into.
    LargeArray<double> take_spare_plane();
    void return_spare_plane(LargeArray<double> plane);
    /// The frame's PSF, parsed once and kept while the worker's last PSFs include it. A PSF
    /// the reader shifted for this frame alone is parsed and not kept. Thread-safe.
    Result<std::shared_ptr<const GaussHermitePsf>> psf_for(const service::FrameInputs& inputs);

    const service::WorkerSettings settings_;
    std::unique_ptr<ExtractionBackend> backend_;
    zmq::socket_t dealer_;
    zmq::socket_t writers_;  ///< ROUTER: one routing id per writer connection
    std::unique_ptr<service::HandshakeMonitor> dealer_handshakes_, writer_handshakes_;
    std::unique_ptr<PeerConnections> readers_, writer_links_;
    std::unique_ptr<service::SlotPool> frame_slots_;  ///< lent to readers with each CREDIT
    std::unique_ptr<service::SlotMappings> writer_slots_;
    std::unique_ptr<ResultDelivery> delivery_;
    std::deque<Clock::time_point> credits_out_;  ///< CREDITs sent and not yet answered
    std::deque<WaitingFrame> waiting_;           ///< received, not yet extracting
    std::optional<service::Job> extracting_job_;
    std::future<Result<service::FrameOutputs>> extraction_;
    std::future<TraceShiftDone> trace_shift_;  ///< the step running for a waiting frame
    /// The trace-shift thread's float32 planes (one step at a time): a frame that came in
    /// float32 is measured on them, as the reader measures it, at 2/3 of the CPU that its
    /// float64 planes cost.
    LargeArray<float> step_image_, step_weights_;
    std::mutex spare_mutex_;  ///< the extraction thread gives planes back
    std::vector<LargeArray<double>> spare_planes_;
    // Planes for the frames a worker holds at once (its credit) are enough; more would only
    // keep memory that no frame will use.
    std::size_t max_spare_planes_ = 0;
    int extraction_done_fd_ = -1;   ///< eventfd the extraction thread signals when it returns
    int trace_shift_done_fd_ = -1;  ///< and the trace-shift thread
    /// Parsed input PSFs by checksum: the 30 cameras of an exposure and a few more, so that
    /// the cameras of a night, which come round in turn, find theirs again. The extraction and
    /// trace-shift threads both use it.
    std::mutex psf_mutex_;
    service::LruCache<std::string, std::shared_ptr<const GaussHermitePsf>> psf_cache_{32};
    Clock::time_point next_discovery_;
    long frames_done_ = 0;
    std::string device_;
    std::unique_ptr<DeviceFailureRecord> device_failures_;
    bool retired_ = false;            ///< the device failed too often: no credit is ever sent
    bool device_has_failed_ = false;  ///< step() ends the process
    int exit_code_ = 0;
};

}  // namespace ex2d::worker
