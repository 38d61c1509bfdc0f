// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/extraction_backend.hpp"

#if EX2D_TEST_HOOKS
#include "standin/standin_backend.hpp"
#endif

namespace ex2d {

Result<std::unique_ptr<ExtractionBackend>> make_backend(const std::string& name, int nthreads,
                                                        const CudaBackendOptions& cuda,
                                                        const StandinBackendOptions& standin)
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
    if (name == "standin") {
#if EX2D_TEST_HOOKS
        return make_standin_backend(standin);
#else
        (void)standin;
        return Status(StatusCode::not_compiled,
                      "backend 'standin' returns a precomputed frame and exists only in test and "
                      "benchmark builds (cmake -DEX2D_TEST_HOOKS=ON); this build has no test "
                      "hooks: use cpu, cuda or auto");
#endif
    }
    return Status::invalid("unknown backend '" + name + "' (expected cpu, cuda or auto)");
}

}  // namespace ex2d
