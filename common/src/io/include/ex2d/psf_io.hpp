// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file psf_io.hpp
/// Reading and writing PSFVER 3 Gauss-Hermite PSF files.

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
Result<GaussHermitePsf> read_psf_bytes(const std::vector<std::uint8_t>& bytes,
                                       const std::string& name);

/// Writes the PSF in the same layout (XTRACE primary, YTRACE, PSF table with PARAM, COEFF,
/// LEGDEGX, LEGDEGW), atomically.
Status write_psf(const std::string& path, const GaussHermitePsf& psf);

/// A CAMERA card as compared between image and PSF: lower case, without blanks or the quotes
/// that DESI's PSF files keep inside the string ("'r0      '" is r0).
std::string normalized_camera(const std::string& card);

/// Status::format naming both files when the image's and the PSF's CAMERA cards differ (a
/// PSF of another camera extracts garbage without any other error); OK when either is absent.
Status check_psf_camera(const std::string& image_camera, const std::string& image_name,
                        const GaussHermitePsf& psf, const std::string& psf_name);

}  // namespace ex2d
