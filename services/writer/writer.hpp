// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2d-writer: grants workers room for extracted frames (docs/protocol.md, "Writer credit"),
// writes each exactly as `ex2d extract` would at the path of its job (temporary file, fsync,
// a rename that never replaces this job's frame, fsync of the folder), then records the result
// and acknowledges the job in one fenced Redis script. Decoding and writing run on
// `writer.write_threads` threads, each with its own Redis connection, so that the main loop
// keeps receiving, granting and fencing while a frame is compressed.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "ex2d/fibermap_columns.hpp"
#include "ex2d/service/fleet_process.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/settings.hpp"
#include "ex2d/service/shm_slots.hpp"
#include "storage_health.hpp"
#include "temporary_ledger.hpp"

namespace ex2d::writer {

using Clock = std::chrono::steady_clock;

/// What became of a frame written (or found already written).
struct WriteOutcome {
    bool skipped = false;  ///< the file was already there with the same provenance
    std::string checksum;  ///< XXH3-128 of the file
    long long bytes = 0;
};

class Writer : public service::FleetService {
public:
    explicit Writer(service::ServiceContext& ctx);
    ~Writer() override;  ///< stops and joins the write threads
    Status start() override;
    bool step() override;
    void drain(Clock::time_point deadline) override;

private:
    /// A worker that offered a result and waits for a GRANT (by its routing id).
    struct Offer {
        std::string worker;
        std::string job;
        std::size_t bytes = 0;  ///< the result's size, as the OFFER says
    };
    /// A GRANT sent and not yet answered.
    struct Grant {
        Clock::time_point at;
        std::optional<service::SlotLoan> slot;  ///< lent with it
    };
    /// A RESULT fenced to "writing" and held by the keeper, waiting for a write thread.
    // As wire::IncomingMessage's (wire.hpp): the throw reported in its implicit move
    // constructor lies inside nlohmann::json's noexcept move constructor.
    // NOLINTNEXTLINE(bugprone-exception-escape)
    struct Received {
        service::Job job;
        wire::IncomingMessage message;
        /// The slot its arrays lie in (token 0: they came in the message).
        std::uint64_t slot = 0;
        std::uint32_t slot_generation = 0;
    };
    void receive(std::vector<zmq::message_t> parts);
    /// `slot`: the lent slot the result's arrays lie in (0: none), returned once decoded.
    void accept_result(wire::IncomingMessage message, std::uint64_t slot,
                       std::uint32_t slot_generation);
    void grant();
    void expire_grants();
    void write_loop(std::size_t index);
    /// Writes the result, trying again while the output storage fails (until a write
    /// succeeds, the lease is lost or the writer stops: then the job is handed back).
    void write_result(Received received, std::size_t index, service::ControlPlane& plane);
    /// Records a successful write or a failure other than the storage's, and the frame's end.
    void conclude(const service::Job& job, const service::FrameOutputs& out,
                  const Result<WriteOutcome>& outcome, Clock::time_point start,
                  service::ControlPlane& plane);
    /// A failed write on the output storage (write_result.cpp): the log line, the metrics,
    /// the process hash and the frame's error; the wait before the next try, in seconds.
    double note_storage_failure(const service::Job& job, const Status& status, int failures,
                                service::ControlPlane& plane);
    void note_storage_recovered();
    /// Waits `delay_s` before the next try of write thread `index`; false when the writer
    /// stops meanwhile.
    bool wait_to_retry(std::size_t index, double delay_s);
    std::size_t queued() const;
    bool busy() const;  ///< a result queued or being written
    /// The storage fails and every write thread that holds a result waits to retry it: a
    /// drain need not wait for writes that cannot succeed.
    bool waiting_on_storage() const;

    const service::WriterSettings settings_;
    zmq::socket_t router_;
    /// The ledger is shared by the main loop (its sweep) and the write threads; it locks
    /// itself and talks to Redis on a connection of its own.
    std::unique_ptr<service::RedisClient> ledger_redis_;
    std::unique_ptr<RedisTemporaryLedger> temporaries_;
    std::shared_ptr<const FibermapColumns> fibermap_columns_;  ///< nullptr: the built-in table
    Clock::time_point next_sweep_;
    std::deque<Offer> offers_;              ///< oldest first
    std::map<std::string, Grant> granted_;  ///< by the worker's routing id
    /// Lent with each GRANT until the write thread has decoded the RESULT.
    std::unique_ptr<service::SlotPool> result_slots_;

    /// One Redis connection per write thread: hiredis connections are not thread-safe.
    std::vector<service::ControlConnection> write_planes_;
    std::vector<std::thread> write_threads_;
    mutable std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<Received> queue_;                        ///< oldest first
    std::vector<std::optional<service::Job>> writing_;  ///< per write thread
    /// Per write thread: waiting to try a write again (it hands its job back if stopped).
    std::vector<bool> retrying_;
    std::condition_variable retry_cv_;  ///< wakes the waits to retry (with queue_mutex_)
    StorageHealth storage_;
    bool stop_writing_ = false;
    int wake_fd_ = -1;  ///< eventfd a write thread signals when it takes a result (credit freed)
    std::atomic<long> frames_done_{0};
};

/// Defence in depth before a frame is written: its header's CAMERA, EXPID and NIGHT and its
/// FIBERMAP's fibres (row r of petal p is fibre 500 p + r) must be those of its job; a
/// format error naming the mismatch otherwise.
Status check_frame_identity(const service::FrameOutputs& outputs);

/// Writes `outputs` at its job's output path. `still_ours` is asked between the durable
/// temporary file and the rename; when it says no, the temporary file is removed and the
/// rename never happens. The rename itself never replaces a file holding this job's frame.
/// Temporary files are recorded in `temporaries` while they exist. The FIBERMAP's known
/// columns get the units and descriptions of `fibermap_columns` (nullptr: the built-in table).
Result<WriteOutcome> write_output(
    const service::FrameOutputs& outputs, const service::Actor& writer, bool fsync_files,
    const std::function<bool()>& still_ours, TemporaryLedger& temporaries,
    std::shared_ptr<const FibermapColumns> fibermap_columns = nullptr);

}  // namespace ex2d::writer
