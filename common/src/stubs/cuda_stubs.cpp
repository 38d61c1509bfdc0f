// SPDX-License-Identifier: BSD-3-Clause
// Stands in for the CUDA backend in builds without nvcc: same symbols, each throwing
// NotCompiled, so services link and dispatch identically in both builds.
#include "ex2d/extraction_backend.hpp"

namespace ex2d {

std::unique_ptr<ExtractionBackend> make_cuda_backend(int /*device*/)
{
    throw NotCompiled("the CUDA backend is not part of this build (configure with nvcc found "
                      "and EX2D_BUILD_CUDA=ON)");
}

}  // namespace ex2d
