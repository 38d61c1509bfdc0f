// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file trace_shift_step.hpp
/// A frame's trace shifts in the fleet (issue 31): desi_proc's method for the exposure's
/// OBSTYPE, or the one the job asks for, measured on the planes of the frame. The reader runs
/// it on the planes it has just read (`reader.trace_shifts_in: reader`), or the worker on its
/// host side while its device extracts the frame before (`worker`); both through these
/// functions, so that a frame's PSF, header cards and Redis fields do not depend on where.

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/service/control_plane.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d::service {

/// What the step did.
struct TraceShiftOutcome {
    std::string method = "none";  ///< sky, continuum or none (asked or by OBSTYPE)
    bool failed = false;          ///< could not measure: extracted with the input PSF
    std::string reason;           ///< why, when failed
    TraceShiftResult result;      ///< when measured
    double cpu_seconds = 0;       ///< of the calling thread, measuring and shifting
};

/// The method the step uses for `job` on a frame with `image_header`: the job's
/// trace_shifts, desi_proc's choice by OBSTYPE for "auto", none for "" (jobs queued before the
/// step existed).
std::string trace_shift_method(const Job& job, const FitsHeader& image_header);

/// Runs the step for `job` on `image` (Float32ImageView or ImageView) against `psf`, the
/// parsed `psf_bytes`. When it measures, `psf_bytes` become the shifted PSF's (and the file
/// job.shifted_psf is written when set). When it cannot (a frame without lit fibres or sky
/// lines, a masked CCD, a fit that fails) the rule is docs/fleet.md's: the frame is extracted
/// with the input PSF and flagged, never silently.
template <typename View>
TraceShiftOutcome run_trace_shift_step(const Job& job, const FitsHeader& image_header,
                                       const View& image, const GaussHermitePsf& psf,
                                       std::vector<std::uint8_t>& psf_bytes);

/// The outcome as cards of the frame's HDU0: TRSHIFT (the method, or FAILED), MEANDX, MINDX,
/// MAXDX, MEANDY, MINDY, MAXDY when measured, TRSHFAIL (the reason) when failed.
void record_trace_shifts(const TraceShiftOutcome& outcome, FitsHeader& header);

/// The outcome as fields of the frame's Redis hash (docs/redis-schema.md): trace_shifts,
/// and meandx, mindx, maxdx, meandy, mindy, maxdy or trace_shift_error.
std::vector<std::string> trace_shift_fields(const TraceShiftOutcome& outcome);

/// Sets `fields` (trace_shift_fields) in the frame's Redis hash, fenced by the job's epoch. A
/// refusal or a Redis error is a warning: the frame goes on with its header cards.
void note_trace_shifts(ControlPlane& plane, const Job& job, const std::vector<std::string>& fields);

}  // namespace ex2d::service
