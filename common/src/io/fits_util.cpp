// SPDX-License-Identifier: BSD-3-Clause
#include "fits_util.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <utility>

#include "ex2d/temporary_files.hpp"
#include "file_output.hpp"

namespace ex2d::fits {

namespace {

std::string trim_right(std::string s)
{
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

bool starts_with(const std::string& s, const char* prefix)
{
    return s.compare(0, std::strlen(prefix), prefix) == 0;
}

/// True when `key` is `root` followed by one or more digits (NAXIS1, TFORM12, ...).
bool is_indexed(const std::string& key, const char* root)
{
    size_t n = std::strlen(root);
    if (key.size() <= n || key.compare(0, n, root) != 0) return false;
    return std::all_of(key.begin() + n, key.end(), [](char c) { return std::isdigit(c) != 0; });
}

/// Bytes of the data unit without the padding to 2880, from the raw header keywords (for a
/// tile-compressed image these are the keywords of the underlying binary table).
long long raw_data_bytes(fitsfile* f, int* status)
{
    int bitpix = 0;
    int naxis = 0;
    fits_read_key(f, TINT, "BITPIX", &bitpix, nullptr, status);
    fits_read_key(f, TINT, "NAXIS", &naxis, nullptr, status);
    if (*status || naxis == 0) return 0;
    long long count = 1;
    for (int i = 1; i <= naxis; ++i) {
        char key[FLEN_KEYWORD];
        std::snprintf(key, sizeof key, "NAXIS%d", i);
        long long n = 0;
        fits_read_key(f, TLONGLONG, key, &n, nullptr, status);
        count *= n;
    }
    long long pcount = 0;
    long long gcount = 1;
    int st = 0;
    if (fits_read_key(f, TLONGLONG, "PCOUNT", &pcount, nullptr, &st)) pcount = 0;
    st = 0;
    if (fits_read_key(f, TLONGLONG, "GCOUNT", &gcount, nullptr, &st)) gcount = 1;
    fits_clear_errmsg();
    return std::abs(bitpix) / 8 * gcount * (pcount + count);
}

const char* const kStructuralKeys[] = {
    "SIMPLE",   "BITPIX",   "NAXIS",    "EXTEND",   "PCOUNT",  "GCOUNT",   "XTENSION",
    "BSCALE",   "BZERO",    "EXTNAME",  "CHECKSUM", "DATASUM", "TFIELDS",  "THEAP",
    "END",      "ZIMAGE",   "ZCMPTYPE", "ZBITPIX",  "ZNAXIS",  "ZMASKCMP", "ZSIMPLE",
    "ZTENSION", "ZEXTEND",  "ZBLOCKED", "ZPCOUNT",  "ZGCOUNT", "ZHECKSUM", "ZDATASUM",
    "ZQUANTIZ", "ZDITHER0", "ZBLANK",   "ZSCALE",   "ZZERO",
};
const char* const kStructuralRoots[] = {
    "NAXIS", "TTYPE", "TFORM",  "TDIM",  "TUNIT", "TNULL", "TSCAL",
    "TZERO", "TDISP", "ZNAXIS", "ZTILE", "ZNAME", "ZVAL",
};

/// cfitsio adds these two COMMENT cards to every primary header it creates; copying them
/// from a header read back would duplicate them on each round trip.
bool is_cfitsio_boilerplate(const std::string& card)
{
    return starts_with(card, "COMMENT   FITS (Flexible Image Transport System) format is") ||
           starts_with(card, "COMMENT   and Astrophysics', volume 376, page 359; bibcode:");
}

/// Temporary files being written, for remove_temporary_files(). Registered before the file
/// is created, so that an interruption between creation and registration cannot leak it.
std::mutex g_temporaries_mutex;
std::set<std::string> g_temporaries;

void register_temporary(const std::string& path)
{
    std::lock_guard<std::mutex> lock(g_temporaries_mutex);
    g_temporaries.insert(path);
}

void unregister_temporary(const std::string& path)
{
    std::lock_guard<std::mutex> lock(g_temporaries_mutex);
    g_temporaries.erase(path);
}

}  // namespace

void FitsCloser::operator()(fitsfile* f) const
{
    int status = 0;
    if (f) fits_close_file(f, &status);
    fits_clear_errmsg();
}

std::string error_text(const std::string& path, const std::string& what, int status)
{
    char text[FLEN_STATUS] = {0};
    fits_get_errstatus(status, text);
    fits_clear_errmsg();
    return path + ": " + what + ": " + text + " (cfitsio status " + std::to_string(status) + ")";
}

Status io_error(const std::string& path, const std::string& what, int status)
{
    return Status::io(error_text(path, what, status));
}

Result<FitsPtr> open_read(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Status::io(path + ": no such file");
    if (std::filesystem::is_directory(path, ec)) return Status::io(path + ": is a directory");
    fitsfile* raw = nullptr;
    int status = 0;
    if (fits_open_diskfile(&raw, path.c_str(), READONLY, &status)) {
        if (raw) FitsCloser{}(raw);
        return io_error(path, "cannot open as FITS", status);
    }
    return FitsPtr(raw);
}

Status close(const std::string& path, FitsPtr& file)
{
    int status = 0;
    fits_close_file(file.release(), &status);
    if (status) return io_error(path, "cannot close", status);
    return Status::ok();
}

Result<std::vector<std::string>> scan_hdus(fitsfile* f, const std::string& path)
{
    std::vector<std::string> names;
    long long previous_end = 0;
    for (int hdu = 1;; ++hdu) {
        int status = 0;
        int type = 0;
        fits_movabs_hdu(f, hdu, &type, &status);
        // No further HDU is normal only where the file ends exactly with the previous one
        // (FITS pads every HDU to 2880 bytes): a shorter file lost its tail, a longer one
        // holds the start of a header cut short.
        if (status == END_OF_FILE && hdu > 1) {
            fits_clear_errmsg();
            const long long size = f->Fptr->logfilesize;
            if (size == previous_end) break;
            return Status::io(path + ": truncated file: " + std::to_string(size) + " bytes, HDU " +
                              std::to_string(hdu - 1) + " ends at byte " +
                              std::to_string(previous_end));
        }
        if (status) {
            return io_error(
                path, "cannot read the header of HDU " + std::to_string(hdu) + " (truncated file?)",
                status);
        }
        char extname[FLEN_VALUE] = {0};
        if (fits_read_key(f, TSTRING, "EXTNAME", extname, nullptr, &status)) {
            status = 0;
            extname[0] = '\0';
        }
        long long headstart = 0;
        long long datastart = 0;
        long long dataend = 0;
        fits_get_hduaddrll(f, &headstart, &datastart, &dataend, &status);
        long long nbytes = raw_data_bytes(f, &status);
        if (status) return io_error(path, "cannot read HDU " + std::to_string(hdu), status);
        // FITSfile is part of cfitsio's public header; its logical size is the only way to
        // see that the last HDU's data stops short (cfitsio reports that only on reading).
        if (datastart + nbytes > f->Fptr->logfilesize) {
            return Status::io(path + ": truncated file: HDU " + std::to_string(hdu) + " needs " +
                              std::to_string(datastart + nbytes) + " bytes, file has " +
                              std::to_string(f->Fptr->logfilesize));
        }
        previous_end = dataend;
        names.push_back(trim_right(extname));
    }
    fits_clear_errmsg();
    return names;
}

int find_hdu(const std::vector<std::string>& names, const std::string& name)
{
    for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == name) return int(i) + 1;
    }
    return 0;
}

Status move_to(fitsfile* f, const std::string& path, int hdu_num)
{
    int status = 0;
    int type = 0;
    if (fits_movabs_hdu(f, hdu_num, &type, &status)) {
        return io_error(path, "cannot move to HDU " + std::to_string(hdu_num), status);
    }
    return Status::ok();
}

Status move_to_named(fitsfile* f, const std::string& path, const std::vector<std::string>& names,
                     const std::string& name, const std::string& suffix)
{
    int hdu = find_hdu(names, name);
    if (hdu == 0) return Status::format(path + ": no HDU named " + name + suffix);
    return move_to(f, path, hdu);
}

Result<FitsHeader> read_header(fitsfile* f, const std::string& path)
{
    int status = 0;
    int nkeys = 0;
    FitsHeader header;
    if (fits_get_hdrspace(f, &nkeys, nullptr, &status)) {
        return io_error(path, "cannot read header", status);
    }
    header.cards.reserve(size_t(nkeys));
    for (int k = 1; k <= nkeys; ++k) {
        char card[FLEN_CARD] = {0};
        if (fits_read_record(f, k, card, &status)) {
            return io_error(path, "cannot read header card " + std::to_string(k), status);
        }
        std::string c(card);
        c.resize(80, ' ');
        header.cards.push_back(std::move(c));
    }
    return header;
}

bool is_structural_keyword(const std::string& key)
{
    for (const char* k : kStructuralKeys) {
        if (key == k) return true;
    }
    for (const char* root : kStructuralRoots) {
        if (is_indexed(key, root)) return true;
    }
    return false;
}

Status write_header(fitsfile* f, const std::string& path, const FitsHeader& header)
{
    int status = 0;
    for (const std::string& card : header.cards) {
        if (is_structural_keyword(card_keyword(card)) || is_cfitsio_boilerplate(card)) continue;
        if (fits_write_record(f, trim_right(card).c_str(), &status)) {
            return io_error(path, "cannot write header card '" + trim_right(card) + "'", status);
        }
    }
    return Status::ok();
}

Result<std::vector<long>> image_shape(fitsfile* f, const std::string& path, const std::string& hdu)
{
    int status = 0;
    int type = 0;
    int naxis = 0;
    fits_get_hdu_type(f, &type, &status);
    if (status == 0 && type != IMAGE_HDU) {
        return Status::format(path + ": HDU " + hdu + " is not an image");
    }
    fits_get_img_dim(f, &naxis, &status);
    if (status) return io_error(path, "cannot read the dimensions of HDU " + hdu, status);
    std::vector<long> naxes(size_t(std::max(naxis, 0)), 0);
    if (naxis > 0 && fits_get_img_size(f, naxis, naxes.data(), &status)) {
        return io_error(path, "cannot read the dimensions of HDU " + hdu, status);
    }
    return naxes;
}

Status read_pixels(fitsfile* f, const std::string& path, const std::string& hdu, int datatype,
                   long long npix, void* out)
{
    if (npix == 0) return Status::ok();
    int status = 0;
    int anynul = 0;
    if (fits_read_img(f, datatype, 1, npix, nullptr, out, &anynul, &status)) {
        return io_error(path, "cannot read the pixels of HDU " + hdu, status);
    }
    return Status::ok();
}

namespace {

/// The block of the last large memory file this thread released, for the next one. A block
/// fresh from the kernel costs a page fault and the clearing of each 4 KiB page as CFITSIO
/// first writes it, which was a third of the time an uncompressed frame took to write.
/// CFITSIO is always handed the block as empty (size 0), so it never reads what it holds.
struct SpareBlock {
    void* block = nullptr;
    ~SpareBlock() { std::free(block); }
};
thread_local SpareBlock t_spare;
constexpr std::size_t kKeepBlocksFrom = std::size_t(1) << 20;

/// CFITSIO's realloc for memory files. Past a hint, it asks for `deltasize` more bytes at each
/// write that needs them; the block grows by half at least, so that a file larger than its hint
/// costs a few reallocations, not one per write.
void* grow_buffer(void* p, std::size_t n)
{
    if (!p && t_spare.block) {
        p = std::exchange(t_spare.block, nullptr);
        // Too small: not worth realloc's copy of bytes nobody will read.
        if (::malloc_usable_size(p) < n) {
            std::free(p);
            p = nullptr;
        }
    }
    const std::size_t usable = p ? ::malloc_usable_size(p) : 0;
    if (n <= usable) return p;
    return std::realloc(p, std::max(n, usable + usable / 2));
}

}  // namespace

void MemoryFile::Free::operator()(std::uint8_t* p) const
{
    if (!p) return;
    const std::size_t size = ::malloc_usable_size(p);
    if (size < kKeepBlocksFrom || (t_spare.block && ::malloc_usable_size(t_spare.block) >= size)) {
        std::free(p);
        return;
    }
    std::free(t_spare.block);
    t_spare.block = p;
}

Result<MemoryFile> build_memory_file(const std::string& what, std::size_t size_hint,
                                     const std::function<Status(fitsfile*)>& body)
{
    // CFITSIO takes the size of the buffer it is given as the size of a FITS file already in
    // it, reads that memory and appends new HDUs after any header it finds there. A buffer
    // from malloc may hold the previous in-memory file's bytes (the allocator hands back the
    // block just freed), which made every FIBERMAP after the first carry the previous one as
    // its second HDU. So the file starts empty, and CFITSIO allocates as it writes: its
    // `deltasize` is the least it grows by, so a hint of the final size makes that one
    // allocation instead of a realloc (an mremap, for large blocks) every 46 KB.
    const std::size_t block = 2880;
    const std::size_t delta =
        std::max<std::size_t>((size_hint + block - 1) / block * block, block * 16);
    void* buffer = nullptr;
    size_t size = 0;
    fitsfile* mem = nullptr;
    int status = 0;
    int nhdus = 0;
    int type = 0;
    long long headstart = 0;
    long long datastart = 0;
    long long dataend = 0;
    // Both `buffer` and `size` are updated by cfitsio through their addresses as it grows.
    fits_create_memfile(&mem, &buffer, &size, delta, grow_buffer, &status);
    Status result =
        status ? io_error(what, "cannot write a FITS file in memory", status) : Status::ok();
    if (result.is_ok()) result = body(mem);
    if (result.is_ok()) {
        fits_get_num_hdus(mem, &nhdus, &status);
        fits_movabs_hdu(mem, nhdus, &type, &status);
        fits_get_hduaddrll(mem, &headstart, &datastart, &dataend, &status);
    }
    int close_status = 0;
    if (mem) fits_close_file(mem, &close_status);
    if (status == 0) status = close_status;
    if (status == 0 && size_t(dataend) > size) status = MEMORY_ALLOCATION;
    MemoryFile file;
    file.data.reset(static_cast<std::uint8_t*>(buffer));
    file.size = size_t(dataend);
    if (result.is_ok() && status)
        result = io_error(what, "cannot write a FITS file in memory", status);
    if (!result.is_ok()) return result;
    return file;
}

Result<std::vector<std::uint8_t>> write_memory_file(const std::string& what,
                                                    const std::function<int(fitsfile*)>& body)
{
    EX2D_ASSIGN_OR_RETURN(MemoryFile file, build_memory_file(what, 0, [&](fitsfile* mem) {
                              const int status = body(mem);
                              return status ? io_error(what, "cannot write a FITS file in memory",
                                                       status)
                                            : Status::ok();
                          }));
    return std::vector<std::uint8_t>(file.data.get(), file.data.get() + file.size);
}

Status copy_hdu_to_blob(fitsfile* src, const std::string& path, FitsTableBlob& blob)
{
    long long nrows = 0;
    auto bytes = write_memory_file(path, [&](fitsfile* mem) {
        int status = 0;
        fits_create_img(mem, BYTE_IMG, 0, nullptr, &status);
        fits_copy_hdu(src, mem, 0, &status);
        fits_get_num_rowsll(mem, &nrows, &status);
        return status;
    });
    if (!bytes.is_ok()) {
        return Status(bytes.status().code(),
                      bytes.status().message() + " (copying a table HDU into memory)");
    }
    blob.fits_bytes = std::move(bytes).value();
    blob.nrows = long(nrows);
    return Status::ok();
}

Status BlobReader::open(const FitsTableBlob& blob, const std::string& what)
{
    if (blob.empty()) return Status::format(what + ": empty table");
    // Opened READONLY without a realloc function, so cfitsio never writes to the buffer.
    buffer_ = const_cast<std::uint8_t*>(blob.fits_bytes.data());
    size_ = blob.fits_bytes.size();
    fitsfile* raw = nullptr;
    int status = 0;
    int type = 0;
    if (fits_open_memfile(&raw, "table.fits", READONLY, &buffer_, &size_, 0, nullptr, &status)) {
        if (raw) FitsCloser{}(raw);
        return io_error(what, "cannot open the in-memory table", status);
    }
    file_.reset(raw);
    if (fits_movabs_hdu(raw, 2, &type, &status)) {
        return io_error(what, "in-memory table has no table HDU", status);
    }
    if (type != BINARY_TBL && type != ASCII_TBL) {
        return Status::format(what + ": in-memory table holds an image, not a table");
    }
    return Status::ok();
}

std::string temporary_name(const std::string& path)
{
    static std::atomic<unsigned> counter{0};
    std::filesystem::path p(path);
    std::string name = p.filename().string();
    size_t dot = name.find(".fits");
    std::string base = dot == std::string::npos ? name : name.substr(0, dot);
    std::string suffix = dot == std::string::npos ? std::string() : name.substr(dot);
    for (;;) {
        std::string tmp_name =
            base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix;
        std::filesystem::path tmp = p.parent_path() / tmp_name;
        std::error_code ec;
        if (!std::filesystem::exists(tmp, ec)) return tmp.string();
    }
}

namespace {

bool is_gzip_name(const std::string& path)
{
    return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

/// The FITS file built in memory, gzip-compressed for a ".gz" name, written to `tmp`.
Status write_from_memory(const std::string& path, const std::string& tmp, std::size_t size_hint,
                         const std::function<Status(fitsfile*)>& body,
                         const WrittenBytesObserver& observer)
{
    EX2D_ASSIGN_OR_RETURN(MemoryFile file, build_memory_file(path, size_hint, body));
    const std::uint8_t* bytes = file.data.get();
    std::size_t size = file.size;
    ByteBuffer gz;
    if (is_gzip_name(path)) {
        EX2D_ASSIGN_OR_RETURN(gz, gzip_encode(path, file.data.get(), file.size));
        file.data.reset();
        bytes = gz.data.get();
        size = gz.size;
    }
    EX2D_RETURN_NOT_OK(write_new_file(path, tmp, bytes, size));
    if (observer) observer(bytes, size);
    return Status::ok();
}

/// The file written by CFITSIO itself, to disk or (for a ".gz" name) through its zlib path.
Status write_through_cfitsio(const std::string& path, const std::string& tmp,
                             const std::function<Status(fitsfile*)>& body)
{
    fitsfile* raw = nullptr;
    int status = 0;
    // Only the full file-name parser knows that a ".gz" name asks for gzip output; plain
    // names skip it so that characters such as '[' or '!' in a path mean nothing special.
    if (is_gzip_name(tmp) ? fits_create_file(&raw, tmp.c_str(), &status)
                          : fits_create_diskfile(&raw, tmp.c_str(), &status)) {
        if (raw) FitsCloser{}(raw);
        return io_error(path, "cannot create the file", status);
    }
    FitsPtr file(raw);
    Status result = body(file.get());
    if (result.is_ok()) result = close(path, file);
    return result;
}

/// Writes under a registered temporary name with `write`, then renames; removes the temporary
/// on any failure.
Status write_then_rename(const std::string& path,
                         const std::function<Status(const std::string& tmp)>& write)
{
    const std::string tmp = temporary_name(path);
    register_temporary(tmp);
    Status result = write(tmp);
    std::error_code ec;
    if (result.is_ok()) {
        std::filesystem::rename(tmp, path, ec);
        if (ec) result = Status::io(path + ": cannot rename the temporary file: " + ec.message());
    }
    if (!result.is_ok()) std::filesystem::remove(tmp, ec);
    unregister_temporary(tmp);
    return result;
}

}  // namespace

Status write_atomically(const std::string& path, const std::function<Status(fitsfile*)>& body)
{
    return write_then_rename(
        path, [&](const std::string& tmp) { return write_through_cfitsio(path, tmp, body); });
}

Status write_bytes_atomically(const std::string& path, const std::string& bytes)
{
    return write_then_rename(path, [&](const std::string& tmp) {
        return write_new_file(path, tmp, reinterpret_cast<const std::uint8_t*>(bytes.data()),
                              bytes.size());
    });
}

Status write_atomically_from_memory(const std::string& path,
                                    const std::function<Status(fitsfile*)>& body,
                                    std::size_t size_hint, const WrittenBytesObserver& observer)
{
    return write_then_rename(path, [&](const std::string& tmp) {
        // Without an encoder of its own, a ".gz" file is left to CFITSIO's zlib path.
        return is_gzip_name(path) && !have_gzip_encoder()
                   ? write_through_cfitsio(path, tmp, body)
                   : write_from_memory(path, tmp, size_hint, body, observer);
    });
}

}  // namespace ex2d::fits

namespace ex2d {

void remove_temporary_files() noexcept
{
    // Left locked on purpose: the caller is about to _exit, and a writer that tries to start
    // another temporary in the meantime blocks here instead of leaving one behind.
    fits::g_temporaries_mutex.lock();
    for (const std::string& path : fits::g_temporaries) ::unlink(path.c_str());
    fits::g_temporaries.clear();
}

}  // namespace ex2d
