// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file compressors.hpp
/// The gzip encoders that ex2d-data-plane-bench compares on a frame's FITS bytes: zlib (what
/// CFITSIO uses), libdeflate and Intel ISA-L igzip, each where the build found it.

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/status.hpp"

namespace ex2d::bench {

/// One library at one level.
struct GzipCandidate {
    std::string library;  ///< "zlib", "libdeflate" or "isa-l"
    int level = 0;
    std::string note;  ///< e.g. "CFITSIO's level"
};

/// The candidates this build can run: zlib 1 and 6, libdeflate 1, 4 and 6, ISA-L 1, 2 and 3.
std::vector<GzipCandidate> gzip_candidates();

/// A single-member gzip stream of `in` (the whole buffer in one call, output buffer sized
/// before the call). An internal error of the library is an io error naming it.
Result<std::vector<std::uint8_t>> gzip(const GzipCandidate& c, const std::vector<std::uint8_t>& in);

/// Inflates `gz` with zlib, which must find exactly one gzip member spanning all of it, and
/// compares it with `expected`.
Status check_gzip(const std::vector<std::uint8_t>& gz, const std::vector<std::uint8_t>& expected);

}  // namespace ex2d::bench
