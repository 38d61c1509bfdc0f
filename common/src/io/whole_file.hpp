// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// A whole input file in memory, read the way that costs the reader least CPU: a file already
// in the page cache is mapped (its pages are there to take), one that is not is read with
// O_DIRECT into a buffer the caller keeps from file to file, which moves it by DMA without
// filling the page cache (a cold mapping costs the kernel about 2 CPU-ms per MB in page
// allocation and mapping). In production a preproc file was written long before, often on
// another node, and is not cached (docs/benchmarks.md, "Cold input").

#include <cstddef>
#include <string>

#include "ex2d/preproc.hpp"
#include "ex2d/scratch_allocator.hpp"
#include "ex2d/status.hpp"

namespace ex2d::io {

class WholeFile {
public:
    WholeFile() = default;
    WholeFile(const WholeFile&) = delete;
    WholeFile& operator=(const WholeFile&) = delete;
    ~WholeFile();

    /// `direct_buffer` holds the bytes of an O_DIRECT read and is reused by the next file.
    Status open(const std::string& path, InputRead how, LargeArray<unsigned char>& direct_buffer);
    const unsigned char* bytes() const { return bytes_; }
    std::size_t size() const { return size_; }
    /// "mapped" or "direct": how this file was read.
    const char* how() const { return mapping_ != nullptr ? "mapped" : "direct"; }

private:
    Status map(int fd, const std::string& path);
    const unsigned char* bytes_ = nullptr;
    std::size_t size_ = 0;
    void* mapping_ = nullptr;
};

}  // namespace ex2d::io
