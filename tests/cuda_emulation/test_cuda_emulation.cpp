// SPDX-License-Identifier: BSD-3-Clause
// The CUDA emulation itself, so that what the gpu tests prove in it is what a device would:
// the barrier orders a block's shared memory, a barrier the block's threads disagree on fails
// the launch, launch configurations and copies are checked as the runtime checks them, device
// memory is accounted in the driver's pages and is not zero when fresh, and the backend's
// error paths (out of memory, too much shared memory) give their messages.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// What nvcc gives every .cu file, before the backend's device code.
#include "ex2d_emulation/device_builtins.hpp"
// clang-format off
#include "cuda_check.hpp"
#include "device_helpers.cuh"
#include "device_memory.hpp"
#include "kernel_launch.hpp"
// clang-format on

namespace ex2d::cuda {
namespace {

// Each thread reads its right neighbour's value after the barrier, in static and dynamic
// shared memory: without a real barrier the neighbour's slot would still hold the last
// block's value.
__global__ void rotate_kernel(const int* in, int* out)
{
    __shared__ int values[256];
    extern __shared__ int dynamic_values[];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    values[threadIdx.x] = in[i];
    dynamic_values[threadIdx.x] = 2 * in[i];
    __syncthreads();
    const unsigned next = (threadIdx.x + 1) % blockDim.x;
    out[i] = values[next] + dynamic_values[next];
}

__global__ void early_exit_kernel(int* out, int first_leaving, int end_leaving)
{
    if (int(threadIdx.x) >= first_leaving && int(threadIdx.x) < end_leaving) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void flag_kernel(int* flags)
{
    atomicOr(flags + blockIdx.x % 2, 1 << (threadIdx.x % 8));
}

EX2D_EMULATED_DYNAMIC_SHARED(int, dynamic_values);

template <class T>
struct Device {
    MemoryLedger ledger;
    DeviceArray<T> array{"emulation test"};
    explicit Device(std::size_t n) { array.reserve(n, ledger); }
};

TEST(CudaEmulation, BarrierOrdersSharedMemoryWithinEachBlock)
{
    const int nblock = 5, nthread = 256;
    std::vector<int> in(nblock * nthread);
    for (std::size_t k = 0; k < in.size(); ++k) in[k] = int(k * 7 + 3);
    Device<int> din(in.size()), dout(in.size());
    EX2D_CUDA_CHECK(cudaMemcpyAsync(din.array.data(), in.data(), in.size() * sizeof(int),
                                    cudaMemcpyHostToDevice, nullptr));
    EX2D_LAUNCH(rotate_kernel, nblock, nthread, nthread * sizeof(int), nullptr)
    (din.array.data(), dout.array.data());
    EX2D_CUDA_CHECK_LAUNCH();
    std::vector<int> out(in.size());
    EX2D_CUDA_CHECK(cudaMemcpyAsync(out.data(), dout.array.data(), out.size() * sizeof(int),
                                    cudaMemcpyDeviceToHost, nullptr));
    for (int b = 0; b < nblock; ++b) {
        for (int t = 0; t < nthread; ++t) {
            const int next = in[b * nthread + (t + 1) % nthread];
            ASSERT_EQ(out[b * nthread + t], 3 * next) << "block " << b << " thread " << t;
        }
    }
}

TEST(CudaEmulation, ABarrierThatSomeThreadsLeaveBeforeFailsTheLaunch)
{
    Device<int> out(64);
    // Thread 0 waits while others have left; thread 0 leaves while others wait.
    const int leaving[2][2] = {{7, 64}, {0, 1}};
    for (const auto& range : leaving) {
        EX2D_LAUNCH(early_exit_kernel, 3, 64, 0, nullptr)(out.array.data(), range[0], range[1]);
        EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure) << range[0] << "-" << range[1];
    }
    EX2D_LAUNCH(early_exit_kernel, 3, 64, 0, nullptr)(out.array.data(), 64, 64);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaEmulation, AtomicsFromEveryBlockAndThreadAllLand)
{
    Device<int> flags(2);
    EX2D_CUDA_CHECK(cudaMemsetAsync(flags.array.data(), 0, 2 * sizeof(int), nullptr));
    EX2D_LAUNCH(flag_kernel, 40, 96, 0, nullptr)(flags.array.data());
    EX2D_CUDA_CHECK_LAUNCH();
    int host[2] = {0, 0};
    EX2D_CUDA_CHECK(
        cudaMemcpyAsync(host, flags.array.data(), sizeof(host), cudaMemcpyDeviceToHost, nullptr));
    EXPECT_EQ(host[0], 0xff);
    EXPECT_EQ(host[1], 0xff);
}

TEST(CudaEmulation, LaunchConfigurationsAreCheckedAsTheRuntimeChecksThem)
{
    Device<int> in(2048), out(2048);
    EX2D_LAUNCH(rotate_kernel, 1, 2048, 0, nullptr)(in.array.data(), out.array.data());
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EX2D_LAUNCH(rotate_kernel, 0, 32, 0, nullptr)(in.array.data(), out.array.data());
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once, then cleared";
    // More than 48 KiB of dynamic shared memory needs the kernel's opt-in, up to the limit.
    const std::size_t large = 64 * 1024;
    EX2D_LAUNCH(rotate_kernel, 1, 32, large, nullptr)(in.array.data(), out.array.data());
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    allow_dynamic_shared(rotate_kernel, large, "rotate");
    EX2D_LAUNCH(rotate_kernel, 1, 32, large, nullptr)(in.array.data(), out.array.data());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    try {
        allow_dynamic_shared(rotate_kernel, 300 * 1024, "rotate");
        FAIL() << "300 KiB of shared memory was allowed";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rotate kernel needs 307200 bytes of shared memory"),
                  std::string::npos)
            << e.what();
    }
}

TEST(CudaEmulation, FreeMemoryDropsByWholeDriverPagesAndFreshMemoryIsNotZero)
{
    std::size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
    EX2D_CUDA_CHECK(cudaMemGetInfo(&free0, &total));
    EXPECT_GT(total, free0);
    void* ptr = nullptr;
    EX2D_CUDA_CHECK(cudaMalloc(&ptr, 3 << 20));
    EX2D_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    EXPECT_EQ(free0 - free1, std::size_t(4) << 20);
    double first = 0;
    EX2D_CUDA_CHECK(cudaMemcpyAsync(&first, ptr, sizeof(first), cudaMemcpyDeviceToHost, nullptr));
    EXPECT_TRUE(std::isnan(first)) << "fresh device memory reads as " << first;
    EX2D_CUDA_CHECK(cudaFree(ptr));
    EX2D_CUDA_CHECK(cudaMemGetInfo(&free2, &total));
    EXPECT_EQ(free2, free0);
}

TEST(CudaEmulation, OutOfDeviceMemoryNamesTheBufferAndTheDevice)
{
    MemoryLedger ledger;
    ledger.add(std::size_t(5) << 20);
    try {
        allocate_device(std::size_t(200) << 30, "huge test buffer", ledger);
        FAIL() << "200 GiB were allocated";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("out of device memory allocating huge test buffer (204800 MiB); "
                               "this worker holds 5 MiB"),
                  std::string::npos)
            << message;
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the allocation's error was cleared";
}

TEST(CudaEmulation, CopiesAndFreesAreCheckedAgainstDeviceMemory)
{
    std::vector<double> host(8, 1.0), other(8, 0.0);
    Device<double> device(8);
    EXPECT_EQ(cudaMemcpyAsync(other.data(), host.data(), 64, cudaMemcpyHostToDevice, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(
        cudaMemcpyAsync(device.array.data(), host.data(), 72, cudaMemcpyHostToDevice, nullptr),
        cudaErrorInvalidValue)
        << "past the end of the allocation";
    EXPECT_EQ(cudaMemsetAsync(host.data(), 0, 64, nullptr), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFreeHost(host.data()), cudaErrorInvalidValue);
    cudaGetLastError();
    try {
        EX2D_CUDA_CHECK(cudaFree(host.data()));
        FAIL() << "a host pointer was freed as device memory";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cudaFree(host.data()) failed: invalid argument"),
                  std::string::npos)
            << e.what();
    }
    cudaGetLastError();
}

TEST(CudaEmulation, StreamsAndEventsTimeTheWorkBetweenThem)
{
    cudaStream_t stream = nullptr;
    EX2D_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t start = nullptr, end = nullptr;
    EX2D_CUDA_CHECK(cudaEventCreate(&start));
    EX2D_CUDA_CHECK(cudaEventCreate(&end));
    float ms = -1;
    EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle)
        << "neither event was recorded";
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle) << "and the runtime keeps it";
    EX2D_CUDA_CHECK(cudaEventRecord(start, stream));
    Device<int> in(1 << 16), out(1 << 16);
    EX2D_LAUNCH(rotate_kernel, 256, 256, 1024, stream)(in.array.data(), out.array.data());
    EX2D_CUDA_CHECK_LAUNCH();
    EX2D_CUDA_CHECK(cudaEventRecord(end, stream));
    EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));
    EX2D_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
    EXPECT_GT(ms, 0.0f);
    EX2D_CUDA_CHECK(cudaEventDestroy(start));
    EX2D_CUDA_CHECK(cudaEventDestroy(end));
    EX2D_CUDA_CHECK(cudaStreamDestroy(stream));
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorInvalidResourceHandle);
    cudaGetLastError();
}

}  // namespace
}  // namespace ex2d::cuda
