// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The stand-in backend of test and benchmark builds (EX2D_TEST_HOOKS), for the factory.

#include <memory>

#include "ex2d/extraction_backend.hpp"

namespace ex2d {

/// Reads options.frame_path once; an unreadable or incomplete frame file is its status.
Result<std::unique_ptr<ExtractionBackend>> make_standin_backend(
    const StandinBackendOptions& options);

}  // namespace ex2d
