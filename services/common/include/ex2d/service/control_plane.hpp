// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file control_plane.hpp
/// The job queue, leases, fencing and state of docs/redis-schema.md. Every change of a job is
/// one Lua script that first checks the caller's epoch against the stream's delivery count.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace ex2d::service {

constexpr const char* kReaderGroup = "readers";

/// A frame job as it sits in a lane's stream.
struct Job {
    std::string job;       ///< "{campaign}/{expid:08d}/{camera}"
    std::string lane;      ///< nightly | campaign
    std::string campaign;  ///< "nightly" for the nightly lane
    std::string night;
    std::string expid;  ///< 8 digits
    std::string camera;
    std::string preproc, psf, output;
    std::string badcolumns;  ///< calibnight badcolumns CSV to apply; empty: no such step
    std::string options;     ///< JSON of extraction options
    /// Trace shifts before extraction: auto (desi_proc's choice by OBSTYPE), sky, continuum
    /// or none; "" (a job queued before the step existed) is none.
    std::string trace_shifts;
    /// Where the trace-shifted PSF is written (desi_proc's psf-CAMERA-EXPID.fits); "": not.
    std::string shifted_psf;
    std::string stream;     ///< the stream key it came from
    std::string stream_id;  ///< its entry id
    long long epoch = 0;    ///< delivery count when taken

    std::map<std::string, std::string> fields() const;
    static Job from_fields(const std::vector<std::pair<std::string, std::string>>& fields);
};

/// Who is acting, written into the frame hash.
struct Actor {
    std::string name;
    std::string host;
    int pid = 0;
};

/// Outcome of a fenced change.
enum class Fence { applied, stale, gone };
const char* to_string(Fence fence);

class ControlPlane {
public:
    ControlPlane(RedisClient& redis, std::string ns) : redis_(redis), ns_(std::move(ns)) {}

    const std::string& ns() const { return ns_; }
    std::string key(const std::string& suffix) const { return ns_ + ":" + suffix; }
    std::string nightly_stream() const { return key("jobs:nightly"); }
    std::string campaign_stream(const std::string& campaign) const
    {
        return key("jobs:campaign:" + campaign);
    }
    std::string frame_key(const std::string& campaign, const std::string& expid,
                          const std::string& camera) const
    {
        return key("frame:" + campaign + ":" + expid + ":" + camera);
    }
    std::string exposure_key(const std::string& campaign, const std::string& expid) const
    {
        return key("exposure:" + campaign + ":" + expid);
    }

    /// Creates the consumer group of a stream (and the stream) where missing.
    Status ensure_group(const std::string& stream);
    /// The streams readers serve, in priority order: nightly, then active campaigns (sorted).
    Result<std::vector<std::string>> lane_streams();

    /// Queues a job (state queued). Skips a frame that is queued or in progress, and one that is
    /// done unless `force`. Returns true when queued.
    Result<bool> submit(const Job& job, bool force);

    /// Reads one new job for `consumer` from `stream` (XREADGROUP >) and takes it: state
    /// reading, epoch = delivery count. nullopt when the stream has none.
    Result<std::optional<Job>> take_new(const std::string& stream, const Actor& consumer);
    /// Waits up to `block_ms` for new jobs in any of `streams` (one XREADGROUP ... BLOCK, so an
    /// idle reader costs Redis nothing) and takes what arrives: at most one job per stream, in
    /// the order of `streams`. Empty when none came.
    Result<std::vector<Job>> wait_for_new(const std::vector<std::string>& streams,
                                          const Actor& consumer, long block_ms);
    /// Re-claims this consumer's own pending jobs (restart under the same name), bumping their
    /// epoch so that holders from before the restart are fenced off.
    Result<std::vector<Job>> take_own_pending(const std::string& stream, const Actor& consumer);
    /// The reaper: claims jobs idle longer than lease_ms for `consumer`. Jobs whose extraction
    /// started max_deliveries times, or that were delivered more than twice that, are
    /// dead-lettered (returned in `dead`); the others are returned to deliver again.
    Result<std::vector<Job>> reap(const std::string& stream, const Actor& consumer,
                                  long long lease_ms, int max_deliveries, std::vector<Job>& dead);

    /// Renews the lease without bumping the epoch.
    Result<Fence> renew(const Job& job);
    /// Moves the frame to `state` (extracting, writing) and renews, fenced.
    Result<Fence> advance(const Job& job, const std::string& state, const Actor& actor);
    /// Records a transient error on the frame without releasing it, fenced.
    Result<Fence> note_error(const Job& job, const std::string& error);
    /// Sets `fields` (name, value, name, value, ...) in the frame hash, fenced.
    Result<Fence> note_fields(const Job& job, const std::vector<std::string>& fields);
    /// Permanent failure: state failed with the error, acknowledged, fenced.
    Result<Fence> fail(const Job& job, const std::string& error, const Actor& actor);
    /// Done: output written; state done, acknowledged, events, fenced.
    Result<Fence> finish(const Job& job, const std::string& checksum, long long bytes,
                         const Actor& actor);

    /// Gives the job back at once (state queued, idle time set past the lease so that the next
    /// reaper pass re-delivers it), fenced. Used when draining. `undelivered`: the frame was
    /// extracted and no writer took the result; the reaper does not charge it to the frame.
    Result<Fence> hand_back(const Job& job, long long lease_ms, bool undelivered = false);

    /// Cancels a campaign's frames that no reader has taken yet (state cancelled); returns how
    /// many. Frames in flight finish.
    Result<long long> cancel_queued(const std::string& campaign);

    /// Current frame hash (empty when absent).
    Result<std::map<std::string, std::string>> frame(const std::string& campaign,
                                                     const std::string& expid,
                                                     const std::string& camera);

private:
    Result<Fence> fenced(const std::string& body, const Job& job, std::vector<std::string> args);

    RedisClient& redis_;
    std::string ns_;
    std::set<std::string> streams_with_group_;  ///< XGROUP CREATE once per stream and process
};

/// Milliseconds since the Unix epoch.
long long unix_ms();

}  // namespace ex2d::service
