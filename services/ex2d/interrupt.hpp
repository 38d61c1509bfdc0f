// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file interrupt.hpp
/// SIGINT and SIGTERM during a long command: remove the temporary files of the FITS writers,
/// log one line and exit with 128 + signal, so that an interrupted batch job leaves either a
/// complete output or none.

namespace ex2d::tool {

/// Installs handlers for SIGINT and SIGTERM and starts the thread that acts on them. The
/// handler only writes the signal number to a pipe (async-signal-safe); the thread does the
/// cleanup and the logging, which a signal handler may not. Idempotent.
void install_interrupt_cleanup();

}  // namespace ex2d::tool
