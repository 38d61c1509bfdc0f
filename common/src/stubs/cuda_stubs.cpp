// SPDX-License-Identifier: BSD-3-Clause
// Stands in for the CUDA backend in builds without nvcc: same symbols, so services link and
// dispatch identically in both builds; asking for the backend throws NotCompiled.
#include "ex2d/extraction_backend.hpp"

namespace ex2d {

std::unique_ptr<ExtractionBackend> make_cuda_backend(const CudaBackendOptions& /*options*/)
{
    throw NotCompiled(
        "the CUDA backend is not part of this build (configure where nvcc is "
        "found, with EX2D_BUILD_CUDA=ON)");
}

int cuda_device_count()
{
    return 0;
}

std::string cuda_unavailable_reason()
{
    return "the CUDA backend is not part of this build";
}

}  // namespace ex2d
