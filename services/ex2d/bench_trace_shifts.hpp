// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file bench_trace_shifts.hpp
/// The trace-shift part of ex2d bench.

#include "ex2d/psf.hpp"
#include "ex2d/simulate.hpp"

namespace ex2d::tool {

/// Measures the trace shifts of the bench's simulated frame on one thread, as ex2d
/// trace-shifts does (float32 pixels, desi_proc's science options), against `psf` with its
/// traces moved by a known amount, and prints core-seconds, memory and the shift recovered.
void bench_trace_shifts(const SimulatedFrame& simulated, const GaussHermitePsf& psf);

/// The large-shift scans: a flat and an arc simulated (as `frame`, all fibres) through `psf`
/// with its traces moved far beyond the fine measurement's reach, each measured with desi_proc's
/// options and the scan, on one thread; prints the scan's core-seconds, the whole step's, and
/// the offsets found.
void bench_large_shift_scans(const GaussHermitePsf& psf, const SimulationOptions& frame);

}  // namespace ex2d::tool
