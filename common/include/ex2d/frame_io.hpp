// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_io.hpp
/// Writing frame files that desispec.io.read_frame accepts (shared datamodel section 3):
/// FLUX, IVAR, MASK, WAVELENGTH, RESOLUTION, FIBERMAP, CHI2PIX, SCORES with checksums,
/// written under a temporary name and renamed, so no partial file is ever left behind.

#include <string>
#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// What the frame header and FIBERMAP come from.
struct FrameProvenance {
    FitsHeader image_header;     ///< preproc IMAGE header, copied into FLUX (must carry FLAVOR)
    FitsTableBlob fibermap;      ///< preproc FIBERMAP; rows [specmin, specmin+nspec) are written
    FitsHeader psf_header;       ///< PSF HDU header (its IN_PSF becomes ORIG_PSF)
    std::string input_image;     ///< IN_IMG, shortened by shorten_desi_path
    std::string input_psf;       ///< IN_PSF, shortened by shorten_desi_path
    ExtractionOptions options;   ///< recorded in the header (geometry and constants)
    bool write_scores = true;    ///< false: no SCORES HDU (desi_extract_spectra --no-scores)
};

/// A file path as desispec records it in headers (io.meta.shorten_filename): a path under
/// $DESI_SPECTRO_CALIB starts with SPCALIB instead, else one under $DESI_SPECTRO_REDUX/$SPECPROD
/// with SPECPROD; other paths are unchanged. Plain prefix replacement, as desispec does.
std::string shorten_desi_path(const std::string& path);

/// Writes the frame. FLAVOR missing or not one of none/flat/arc/zero/bias/science is a
/// format error and nothing is written.
Status write_frame(const std::string& path, const ExtractedFrame& frame,
                   const FrameProvenance& provenance);

/// Writes frame.model ([model_ny][model_nx], float64 primary HDU, header = frame header).
Status write_model_image(const std::string& path, const ExtractedFrame& frame,
                         const FrameProvenance& provenance);

/// A frame file read back (for tests, the benchmark and accuracy reports).
struct FrameFile {
    FitsHeader header;                   ///< FLUX header
    int nspec = 0;
    int nwave = 0;
    int ndiag = 0;
    std::vector<double> flux, ivar, chi2pix, wave, resolution;
    std::vector<std::uint32_t> mask;
    std::vector<long long> fiber;        ///< FIBERMAP FIBER column
    std::vector<std::string> hdu_names;  ///< EXTNAMEs in file order
};
Result<FrameFile> read_frame(const std::string& path);
/// The FLUX (primary) header alone, e.g. to compare a frame's provenance without its arrays.
Result<FitsHeader> read_frame_header(const std::string& path);

}  // namespace ex2d
