// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Reading a band of columns of an image HDU straight from the file. Through CFITSIO each
// row's few hundred bytes cost a seek and a buffered read of a whole FITS record (two system
// calls per row and plane); one pread per row of exactly the bytes needed takes half the
// time, which is most of what a one-bundle extraction spends reading.

#include <fitsio.h>

#include <string>

#include "ex2d/status.hpp"

namespace ex2d::fits {

/// Columns [col_begin, col_end) of every row of the current HDU of f (an ny x nx image),
/// as double into out ([ny][col_end - col_begin]), read with pread from `path` where the HDU
/// is an uncompressed float32 or float64 image without scaling in a plain file. Returns
/// false, having read nothing, where that does not hold: the caller then reads through
/// CFITSIO. A failing read is an error naming the file and the HDU.
Result<bool> read_float_columns_direct(fitsfile* f, const std::string& path,
                                       const std::string& hdu_name, int ny, int nx, int col_begin,
                                       int col_end, double* out);

}  // namespace ex2d::fits
