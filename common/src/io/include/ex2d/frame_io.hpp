// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_io.hpp
/// Writing frame files that desispec.io.read_frame accepts:
/// FLUX, IVAR, MASK, WAVELENGTH, RESOLUTION, FIBERMAP, CHI2PIX, SCORES with checksums,
/// written under a temporary name and renamed, so no partial file is ever left behind.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/fibermap_columns.hpp"
#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/scratch_allocator.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// What the frame header and FIBERMAP come from.
struct FrameProvenance {
    FitsHeader image_header;    ///< preproc IMAGE header, copied into FLUX (must carry FLAVOR)
    FitsTableBlob fibermap;     ///< preproc FIBERMAP; rows [specmin, specmin+nspec) are written
    FitsHeader psf_header;      ///< PSF HDU header (its IN_PSF becomes ORIG_PSF)
    std::string input_image;    ///< IN_IMG, shortened by shorten_desi_path
    std::string input_psf;      ///< IN_PSF, shortened by shorten_desi_path
    ExtractionOptions options;  ///< recorded in the header (geometry and constants)
    bool write_scores = true;   ///< false: no SCORES HDU (desi_extract_spectra --no-scores)
    /// Units and descriptions given to the FIBERMAP's known columns (datamodel 4.8);
    /// nullptr: builtin_fibermap_columns().
    std::shared_ptr<const FibermapColumns> fibermap_columns;
};

/// A file path as desispec records it in headers (io.meta.shorten_filename): a path under
/// $DESI_SPECTRO_CALIB starts with SPCALIB instead, else one under $DESI_SPECTRO_REDUX/$SPECPROD
/// with SPECPROD; other paths are unchanged. Plain prefix replacement, as desispec does.
std::string shorten_desi_path(const std::string& path);

/// desispec's RAW scores of a frame: columns of nspec values each.
struct FrameScores {
    char band = 'r';  ///< 'b', 'r' or 'z', from mean(wave)
    double lo = 0;    ///< top-hat [lo, hi) in Angstrom
    double hi = 0;
    int nbins = 0;  ///< wavelengths inside [lo, hi); 0 means no scores can be computed
    std::vector<std::string> names;     ///< SUM_RAW_COUNT_X, MEDIAN_RAW_COUNT_X, MEDIAN_RAW_SNR_X
    std::vector<std::string> comments;  ///< TTYPE comments, as desispec writes them
    std::vector<std::vector<double>> columns;
};

/// A frame as its file stores it: FLUX, IVAR, RESOLUTION and CHI2PIX in float32, WAVELENGTH in
/// float64, and SCORES computed from the float64 flux while it existed. What a fleet worker
/// sends its writer: less than half the bytes of an ExtractedFrame, and the same file.
struct StoredFrame {
    int specmin = 0;
    int nspec = 0;
    int nwave = 0;
    int ndiag = 0;
    double psferr = 0.01;
    std::vector<double> wave;
    LargeArray<float> flux, ivar, resolution, chi2pix;  ///< layouts of ExtractedFrame
    std::vector<std::uint32_t> mask;
    FrameScores scores;
};
/// The frame in its file's precision, SCORES computed with wavelength step `dw` (the
/// fallback of numpy.gradient for a single bin).
StoredFrame to_stored_frame(const ExtractedFrame& frame, double dw);

/// Writes the frame. FLAVOR missing or not one of none/flat/arc/zero/bias/science is a
/// format error and nothing is written.
Status write_frame(const std::string& path, const ExtractedFrame& frame,
                   const FrameProvenance& provenance);

/// Sees the finished file's bytes, once and in order, where the file was built in memory; not
/// called where CFITSIO wrote the file itself (a ".gz" name without a gzip encoder). Lets the
/// fleet's writer checksum what it wrote without reading the file back.
using FileBytesObserver = std::function<void(const std::uint8_t* bytes, std::size_t size)>;

/// The same for a frame already in its file's precision (the fleet's writer); `observer`, when
/// set, is called with the file's bytes after they are written and before the rename.
Status write_frame(const std::string& path, const StoredFrame& frame,
                   const FrameProvenance& provenance, const FileBytesObserver& observer = {});

/// Writes frame.model ([model_ny][model_nx], float64 primary HDU, header = frame header).
Status write_model_image(const std::string& path, const ExtractedFrame& frame,
                         const FrameProvenance& provenance);

/// A frame file read back (for tests, the benchmark and accuracy reports).
struct FrameFile {
    FitsHeader header;  ///< FLUX header
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
