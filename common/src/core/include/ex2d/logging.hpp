// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file logging.hpp
/// The project's logger and progress reporting. Log lines are structured as key=value pairs
/// and carry the exposure, camera and frame ids where they are known.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace ex2d {

/// The shared "ex2d" logger (stderr, created on first use).
std::shared_ptr<spdlog::logger> logger();

/// The level names set_log_level takes: trace, debug, info, warning (or warn), error,
/// critical, off.
const std::vector<std::string>& log_level_names();
/// Sets the level from one of log_level_names(); throws std::invalid_argument for any other.
void set_log_level(const std::string& level);

/// A progress bar on a terminal; on a non-terminal, a log line at every 10% of the work.
class ProgressBar {
public:
    ProgressBar(std::string label, long total);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    /// Thread-safe; `done` is the number of finished items so far.
    void update(long done);
    void finish();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ex2d
