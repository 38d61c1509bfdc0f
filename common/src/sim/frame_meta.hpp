// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_meta.hpp
/// Metadata of a simulated preproc frame (internal to ex2d::core): the IMAGE header and the
/// 500-row FIBERMAP table, in DESI's preproc and fibermap layout.

#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/simulate.hpp"
#include "ex2d/status.hpp"
#include "spectra.hpp"

namespace ex2d::sim {

/// IMAGE header keys of a science exposure: CAMERA, EXPID, NIGHT, FLAVOR, OBSTYPE, EXPTIME,
/// SPECGRPH, TILEID, MJD-OBS, DATE-OBS, CCDSIZE, DETECTOR, BUNIT.
FitsHeader make_image_header(const SimulationOptions& opt, int petal, int npix_x, int npix_y);

/// FIBERMAP of the petal: 500 rows, FIBER = 500 * petal + row; OBJTYPE 'SKY' for sky fibres,
/// 'TGT' for the other lit fibres (kinds[row - opt.specmin]) and 'NON' for unlit ones.
Result<FitsTableBlob> make_fibermap(const SimulationOptions& opt, int petal,
                                    const std::vector<TargetKind>& kinds);

}  // namespace ex2d::sim
