// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file verify.hpp
/// What Redis holds after a run of ex2d-queue-bench: every frame and exposure done, nothing
/// pending, and how much memory the kept state takes.

#include <string>

#include "ex2d/service/redis_client.hpp"
#include "ex2d/status.hpp"

namespace ex2d::bench {

struct Verification {
    long long frames_not_done = 0;
    long long frames_later_attempt = 0;  ///< done frames whose last holder had epoch > 1
    long long exposures = 0;
    long long exposures_not_done = 0;  ///< state not done, or counters that disagree
    long long pending = 0;             ///< XPENDING of the job stream
    long long stream_length = 0;       ///< XLEN: acknowledged entries stay in the stream
    long long events_length = 0;
    long long stream_bytes = 0;  ///< MEMORY USAGE ... SAMPLES 0
    long long events_bytes = 0;
    double frame_bytes = 0;  ///< mean MEMORY USAGE of a sample of frame hashes
    double exposure_bytes = 0;
    std::string frame_encoding;  ///< OBJECT ENCODING of a frame hash
};

/// Reads every frame and exposure of the run (`threads` connections in parallel).
Result<Verification> verify(const service::RedisOptions& options, const std::string& ns,
                            const std::string& stream, const std::string& lane,
                            const std::string& campaign, long long jobs, int threads);

/// Deletes every key of the namespace (runs against a Redis the benchmark did not start).
Status delete_namespace(service::RedisClient& redis, const std::string& ns);

}  // namespace ex2d::bench
