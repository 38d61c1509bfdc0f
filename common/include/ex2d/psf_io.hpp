// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file psf_io.hpp
/// Reading and writing PSFVER 3 Gauss-Hermite PSF files (shared datamodel section 2).

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// Reads XTRACE, YTRACE and PSF by EXTNAME, each with its own WAVEMIN/WAVEMAX; PSFERR defaults
/// to 0.01. A file of another format (no XTRACE, PSFTYPE not GAUSS-HERMITE, PSFVER < 3) or a
/// truncated file is a format/io error naming the file.
Result<GaussHermitePsf> read_psf(const std::string& path);
/// The same from a PSF file's bytes in memory (as a reader sends them to a worker); `name`
/// stands for the file in messages.
Result<GaussHermitePsf> read_psf_bytes(const std::vector<std::uint8_t>& bytes, const std::string& name);

/// Writes the PSF in the same layout (XTRACE primary, YTRACE, PSF table with PARAM, COEFF,
/// LEGDEGX, LEGDEGW), atomically.
Status write_psf(const std::string& path, const GaussHermitePsf& psf);

}  // namespace ex2d
