// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file timing_file.hpp
/// Step timings in the JSON form desi_proc writes with --timingfile (desiutil.timer's
/// compute_stats over its timers, datamodel 4.9), so that desispec's timing tools read ours:
/// one object whose keys are step names, each with start.min/max/mean/median and
/// stop.min/max/mean/median as ISO 8601 local times, duration.min/max/mean/median in seconds,
/// and n, the number of timers (frames, processes) that ran the step.

#include <map>
#include <string>
#include <vector>

#include "ex2d/status.hpp"

namespace ex2d {

struct StepTime {
    double start_unix = 0;  ///< seconds since the epoch
    double stop_unix = 0;
};

/// One timer: the steps one process (or one frame) ran, by name.
using StepTimer = std::map<std::string, StepTime>;

/// Seconds since the epoch now, with the system clock's resolution.
double unix_now();

/// Adds the statistics over `timers` of each step they name to the JSON object in `path`,
/// replacing those steps' entries and keeping every other (desi_proc augments an existing
/// timing file); creates the file where there is none. Written through a temporary file and a
/// rename. An existing file that is not a JSON object is an error naming it; it is left as is.
Status record_step_timings(const std::string& path, const std::vector<StepTimer>& timers,
                           const std::vector<std::string>& step_order);

}  // namespace ex2d
