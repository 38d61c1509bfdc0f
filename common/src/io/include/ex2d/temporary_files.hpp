// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file temporary_files.hpp
/// The files being written under a temporary name (see frame_io.hpp: every output is written
/// under a temporary name and renamed). A program that is interrupted removes them so that
/// no partial file outlives it.

namespace ex2d {

/// Removes every temporary file that a writer in this process has created and not yet
/// renamed or removed. Blocks further writers from registering new ones, so call it only on
/// the way out (it is meant for a signal-watching thread right before _exit).
void remove_temporary_files() noexcept;

}  // namespace ex2d
