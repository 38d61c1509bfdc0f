// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// ex2d-writer: receives extracted frames, writes each exactly as `ex2d extract` would at the
// path of its job (temporary file, fsync, rename, fsync of the folder), then records the
// result and acknowledges the job in one fenced Redis script.

#include <chrono>
#include <memory>

#include <zmq.hpp>

#include "ex2d/service/control_plane.hpp"
#include "ex2d/service/curve.hpp"
#include "ex2d/service/frame_messages.hpp"
#include "ex2d/service/keeper.hpp"
#include "ex2d/service/service.hpp"

namespace ex2d::writer {

using Clock = std::chrono::steady_clock;

/// What became of a frame written (or found already written).
struct WriteOutcome {
    bool skipped = false;   ///< the file was already there with the same provenance
    std::string checksum;   ///< XXH3-128 of the file
    long long bytes = 0;
};

class Writer : public service::Service {
public:
    explicit Writer(service::ServiceContext& ctx);
    Status start() override;
    bool step() override;
    void drain(Clock::time_point deadline) override;

private:
    void handle(wire::IncomingMessage message);

    service::ServiceContext& ctx_;
    service::Actor me_;
    std::unique_ptr<service::RedisClient> redis_;
    std::unique_ptr<service::ControlPlane> plane_;
    std::unique_ptr<service::Keeper> keeper_;
    zmq::context_t zmq_context_;
    zmq::socket_t pull_;
    std::unique_ptr<service::SocketSecurity> security_;  ///< after the context: closed first
    long frames_done_ = 0;
};

/// Writes `outputs` at its job's output path. `still_ours` is asked between the durable
/// temporary file and the rename; when it says no, the temporary file is removed and the
/// rename never happens.
Result<WriteOutcome> write_output(const service::FrameOutputs& outputs, const service::Actor& writer,
                                  bool fsync_files, const std::function<bool()>& still_ours);

}  // namespace ex2d::writer
