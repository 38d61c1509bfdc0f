// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fits_table.hpp
/// A FITS binary table carried in memory as the bytes of a small FITS file (an empty primary
/// HDU followed by the table HDU, header and all), so the FIBERMAP of a preproc frame reaches
/// the frame writer unchanged, whether it came from a file or over the wire.

#include <cstdint>
#include <string>
#include <vector>

#include "ex2d/fits_header.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

struct FitsTableBlob {
    std::vector<std::uint8_t> fits_bytes;  ///< complete in-memory FITS file; empty = no table
    long nrows = 0;
    bool empty() const { return fits_bytes.empty(); }
};

/// Reads one integer column (e.g. "FIBER") of the table; rows in file order.
Result<std::vector<long long>> read_int_column(const FitsTableBlob& table,
                                               const std::string& column);

/// ORs `bits[i]` into integer column `column` of row `first_row + i` (0-based), e.g. fibermask
/// bits into FIBERSTATUS; the table is rebuilt in memory, every other value and card kept. A
/// missing or non-integer column or too few rows is a format error and leaves `table` as it was.
Status or_int_column_bits(FitsTableBlob& table, const std::string& column, long first_row,
                          const std::vector<long long>& bits);

/// The table HDU's header (every card, e.g. the exposure keywords a FIBERMAP carries).
Result<FitsHeader> read_table_header(const FitsTableBlob& table);

}  // namespace ex2d
