// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The preproc reader's HDU walk, shared by the file reader and the float32 reader that
// works on a mapped file.

#include <fitsio.h>

#include <string>

#include "ex2d/preproc.hpp"

namespace ex2d::detail {

/// Header, plane shapes and FIBERMAP of the open preproc file f (and, with_pixels, IMAGE,
/// IVAR, MASK and READNOISE as read_preproc reads them, non-finite pixels not yet masked).
Result<PreprocImage> read_preproc_hdus(fitsfile* f, const std::string& path, ColumnRange columns,
                                       bool with_pixels, bool with_readnoise);

}  // namespace ex2d::detail
