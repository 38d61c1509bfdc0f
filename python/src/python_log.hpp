// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file python_log.hpp
/// ex2d's log lines into Python's `logging` (logger "ex2d"), from whichever thread writes
/// them, while the interpreter runs; back to stderr at its exit.

namespace ex2d::python {

/// Replaces the sinks of ex2d's logger with one that calls logging.getLogger("ex2d").log and
/// registers, with atexit, the switch back to stderr. Needs the GIL.
void route_log_to_python();

/// Sets ex2d's level to the effective level of Python's "ex2d" logger, so that lines Python
/// would drop are not formatted at all. Needs the GIL.
void follow_python_log_level();

}  // namespace ex2d::python
