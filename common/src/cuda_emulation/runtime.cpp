// SPDX-License-Identifier: BSD-3-Clause
// The CUDA runtime of the emulation: one device whose memory is host memory, with the
// toolkit's answers to what the CUDA backend asks (a fixed total, free memory that drops with
// each allocation rounded to the driver's 2 MiB pages, the H100's limits), streams whose
// operations run when they are issued, events on the host clock, and checked kernel launches.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

#include "block_scheduler.hpp"
#include "cuda_runtime_api.h"
#include "ex2d_emulation/device_builtins.hpp"
#include "ex2d_emulation/launch.hpp"

struct CUstream_st {
    unsigned flags;
};
struct CUevent_st {
    bool recorded = false;
    std::chrono::steady_clock::time_point time;
};

namespace ex2d::emulation {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
constexpr std::size_t kTotalBytes = std::size_t(80) << 30;
// What the context, its module and the driver hold before the first allocation.
constexpr std::size_t kContextBytes = 512 * kMiB;
constexpr std::size_t kPageBytes = 2 * kMiB;
constexpr std::size_t kDefaultDynamicShared = 48 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;
// Fresh device memory is not zero on a device; here every byte is 0xff (doubles read NaN,
// ints -1), so that a kernel that reads what nothing wrote gives itself away.
constexpr int kFreshMemoryByte = 0xff;

struct Device {
    std::mutex mutex;
    std::map<const char*, std::size_t> allocations;  // device pointer -> bytes
    std::set<void*> pinned;
    std::set<CUstream_st*> streams;
    std::set<CUevent_st*> events;
    std::map<const void*, int> max_dynamic_shared;  // kernel -> bytes it opted in to
    std::size_t used = 0;                           // in whole pages
    std::mutex launch;                              // one kernel at a time
};

Device& device()
{
    static Device d;
    return d;
}

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t error)
{
    last_error = error;
    return error;
}

std::size_t pages(std::size_t bytes)
{
    return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
}

// Whether [ptr, ptr + bytes) lies inside one device allocation (caller holds the mutex).
bool in_device_memory(Device& d, const void* ptr, std::size_t bytes)
{
    const char* p = static_cast<const char*>(ptr);
    auto it = d.allocations.upper_bound(p);
    if (it == d.allocations.begin()) return false;
    --it;
    return p >= it->first && p + bytes <= it->first + it->second;
}

bool valid_stream(Device& d, cudaStream_t stream)
{
    return stream == nullptr || d.streams.count(stream) != 0;
}

}  // namespace

cudaError_t set_function_attribute(const void* function, cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
        std::size_t(value) > kMaxDynamicSharedBytes) {
        return fail(cudaErrorInvalidValue);
    }
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    d.max_dynamic_shared[function] = value;
    return cudaSuccess;
}

void run_kernel(const void* kernel, dim3 grid, dim3 block, std::size_t dynamic_shared_bytes,
                cudaStream_t stream, ThreadBody body, const void* launch)
{
    Device& d = device();
    std::size_t shared_limit = kDefaultDynamicShared;
    {
        std::lock_guard<std::mutex> lock(d.mutex);
        if (!valid_stream(d, stream)) {
            fail(cudaErrorInvalidResourceHandle);
            return;
        }
        auto opted = d.max_dynamic_shared.find(kernel);
        if (opted != d.max_dynamic_shared.end()) shared_limit = std::size_t(opted->second);
    }
    const long long nthread = (long long)block.x * block.y * block.z;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
        grid.z > 65535 || nthread == 0 || nthread > kMaxThreadsPerBlock || block.z > 64) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (dynamic_shared_bytes > shared_limit) {
        fail(cudaErrorInvalidValue);
        return;
    }
    std::lock_guard<std::mutex> one_at_a_time(d.launch);
    const cudaError_t status = run_grid(grid, block, dynamic_shared_bytes, body, launch);
    if (status != cudaSuccess) fail(status);
}

}  // namespace ex2d::emulation

using namespace ex2d::emulation;

cudaError_t cudaGetDeviceCount(int* count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice);
    *prop = cudaDeviceProp{};
    std::strncpy(prop->name, "ex2d CUDA emulation (host CPU)", sizeof(prop->name) - 1);
    prop->totalGlobalMem = kTotalBytes;
    prop->sharedMemPerBlock = kDefaultDynamicShared;
    prop->sharedMemPerBlockOptin = kMaxDynamicSharedBytes;
    prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = 132;
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device)
{
    if (device != 0) return fail(cudaErrorInvalidDevice);
    switch (attr) {
        case cudaDevAttrMaxThreadsPerBlock:
            *value = kMaxThreadsPerBlock;
            return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerBlock:
            *value = int(kDefaultDynamicShared);
            return cudaSuccess;
        case cudaDevAttrMultiProcessorCount:
            *value = 132;
            return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerBlockOptin:
            *value = int(kMaxDynamicSharedBytes);
            return cudaSuccess;
    }
    return fail(cudaErrorInvalidValue);
}

cudaError_t cudaGetLastError()
{
    const cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

cudaError_t cudaPeekAtLastError()
{
    return last_error;
}

const char* cudaGetErrorString(cudaError_t error)
{
    switch (error) {
        case cudaSuccess:
            return "no error";
        case cudaErrorInvalidValue:
            return "invalid argument";
        case cudaErrorMemoryAllocation:
            return "out of memory";
        case cudaErrorInvalidConfiguration:
            return "invalid configuration argument";
        case cudaErrorNoDevice:
            return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice:
            return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle:
            return "invalid resource handle";
        case cudaErrorNotReady:
            return "device not ready";
        case cudaErrorLaunchOutOfResources:
            return "too many resources requested for launch";
        case cudaErrorLaunchFailure:
            return "unspecified launch failure";
    }
    return "unrecognized error code";
}

const char* cudaGetErrorName(cudaError_t error)
{
    switch (error) {
        case cudaSuccess:
            return "cudaSuccess";
        case cudaErrorInvalidValue:
            return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation:
            return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration:
            return "cudaErrorInvalidConfiguration";
        case cudaErrorNoDevice:
            return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice:
            return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle:
            return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady:
            return "cudaErrorNotReady";
        case cudaErrorLaunchOutOfResources:
            return "cudaErrorLaunchOutOfResources";
        case cudaErrorLaunchFailure:
            return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes)
{
    *ptr = nullptr;
    if (bytes == 0) return cudaSuccess;
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.used + pages(bytes) > kTotalBytes - kContextBytes) return fail(cudaErrorMemoryAllocation);
    // 256-byte aligned, as cudaMalloc's pointers are.
    void* memory = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (memory == nullptr) return fail(cudaErrorMemoryAllocation);
    std::memset(memory, kFreshMemoryByte, bytes);
    d.allocations[static_cast<const char*>(memory)] = bytes;
    d.used += pages(bytes);
    *ptr = memory;
    return cudaSuccess;
}

cudaError_t cudaFree(void* ptr)
{
    if (ptr == nullptr) return cudaSuccess;
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    auto it = d.allocations.find(static_cast<const char*>(ptr));
    if (it == d.allocations.end()) return fail(cudaErrorInvalidValue);
    d.used -= pages(it->second);
    d.allocations.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, std::size_t bytes)
{
    *ptr = std::aligned_alloc(4096, (std::max<std::size_t>(bytes, 1) + 4095) / 4096 * 4096);
    if (*ptr == nullptr) return fail(cudaErrorMemoryAllocation);
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    d.pinned.insert(*ptr);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr)
{
    if (ptr == nullptr) return cudaSuccess;
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.pinned.erase(ptr) == 0) return fail(cudaErrorInvalidValue);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    *total_bytes = kTotalBytes;
    *free_bytes = kTotalBytes - kContextBytes - d.used;
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (bytes == 0) return cudaSuccess;
    Device& d = device();
    {
        std::lock_guard<std::mutex> lock(d.mutex);
        if (!valid_stream(d, stream)) return fail(cudaErrorInvalidResourceHandle);
        const bool dst_device = in_device_memory(d, dst, bytes);
        const bool src_device = in_device_memory(d, src, bytes);
        bool ok = false;
        switch (kind) {
            case cudaMemcpyHostToDevice:
                ok = dst_device && !src_device;
                break;
            case cudaMemcpyDeviceToHost:
                ok = src_device && !dst_device;
                break;
            case cudaMemcpyDeviceToDevice:
                ok = src_device && dst_device;
                break;
            case cudaMemcpyHostToHost:
            case cudaMemcpyDefault:
                ok = true;
                break;
        }
        if (!ok) return fail(cudaErrorInvalidValue);
    }
    std::memcpy(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream)
{
    if (bytes == 0) return cudaSuccess;
    Device& d = device();
    {
        std::lock_guard<std::mutex> lock(d.mutex);
        if (!valid_stream(d, stream)) return fail(cudaErrorInvalidResourceHandle);
        if (!in_device_memory(d, dst, bytes)) return fail(cudaErrorInvalidValue);
    }
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags)
{
    if (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)
        return fail(cudaErrorInvalidValue);
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    *stream = new CUstream_st{flags};
    d.streams.insert(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (stream == nullptr || d.streams.erase(stream) == 0)
        return fail(cudaErrorInvalidResourceHandle);
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    return valid_stream(d, stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaDeviceSynchronize()
{
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    *event = new CUevent_st;
    d.events.insert(*event);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (event == nullptr || d.events.erase(event) == 0) return fail(cudaErrorInvalidResourceHandle);
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.events.count(event) == 0 || !valid_stream(d, stream))
        return fail(cudaErrorInvalidResourceHandle);
    event->recorded = true;
    event->time = std::chrono::steady_clock::now();
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end)
{
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.events.count(start) == 0 || d.events.count(end) == 0)
        return fail(cudaErrorInvalidResourceHandle);
    if (!start->recorded || !end->recorded) return fail(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
    return cudaSuccess;
}
