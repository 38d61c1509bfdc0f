// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl timing: an exposure's step timings in desi_proc's --timingfile form, from the state
// transition times the control plane keeps in each frame's hash (Redis TIME, milliseconds;
// docs/redis-schema.md). One timer per written frame: read = reading_at -> extracting_at (the
// reader's loading and the transfer to a worker), extract = extracting_at -> writing_at (the
// extraction and the transfer to a writer), write = writing_at -> done_at.
#include <iostream>
#include <string>
#include <vector>

#include "ctl.hpp"
#include "ex2d/timing_file.hpp"

namespace ex2d::ctl {
namespace {

bool read_ms(const nlohmann::json& frame, const char* field, double& seconds)
{
    if (!frame.contains(field)) return false;
    try {
        seconds = std::stod(frame.at(field).get<std::string>()) / 1000.0;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace

int write_exposure_timing(Connection& c, const std::string& exposure, const std::string& campaign,
                          const std::string& path)
{
    const std::string expid = exposure_id(exposure);
    std::vector<StepTimer> timers;
    for (const std::string& key : exposure_frame_keys(c, campaign, expid)) {
        const nlohmann::json frame = hash(c, key);
        double reading = 0, extracting = 0, writing = 0, done = 0;
        if (frame.value("state", "") != "done" || !read_ms(frame, "reading_at", reading) ||
            !read_ms(frame, "extracting_at", extracting) ||
            !read_ms(frame, "writing_at", writing) || !read_ms(frame, "done_at", done)) {
            continue;  // failed, dead or still in flight: no complete timer
        }
        timers.push_back({{"read", {reading, extracting}},
                          {"extract", {extracting, writing}},
                          {"write", {writing, done}}});
    }
    if (timers.empty()) {
        throw CtlExit{kExitUsage, "exposure " + expid + " (" + campaign + ") has no written frame"};
    }
    const Status recorded = record_step_timings(path, timers, {"read", "extract", "write"});
    if (!recorded.is_ok()) throw CtlExit{kExitOutput, recorded.message()};
    std::cout << "timing of " << timers.size() << " frame(s) of exposure " << expid
              << " written to " << path << std::endl;
    return kExitOk;
}

}  // namespace ex2d::ctl
