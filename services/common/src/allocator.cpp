// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/allocator.hpp"

#include <cstddef>
#include <string>

#ifdef EX2D_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>

// jemalloc reads this symbol at its first allocation. oversize_threshold=0: no separate arena
// for allocations over 8 MiB, whose pages jemalloc returns to the kernel at once; with it off,
// a freed 137 MB message keeps its pages (dirty, for dirty_decay_ms) for the next message.
// MALLOC_CONF in the environment still overrides it.
extern "C" {
const char* malloc_conf = "oversize_threshold:0";
}
#endif

namespace ex2d::service {

#ifdef EX2D_HAVE_JEMALLOC
namespace {

template <typename T>
bool read_mallctl(const char* name, T& value)
{
    std::size_t size = sizeof value;
    return mallctl(name, &value, &size, nullptr, 0) == 0;
}

}  // namespace

std::string allocator_description()
{
    const char* version = nullptr;
    std::size_t oversize = 0;
    ssize_t dirty_decay_ms = 0;
    if (!read_mallctl("version", version) || !read_mallctl("opt.oversize_threshold", oversize) ||
        !read_mallctl("opt.dirty_decay_ms", dirty_decay_ms))
        return "jemalloc (its settings could not be read)";
    std::string release(version);
    release = release.substr(0, release.find('-'));  // "5.3.0-0-g54eaed1..." -> "5.3.0"
    return "jemalloc " + release + " (oversize_threshold=" + std::to_string(oversize) +
           " dirty_decay_ms=" + std::to_string(dirty_decay_ms) + ")";
}
#else
std::string allocator_description()
{
    return "glibc malloc (jemalloc not linked: received messages use fresh pages)";
}
#endif

}  // namespace ex2d::service
