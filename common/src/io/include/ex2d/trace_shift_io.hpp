// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file trace_shift_io.hpp
/// Files of the trace-shift step: the shifted PSF, the offsets table (--outoffsets) and a
/// reference spectrum (--spectrum, desispec's spec-sky.dat format).

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/night_sky_lines.hpp"
#include "ex2d/status.hpp"
#include "ex2d/trace_shifts.hpp"

namespace ex2d {

/// Provenance of a shifted PSF, written as IN_PSF and IN_IMAGE.
struct TraceShiftInputs {
    std::string psf;
    std::string image;
};

/// Writes `output` as a copy of the PSF file `input`, every HDU and card kept, with the data
/// of XTRACE and YTRACE replaced by the result's (same shape as the input's) and the keys
/// desispec's step writes in the PSF HDU: MEANDX, MINDX, MAXDX, MEANDY, MINDY, MAXDY, IN_PSF,
/// IN_IMAGE (paths shortened as desispec does, shorten_desi_path). Written under a temporary
/// name and renamed; errors name the file.
Status write_shifted_psf(const std::string& input, const std::string& output,
                         const TraceShiftResult& result, const TraceShiftInputs& inputs);

/// The same file built in memory from the input PSF's bytes (as the fleet's reader holds
/// them); `input_name` names it in messages.
Result<std::vector<std::uint8_t>> shifted_psf_bytes(const std::vector<std::uint8_t>& input,
                                                    const std::string& input_name,
                                                    const TraceShiftResult& result,
                                                    const TraceShiftInputs& inputs);

/// Writes a PSF file's bytes (from shifted_psf_bytes) to `path` under a temporary name, then
/// renames it.
Status write_psf_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);

/// The offsets table: columns AXIS, WAVELENGTH, FIBER, X, Y, DELTA, ERROR (desispec's) and
/// USED (0 for points the fit rejected). A FITS binary table OFFSETS where `path` contains
/// ".fits", else comma-separated text with a header line. Atomic.
Status write_trace_offsets(const std::string& path, const std::vector<TraceOffset>& offsets);

/// A spectrum sampled at wavelengths (A), as a two-column text file holds it.
struct TabulatedSpectrum {
    std::vector<double> wave, flux;
};

/// Reads rows "wavelength flux" (whitespace separated, '#' comments; desispec's spec-sky.dat
/// format). Errors name the file and the line number.
Result<TabulatedSpectrum> read_tabulated_spectrum(const std::string& path);

/// Reads a reference spectrum (read_tabulated_spectrum, vacuum A) and returns its emission
/// lines (lines_from_spectrum).
Result<std::vector<ReferenceLine>> read_reference_spectrum(const std::string& path);

}  // namespace ex2d
