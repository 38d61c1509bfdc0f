// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_meta.hpp
/// Metadata of a simulated preproc frame (internal to ex2d::sim): the IMAGE header and the
/// 500-row FIBERMAP table, in DESI's preproc and fibermap layout.

#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/status.hpp"
#include "spectra.hpp"

namespace ex2d::sim {

inline constexpr int kFibersPerPetal = 500;
inline constexpr double kExposureTime = 900.0;  // s, a standard DESI dark-time science exposure
inline constexpr long long kTileId = 1000;

/// IMAGE header keys of a science exposure: CAMERA, EXPID, NIGHT, FLAVOR, OBSTYPE, EXPTIME,
/// SPECGRPH, TILEID, MJD-OBS, DATE-OBS, CCDSIZE, DETECTOR, BUNIT.
FitsHeader make_image_header(const SimulationOptions& opt, int petal, int npix_x, int npix_y);

/// FIBERMAP of the petal as desispec assembles one for the main survey: its columns in its
/// order, with units and descriptions (builtin_fibermap_columns()), 500 rows, FIBER = 500 *
/// petal + row; OBJTYPE 'SKY' for sky fibres, 'TGT' for the other lit fibres
/// (kinds[row - opt.specmin]) and 'NON' for unlit ones. Implemented in fibermap.cpp.
Result<FitsTableBlob> make_fibermap(const SimulationOptions& opt, int petal,
                                    const std::vector<TargetKind>& kinds);

}  // namespace ex2d::sim
