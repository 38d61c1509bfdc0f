// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file preproc.hpp
/// A DESI preproc frame in memory and its file I/O.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/scratch_allocator.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// Pixels with any of these ccdmask bits get zero weight: every bit but BADREADNOISE (256).
constexpr std::uint32_t kExtractMaskBits = 767;

/// Pixel arrays are [ny][nx] row-major: index = row * nx + column (row = CCD y, wavelength).
struct PreprocImage {
    int ny = 0;
    int nx = 0;                      ///< columns held (the CCD's width unless a window)
    int col_begin = 0;               ///< first CCD column held
    int ccd_nx = 0;                  ///< the CCD's width; 0 = nx
    LargeArray<double> image;        ///< electrons
    LargeArray<double> ivar;         ///< 1/electron^2, as stored (not yet masked)
    LargeArray<std::uint32_t> mask;  ///< ccdmask bits, 0 = good
    LargeArray<double> readnoise;    ///< electrons; empty when the file has none
    FitsHeader header;               ///< the IMAGE HDU header
    FitsTableBlob fibermap;          ///< the FIBERMAP HDU; empty when absent
    std::string source = "memory";   ///< file name, for messages
    long n_nonfinite_masked = 0;     ///< pixels masked by the reader for NaN/Inf image or ivar

    int ccd_width() const { return ccd_nx > 0 ? ccd_nx : nx; }
    /// Extraction weights: ivar where (mask & 767) == 0 and image, ivar finite, else 0.
    LargeArray<double> weights() const;
    /// The same, made in place from ivar and handed over (ivar is left empty): a frame-sized
    /// plane less to allocate where ivar is not needed afterwards.
    LargeArray<double> take_weights();
    /// Forces masking of non-finite pixels (sets mask bit BAD, ivar 0, image 0) and counts them.
    long mask_nonfinite();
};

/// Reads IMAGE, IVAR, MASK (tile-compressed), optional READNOISE and FIBERMAP by EXTNAME.
/// Non-finite pixels are masked and counted (a warning is logged with the count).
/// Errors name the file and the problem, e.g. "preproc-r0.fits: no HDU named IVAR".
Result<PreprocImage> read_preproc(const std::string& path);

/// CCD columns [begin, end) of every row.
struct ColumnRange {
    int begin = 0;
    int end = 0;
};
/// Which planes to read. Extraction uses IMAGE, IVAR and MASK only; READNOISE is then
/// checked for shape but not read (a fifth of the reading time, and a plane of memory).
enum class PreprocPlanes { all, extraction };

/// The same, holding only `columns` of each plane read (all rows; {} = every column), so
/// that memory and reading follow what is extracted; the whole file is still checked for
/// shape.
Result<PreprocImage> read_preproc(const std::string& path, ColumnRange columns,
                                  PreprocPlanes planes = PreprocPlanes::all);

/// The IMAGE header, the shapes of all planes (checked) and the FIBERMAP, without pixels
/// (image, ivar and mask empty; nx is the CCD's width): the checks before the reading.
Result<PreprocImage> read_preproc_metadata(const std::string& path);

/// A preproc frame as the fleet's reader sends it: IMAGE and the extraction weights (the rule
/// of PreprocImage::weights, non-finite pixels masked) in float32, DESI's own precision.
struct PreprocFloat32 {
    int ny = 0;
    int nx = 0;
    FitsHeader header;            ///< the IMAGE HDU header
    FitsTableBlob fibermap;       ///< the FIBERMAP HDU; empty when absent
    long n_nonfinite_masked = 0;  ///< pixels given weight 0 and value 0 for NaN/Inf
};

/// How read_preproc_float32 brings a file into memory: `automatic` maps a file that is mostly
/// in the page cache and reads one that is not with O_DIRECT (into `file_buffer`, kept from
/// file to file); `mapped` and `direct` force one way (benchmarks, file systems where O_DIRECT
/// misbehaves). A file system that refuses O_DIRECT (tmpfs) is mapped.
enum class InputRead { automatic, mapped, direct };

/// "auto", "mmap" or "direct" (the configuration's names); an error names the choices.
Result<InputRead> parse_input_read(const std::string& name);

/// Reads `path` once, whole: `see_file_bytes` is shown every byte of the file (to checksum
/// exactly what was read), then IMAGE and IVAR are converted straight from the file's bytes
/// into `image` and `weights`, resized to ny * nx (memory they already hold is
/// reused: no fresh pages per frame), with MASK read into `mask_scratch`. Checks as
/// read_preproc_metadata. nullopt, having filled nothing, where IMAGE or IVAR is not stored as
/// plain float32 (BITPIX -32, unscaled, uncompressed): read_preproc handles those.
Result<std::optional<PreprocFloat32>> read_preproc_float32(
    const std::string& path, const std::function<void(const void*, std::size_t)>& see_file_bytes,
    LargeArray<float>& image, LargeArray<float>& weights, LargeArray<std::uint32_t>& mask_scratch,
    InputRead how, LargeArray<unsigned char>& file_buffer);

/// IMAGE and the extraction weights (the rule of PreprocImage::weights) in float32, read
/// through CFITSIO's conversion: at most 204 MB for an r frame where read_preproc holds 340 MB, for measurements that need no double precision (trace shifts).
struct PreprocWeightedFloat32 {
    int ny = 0;
    int nx = 0;
    LargeArray<float> image;    ///< electrons, [ny][nx]
    LargeArray<float> weights;  ///< ivar, 0 where masked, non-finite or ivar <= 0
    FitsHeader header;          ///< the IMAGE HDU header
    std::string source;
};
/// Errors as read_preproc_metadata's, naming the file.
Result<PreprocWeightedFloat32> read_preproc_weighted_float32(const std::string& path);

/// Reads the FIBERMAP HDU of `path` (a preproc file or a separate fibermap file, as
/// desi_extract_spectra -f). A file without that HDU is a format error naming the file.
Result<FitsTableBlob> read_fibermap(const std::string& path);

/// Writes a preproc file in DESI's layout (IMAGE primary, IVAR, MASK RICE-compressed int16,
/// READNOISE if present, FIBERMAP if present), atomically (temporary name, then rename).
Status write_preproc(const std::string& path, const PreprocImage& img);

}  // namespace ex2d
