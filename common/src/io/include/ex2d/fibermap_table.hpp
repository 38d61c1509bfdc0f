// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fibermap_table.hpp
/// A FIBERMAP table built in memory from its columns' values, in the layout of a preproc
/// file's FIBERMAP HDU, so that code outside the FITS layer (the simulator) makes one without
/// CFITSIO.

#include <string>
#include <variant>
#include <vector>

#include "ex2d/fibermap_columns.hpp"
#include "ex2d/fits_header.hpp"
#include "ex2d/fits_table.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// One column and a value for every row: integers or floating numbers (converted by CFITSIO
/// to the column's TFORM) or text (a TFORM such as "22A").
struct FibermapColumnValues {
    FibermapColumn column;
    std::variant<std::vector<long long>, std::vector<double>, std::vector<std::string>> values;
};

/// A FIBERMAP HDU of `nrows` rows with `columns` in their order, the non-structural cards of
/// `header` in its header, and every column annotated as desispec's write_frame does
/// (builtin_fibermap_columns()). A column without `nrows` values is invalid_argument; CFITSIO
/// errors name `what`.
Result<FitsTableBlob> make_fibermap_table(const std::vector<FibermapColumnValues>& columns,
                                          long nrows, const FitsHeader& header,
                                          const std::string& what);

}  // namespace ex2d
