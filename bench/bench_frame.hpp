// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file bench_frame.hpp
/// The full-size frame that ex2d-data-plane-bench moves through its stages, as the writer
/// receives it (service::FrameOutputs of job bench/00000001/r0): read from a frame file,
/// extracted from a frame simulated with a PSF, or made up with the value ranges of one.

#include <string>

#include "ex2d/service/frame_messages.hpp"
#include "ex2d/status.hpp"

namespace ex2d::bench {

struct FrameSource {
    std::string frame;  ///< a frame file to read (its header and FIBER column come along)
    std::string psf;    ///< else a PSF: simulate a full r0 frame and extract it on the CPU
    int threads = 2;    ///< for that extraction
    /// Else a synthetic frame: noise-like flux, ivar, chi2pix and smooth resolution rows.
    unsigned long seed = 20261125;
};

/// The frame in memory, its job's output path under `dir` (the caller adds the suffix).
Result<service::FrameOutputs> make_bench_frame(const FrameSource& source, const std::string& dir);

}  // namespace ex2d::bench
