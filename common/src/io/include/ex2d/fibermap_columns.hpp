// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fibermap_columns.hpp
/// What desispec's write_frame does to a frame's FIBERMAP (datamodel 4.8): every column it
/// knows gets its unit (TUNITn, inserted right after TFORMn with the comment "NAME units") and
/// its description as the TTYPEn comment; columns it does not know are left alone. ex2d keeps
/// its own table of the DESI fibermap columns (names, FITS types and units from the DESI data
/// model, descriptions in ex2d's words); a site that wants desispec's exact descriptions passes
/// desispec's table exported as JSON (python -m ex2d_desi.fibermap_columns; docs/usage.md).

#include <string>
#include <vector>

#include "ex2d/status.hpp"

namespace ex2d {

/// One known FIBERMAP column.
struct FibermapColumn {
    std::string name;         ///< TTYPE, e.g. "TARGET_RA"
    std::string tform;        ///< FITS TFORM without a repeat of 1, e.g. "D" or "22A"; "" = any
    std::string unit;         ///< TUNIT, e.g. "deg"; "" = the column has no unit
    std::string description;  ///< the TTYPE comment
};

/// A table of known columns, in the order desispec assembles a main-survey fibermap.
struct FibermapColumns {
    std::string source;  ///< "built-in" or the JSON file it came from, for messages
    std::vector<FibermapColumn> columns;

    /// The entry named `name`, or nullptr when the column is not known.
    const FibermapColumn* find(const std::string& name) const;
};

/// ex2d's table: the main-survey fibermap columns and the survey-specific target bitmasks of
/// commissioning and SV1-SV3.
const FibermapColumns& builtin_fibermap_columns();

/// Reads a table written as JSON: a list of objects with "name", "unit", "description" and
/// optionally "tform". A missing file is an io error; malformed JSON, a missing or empty name,
/// a name given twice or a value that is not a string is a format error naming the file and
/// the entry.
Result<FibermapColumns> read_fibermap_columns_json(const std::string& path);

}  // namespace ex2d
