// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Owned device and pinned host arrays. A buffer is reallocated only when a frame needs more
// than it holds; the chunk solver frees and re-sizes its buffers when a new plan changes their
// shapes, and model buffers live for one call, so a worker's device memory is fixed after its
// first frame of a given shape (no growth over a night). Every byte held is counted in a MemoryLedger for
// the reports that operators use to place several workers on one GPU.

#include <cstddef>
#include <string>
#include <utility>

namespace ex2d::cuda {

struct MemoryLedger {
    std::size_t held = 0;
    std::size_t peak = 0;
    std::size_t buffers = 0;  ///< allocations held (each may round up to the driver's page)
    void add(std::size_t bytes);
    void remove(std::size_t bytes)
    {
        held -= bytes;
        --buffers;
    }
};

/// cudaMalloc with a message naming the buffer, its size and the ledger on failure.
void* allocate_device(std::size_t bytes, const char* what, const MemoryLedger& ledger);
/// cudaFree; failures are logged (destructors must not throw).
void free_device(void* ptr);
void* allocate_pinned(std::size_t bytes, const char* what);
void free_pinned(void* ptr);

template <class T>
class DeviceArray {
public:
    explicit DeviceArray(const char* what) : what_(what) {}
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    ~DeviceArray() { release(); }

    /// Makes room for `count` elements; contents are not kept when it grows.
    void reserve(std::size_t count, MemoryLedger& ledger)
    {
        if (count <= capacity_) return;
        release();
        data_ = static_cast<T*>(allocate_device(count * sizeof(T), what_, ledger));
        capacity_ = count;
        ledger_ = &ledger;
        ledger.add(count * sizeof(T));
    }
    void release()
    {
        if (!data_) return;
        free_device(data_);
        ledger_->remove(capacity_ * sizeof(T));
        data_ = nullptr;
        capacity_ = 0;
    }
    T* data() const { return data_; }
    std::size_t capacity() const { return capacity_; }

private:
    const char* what_;
    T* data_ = nullptr;
    std::size_t capacity_ = 0;
    MemoryLedger* ledger_ = nullptr;
};

/// Page-locked host memory, so transfers run at full bus speed and asynchronously.
template <class T>
class PinnedArray {
public:
    explicit PinnedArray(const char* what) : what_(what) {}
    PinnedArray(const PinnedArray&) = delete;
    PinnedArray& operator=(const PinnedArray&) = delete;
    ~PinnedArray() { free_pinned(data_); }

    /// Makes room for `count` elements; contents are not kept when it grows. The new block is
    /// allocated before the old one is freed, so that an allocation that throws leaves the
    /// array as it was (its pointer, capacity and contents).
    void reserve(std::size_t count)
    {
        if (count <= capacity_) return;
        T* const grown = static_cast<T*>(allocate_pinned(count * sizeof(T), what_));
        free_pinned(data_);
        data_ = grown;
        capacity_ = count;
    }
    T* data() const { return data_; }
    T& operator[](std::size_t i) const { return data_[i]; }
    std::size_t capacity() const { return capacity_; }

private:
    const char* what_;
    T* data_ = nullptr;
    std::size_t capacity_ = 0;
};

}  // namespace ex2d::cuda
