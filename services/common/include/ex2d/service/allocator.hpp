// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file allocator.hpp
/// Which malloc the fleet's processes run on. ZeroMQ allocates every received message itself
/// (137 MB for a FRAME, 70 MB for a RESULT); glibc serves allocations that large with a fresh
/// mmap and returns them with munmap, so every transfer paid for the kernel zeroing new pages
/// (two thirds of its CPU time). The services link jemalloc where it is found and keep its
/// large extents in one arena whose freed pages are reused for the next message
/// (docs/benchmarks-log.md, "After linking jemalloc").

#include <string>

namespace ex2d::service {

/// One line for the start-up log: "jemalloc 5.3.0 (oversize_threshold=0 dirty_decay_ms=10000)"
/// or "glibc malloc (jemalloc not linked: received messages use fresh pages)".
std::string allocator_description();

}  // namespace ex2d::service
