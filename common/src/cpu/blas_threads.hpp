// SPDX-License-Identifier: BSD-3-Clause
#pragma once

namespace ex2d {

/// Sets the linked BLAS to one thread where it has a call for it; returns which it found
/// ("OpenBLAS", "MKL", "BLIS" or "a BLAS without thread control").
const char* use_single_threaded_blas();

}  // namespace ex2d
