// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file frame_parts.hpp
/// A frame extracted in parts, each a run of whole bundles by another process (desi_proc's
/// MPI ranks), put back together as one extraction of all of them would have made it.

#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// The first bundle and the number of bundles of share `index` of `count` shares of
/// `nbundle` bundles: contiguous runs in order whose sizes differ by at most one.
struct BundleShare {
    int first = 0;
    int count = 0;
};
BundleShare bundle_share(int nbundle, int index, int count);

/// The parts, in any order, as one frame: spectra in order, contiguous from the first part's
/// specmin; the same grid, diagonals and psferr in every part; model images added (each part
/// models its own bundles' pixels); patch counts and stage times summed. An error names the
/// first part that does not fit (a gap, an overlap, another grid).
Result<ExtractedFrame> merge_frame_parts(std::vector<ExtractedFrame> parts);

}  // namespace ex2d
