// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file badcolumns.hpp
/// desi_proc's bad-column step (desi_compute_badcolumn_mask; datamodel 4.7): bins of a
/// finished frame that a bad CCD column biases get specmask BADCOLUMN, and fibres with many
/// such bins get the arm's fibermask BADAMP bit in FIBERMAP FIBERSTATUS. FLUX, IVAR and
/// RESOLUTION are left alone. `ex2d extract --badcolumns` and the fleet's worker both call
/// apply_badcolumn_mask, so the two write the same MASK and FIBERMAP.

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/fits_table.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// specmask BADCOLUMN (bit 10; datamodel 3.5).
constexpr std::uint32_t kSpecmaskBadColumn = 1u << 10;

/// fibermask BADAMPB, BADAMPR or BADAMPZ (bits 22, 23, 24) for arm 'b', 'r' or 'z'; any other
/// letter is a programming error (throws ex2d::Error).
std::int64_t badamp_fibermask(char arm);

/// A calibnight badcolumns table: one entry per bad CCD column.
struct BadColumns {
    std::string source;                ///< the file it came from, for messages
    std::vector<double> column;        ///< COLUMN: CCD column index x
    std::vector<double> elec_per_sec;  ///< ELEC_PER_SEC: excess counts in that column
};

/// Reads `badcolumns-CAMERA-NIGHT.csv` as astropy writes it: a header line naming the columns
/// (COLUMN and ELEC_PER_SEC are needed, others such as CAMERA and SIGMA are ignored), then one
/// line per bad column. A header alone is an empty table. A missing file is an io error; a
/// missing column, a row with the wrong number of fields or a value that is not a finite
/// number is a format error naming the file, the line and the problem.
Result<BadColumns> read_badcolumns_csv(const std::string& path);

/// Writes the table in the same layout (CAMERA, COLUMN, ELEC_PER_SEC), under a temporary name
/// renamed at the end; the folder is created when missing.
Status write_badcolumns_csv(const std::string& path, const BadColumns& table,
                            const std::string& camera);

/// desi_compute_badcolumn_mask's thresholds (its command-line defaults, which desi_proc uses).
struct BadColumnThresholds {
    double elec_per_sec = 0.005;  ///< --threshold-elec-per-sec: a bin's bias that masks it
    double fiber_fraction = 0.4;  ///< --frac-threshold: share of a fibre's bins that flags it
};

/// desispec's empirical flux bias per electron/s of excess in a column at distance `dx`
/// pixels from the trace: 1.1 / (1 + |dx/2|^5) for |dx| < 4.5, else 0.
double badcolumn_flux_bias(double dx);

/// The frame a bad-column mask is applied to. `mask` is [nspec][nwave], spectrum i being PSF
/// fibre specmin + i and FIBERMAP row specmin + i (the rows the frame writer keeps).
struct BadColumnFrame {
    const LegendreTable* xtrace = nullptr;      ///< the extraction PSF's X trace
    const std::vector<double>* wave = nullptr;  ///< the frame's WAVELENGTH, as written
    int specmin = 0;
    int nspec = 0;
    std::uint32_t* mask = nullptr;
    FitsTableBlob* fibermap = nullptr;  ///< full preproc FIBERMAP; empty: no FIBERSTATUS to set
    char arm = 'r';                     ///< the camera's arm, for the BADAMP bit
};

/// What the mask did, for the log.
struct BadColumnOutcome {
    long long masked_bins = 0;         ///< bins given BADCOLUMN
    int masked_fibers = 0;             ///< spectra with at least one such bin
    std::vector<int> flagged_spectra;  ///< spectrum indices (0-based) given BADAMP
};

/// ORs BADCOLUMN into the bins each bad column biases by at least thresholds.elec_per_sec and
/// BADAMP into FIBERSTATUS of the spectra with at least thresholds.fiber_fraction of their
/// bins so marked. An empty table changes nothing. A FIBERMAP without a FIBERSTATUS column, or
/// with fewer rows than the frame, is a format error and leaves mask and fibermap unchanged.
Result<BadColumnOutcome> apply_badcolumn_mask(const BadColumns& table, BadColumnFrame frame,
                                              const BadColumnThresholds& thresholds = {});

}  // namespace ex2d
