// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Small FITS fixtures built in memory with CFITSIO.

#include <cstdint>
#include <cstdlib>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/fits_table.hpp"

namespace ex2d::test {

/// Closes the in-memory FITS file `f` (created with fits_create_memfile on `buffer`, a table
/// of `nrows` rows its last HDU) and returns its bytes up to the end of that table; frees the
/// buffer. `status` is CFITSIO's status so far, which must end at 0.
inline FitsTableBlob close_table_blob(fitsfile* f, void*& buffer, int status, int nrows)
{
    long long headstart = 0, datastart = 0, dataend = 0;
    fits_flush_file(f, &status);
    fits_get_hduaddrll(f, &headstart, &datastart, &dataend, &status);
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0);
    FitsTableBlob blob;
    auto* bytes = static_cast<std::uint8_t*>(buffer);
    blob.fits_bytes.assign(bytes, bytes + dataend);
    blob.nrows = nrows;
    std::free(buffer);
    buffer = nullptr;
    return blob;
}

/// A FIBERMAP table with `nrows` rows: TARGETID = first_targetid + row, FIBER = first_fiber +
/// row, OBJTYPE 'TGT' when `with_objtype`, and a TILEID header key.
inline FitsTableBlob make_fibermap_blob(int nrows, int first_fiber, long long first_targetid,
                                        int tileid, bool with_objtype)
{
    // An empty buffer: CFITSIO would take the bytes of a non-empty one for an existing file.
    size_t size = 0;
    void* buffer = nullptr;
    fitsfile* f = nullptr;
    int status = 0;
    char* ttype[] = {const_cast<char*>("TARGETID"), const_cast<char*>("FIBER"),
                     const_cast<char*>("OBJTYPE")};
    char* tform[] = {const_cast<char*>("K"), const_cast<char*>("J"), const_cast<char*>("3A")};
    const int ncols = with_objtype ? 3 : 2;
    fits_create_memfile(&f, &buffer, &size, 2880, std::realloc, &status);
    fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
    fits_create_tbl(f, BINARY_TBL, nrows, ncols, ttype, tform, nullptr, "FIBERMAP", &status);
    fits_write_key(f, TINT, "TILEID", &tileid, "tile id", &status);
    for (int i = 0; i < nrows; ++i) {
        long long targetid = first_targetid + i;
        int fiber = first_fiber + i;
        fits_write_col(f, TLONGLONG, 1, i + 1, 1, 1, &targetid, &status);
        fits_write_col(f, TINT, 2, i + 1, 1, 1, &fiber, &status);
        if (with_objtype) {
            char objtype[4] = "TGT";
            char* objtype_ptr = objtype;
            fits_write_col(f, TSTRING, 3, i + 1, 1, 1, &objtype_ptr, &status);
        }
    }
    return close_table_blob(f, buffer, status, nrows);
}

}  // namespace ex2d::test
