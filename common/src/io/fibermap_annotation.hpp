// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fibermap_annotation.hpp
/// Annotates the FIBERMAP binary table of the current HDU as desispec's write_frame does
/// (datamodel 4.8); internal to the frame writer and make_fibermap_table.

#include <string>

#include <fitsio.h>

#include "ex2d/fibermap_columns.hpp"
#include "ex2d/status.hpp"

namespace ex2d::fits {

/// For every column of the current binary-table HDU that `table` knows: sets TUNITn to the
/// known unit (inserted right after TFORMn with the comment "NAME units" when absent, replaced
/// with a warning when different) and the TTYPEn comment to the known description. Columns
/// the table does not know are left alone and named in one warning, as are types that differ
/// from the table's. Errors name `path`.
Status annotate_fibermap(fitsfile* f, const std::string& path, const FibermapColumns& table);

}  // namespace ex2d::fits
