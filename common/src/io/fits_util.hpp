// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fits_util.hpp
/// Private helpers shared by the FITS readers and writers: an owning cfitsio handle, error
/// messages that name the file, HDU lookup by EXTNAME, header copying, in-memory table blobs
/// and the temporary-name-then-rename writer.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fitsio.h>

#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/status.hpp"

namespace ex2d::fits {

struct FitsCloser {
    void operator()(fitsfile* f) const;
};
/// Closes the file (ignoring errors) when it goes out of scope; call close() to check them.
using FitsPtr = std::unique_ptr<fitsfile, FitsCloser>;

/// "PATH: WHAT: cfitsio text (status N)"; also clears cfitsio's message stack.
std::string error_text(const std::string& path, const std::string& what, int status);
/// An io error with error_text().
Status io_error(const std::string& path, const std::string& what, int status);

/// Opens an existing file read-only without cfitsio's extended file-name syntax.
/// Missing or unreadable files are io errors.
Result<FitsPtr> open_read(const std::string& path);
/// Closes and reports any error of the final flush.
Status close(const std::string& path, FitsPtr& file);

/// EXTNAMEs of all HDUs in file order ("" where absent). Detects truncated files (io error):
/// an HDU whose header cannot be read or whose data runs past the end of the file.
Result<std::vector<std::string>> scan_hdus(fitsfile* f, const std::string& path);
/// 1-based HDU number of the first HDU called `name` in `names`, 0 if none.
int find_hdu(const std::vector<std::string>& names, const std::string& name);
/// Moves to HDU `hdu_num` (1-based) or to the HDU named `name`, with file-naming errors.
Status move_to(fitsfile* f, const std::string& path, int hdu_num);
/// Format error "PATH: no HDU named NAME" + suffix when absent, else moves there.
Status move_to_named(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                     const std::string& name, const std::string& suffix = "");

/// Keyword of an 80-character card ("NAXIS1", "COMMENT", "" for a blank card; the name after
/// "HIERARCH " for long keywords). Implemented in fits_header.cpp.
std::string card_keyword(const std::string& card);

/// Every card of the current HDU header (80 characters each, no END).
Result<FitsHeader> read_header(fitsfile* f, const std::string& path);
/// True for keywords that describe the HDU's structure (SIMPLE, NAXISn, TFORMn, Z*,
/// CHECKSUM, EXTNAME, ...): they must not be copied from one HDU to another.
bool is_structural_keyword(const std::string& key);
/// Writes the non-structural cards of `header` into the current HDU.
Status write_header(fitsfile* f, const std::string& path, const FitsHeader& header);

/// Dimensions of the current image HDU in FITS order (NAXIS1 first).
Result<std::vector<long>> image_shape(fitsfile* f, const std::string& path, const std::string& hdu);
/// Reads all pixels of the current image HDU, converted by cfitsio to `datatype` (TDOUBLE,
/// TUINT, TINT, TFLOAT, ...). NaNs are passed through unchanged.
Status read_pixels(fitsfile* f, const std::string& path, const std::string& hdu, int datatype,
                   long long npix, void* out);

/// A FITS file built in memory: a buffer from malloc and the bytes of it that the file uses.
/// A large buffer released is kept for the thread's next memory file (one at a time).
struct MemoryFile {
    struct Free {
        void operator()(std::uint8_t* p) const;
    };
    std::unique_ptr<std::uint8_t, Free> data;
    std::size_t size = 0;  ///< from the start to the end of the last HDU
};

/// A new FITS file in memory, filled by `body`. `size_hint` (bytes, 0 if unknown) is the
/// expected size, allocated at the first write so that the buffer need not grow. Errors name
/// `what`.
Result<MemoryFile> build_memory_file(const std::string& what, std::size_t size_hint,
                                     const std::function<Status(fitsfile*)>& body);

/// A new FITS file in memory, filled by `body` (which returns a cfitsio status), as the bytes
/// from its start to the end of its last HDU. Errors name `what`.
Result<std::vector<std::uint8_t>> write_memory_file(const std::string& what,
                                                    const std::function<int(fitsfile*)>& body);

/// Copies the current HDU of `src` into a new blob (empty primary + that HDU).
Status copy_hdu_to_blob(fitsfile* src, const std::string& path, FitsTableBlob& blob);

/// Opens a blob read-only and moves to its table HDU. Keeps the buffer alive while open.
class BlobReader {
public:
    BlobReader() = default;
    BlobReader(const BlobReader&) = delete;
    BlobReader& operator=(const BlobReader&) = delete;
    Status open(const FitsTableBlob& blob, const std::string& what);
    fitsfile* get() const { return file_.get(); }

private:
    void* buffer_ = nullptr;
    size_t size_ = 0;
    FitsPtr file_;
};

/// Name for a temporary file next to `path` that keeps its suffix from ".fits" on (so that
/// "x.fits.gz" is still written as gzip).
std::string temporary_name(const std::string& path);

/// Creates a temporary file next to `path`, lets `body` fill it, closes it and renames it to
/// `path`. On any failure the temporary is removed and `path` is untouched. CFITSIO writes the
/// file (a ".gz" name through its zlib path).
Status write_atomically(const std::string& path, const std::function<Status(fitsfile*)>& body);

/// Writes `bytes` to `path` under a registered temporary name, then renames (a small text
/// file such as a timing report).
Status write_bytes_atomically(const std::string& path, const std::string& bytes);

/// The same, with the file built in memory (`size_hint`: its expected size in bytes, 0 if
/// unknown) and written in one go; a ".gz" name is compressed as one gzip member by ISA-L
/// where the build has it, else as write_atomically does. Several times less CPU for a frame.
/// Not for tile-compressed HDUs: CFITSIO 4.2 failed now and then to write them into a memory
/// file ("tried to move past end of file", test_preproc_io), which files on disk never did.
///
/// `observer`, when set, sees the bytes written (compressed for a ".gz" name) once they are on
/// disk and before the rename; it is not called where CFITSIO wrote the file itself.
using WrittenBytesObserver = std::function<void(const std::uint8_t* bytes, std::size_t size)>;
Status write_atomically_from_memory(const std::string& path,
                                    const std::function<Status(fitsfile*)>& body,
                                    std::size_t size_hint,
                                    const WrittenBytesObserver& observer = {});

}  // namespace ex2d::fits
