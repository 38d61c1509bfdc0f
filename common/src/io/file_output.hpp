// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file file_output.hpp
/// Private helpers of fits::write_atomically for files built in memory: a single-member gzip
/// stream made in one pass (ISA-L igzip, where the build found it) and a new file written in
/// one go.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ex2d/status.hpp"

namespace ex2d::fits {

/// Bytes that belong to no std::vector, so that a large output buffer is never zero-filled:
/// only the pages written are ever touched.
struct ByteBuffer {
    std::unique_ptr<std::uint8_t[]> data;
    std::size_t size = 0;
};

/// True when this build has its own gzip encoder; without one, `.gz` files are compressed by
/// CFITSIO (zlib) as they always were.
bool have_gzip_encoder();

/// `in` as one gzip member (RFC 1952), compressed in a single call. Errors name `path`.
Result<ByteBuffer> gzip_encode(const std::string& path, const std::uint8_t* in, std::size_t size);

/// Creates `tmp` (which must not exist) and writes `size` bytes to it; a failure removes what
/// was created and names `path`, the file the caller is writing.
Status write_new_file(const std::string& path, const std::string& tmp, const std::uint8_t* data,
                      std::size_t size);

}  // namespace ex2d::fits
