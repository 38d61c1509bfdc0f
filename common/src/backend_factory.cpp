// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/extraction_backend.hpp"

namespace ex2d {

Result<std::unique_ptr<ExtractionBackend>> make_backend(const std::string& name, int nthreads,
                                                        const CudaBackendOptions& cuda)
{
    if (name == "cpu") return make_cpu_backend(nthreads);
    if (name == "auto") {
        return cuda_device_count() > 0 ? make_backend("cuda", nthreads, cuda)
                                       : make_backend("cpu", nthreads, cuda);
    }
    if (name == "cuda") {
        try {
            return make_cuda_backend(cuda);
        } catch (const NotCompiled& e) {
            return Status(StatusCode::not_compiled, e.what());
        } catch (const DeviceUnavailable& e) {
            return Status(StatusCode::device_unavailable, e.what());
        }
    }
    return Status::invalid("unknown backend '" + name + "' (expected cpu, cuda or auto)");
}

}  // namespace ex2d
