// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Kernel launches of the CUDA emulation: EX2D_LAUNCH(kernel, grid, block, shared, stream)(args)
// (kernel_launch.hpp) becomes launch_kernel(kernel, grid, block, shared, stream)(args), which
// converts the arguments to the kernel's parameters as a launch does, checks the
// configuration as the runtime does (a bad one is reported by cudaGetLastError) and runs
// every block before it returns.

#include <cstddef>
#include <tuple>
#include <utility>

#include "cuda_runtime_api.h"

namespace ex2d::emulation {

/// The body of one CUDA thread: the kernel applied to the launch's parameters.
using ThreadBody = void (*)(const void* launch);

/// Checks the configuration and runs `body(launch)` for every thread of every block
/// (runtime.cpp, block_scheduler.cpp); failures go to the runtime's last error.
void run_kernel(const void* kernel, dim3 grid, dim3 block, std::size_t dynamic_shared_bytes,
                cudaStream_t stream, ThreadBody body, const void* launch);

template <class... Params>
class KernelLaunch {
public:
    KernelLaunch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared,
                 cudaStream_t stream)
        : kernel_(kernel), grid_(grid), block_(block), shared_(shared), stream_(stream)
    {
    }

    template <class... Args>
    void operator()(Args&&... args) const
    {
        const Bound bound{kernel_, std::tuple<Params...>(std::forward<Args>(args)...)};
        run_kernel(reinterpret_cast<const void*>(kernel_), grid_, block_, shared_, stream_,
                   &run_thread, &bound);
    }

private:
    struct Bound {
        void (*kernel)(Params...);
        std::tuple<Params...> params;
    };
    // Each CUDA thread gets its own copy of the parameters, as by-value kernel parameters.
    static void run_thread(const void* launch)
    {
        const Bound& bound = *static_cast<const Bound*>(launch);
        std::apply(bound.kernel, bound.params);
    }

    void (*kernel_)(Params...);
    dim3 grid_, block_;
    std::size_t shared_;
    cudaStream_t stream_;
};

template <class... Params>
KernelLaunch<Params...> launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block,
                                      std::size_t shared, cudaStream_t stream)
{
    return KernelLaunch<Params...>(kernel, grid, block, shared, stream);
}

}  // namespace ex2d::emulation
