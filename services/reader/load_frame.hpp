// SPDX-License-Identifier: BSD-3-Clause
#pragma once

#include "ex2d/service/frame_messages.hpp"

namespace ex2d::reader {

/// Reads and checks everything a worker needs for `job`: the preproc file (all of
/// read_preproc's validation, non-finite pixels masked), the PSF (read_psf's validation), the
/// options against the PSF, every check of `ex2d extract` on the image, PSF and options
/// (check_extraction_inputs, -w against the PSF's range included), and the image's and the
/// PSF's CAMERA against the job's. Errors name the file and the problem; they are permanent
/// (failed).
Result<service::FrameInputs> load_frame(const service::Job& job, const std::string& reader_name);

}  // namespace ex2d::reader
