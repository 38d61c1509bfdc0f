// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file python_errors.hpp
/// ex2d's errors as Python exceptions: one class per exit-code class of the tool
/// (ex2d/exit_codes.hpp), each carrying the tool's message and its exit code.
///
///   ex2d.Error            base, exit_code 1
///   ex2d.ExtractionError  (Error, RuntimeError)  1: the extraction or the backend failed
///   ex2d.UsageError       (Error, ValueError)    2: an argument or option is wrong
///   ex2d.InputError       (Error, OSError)       3: an input file is missing or bad
///   ex2d.OutputError      (Error, OSError)       4: an output cannot be written

#include <string>

#include <pybind11/pybind11.h>

#include "ex2d/status.hpp"

namespace ex2d::python {

/// Creates the classes above in `m`. Once, at import.
void define_exceptions(pybind11::module_& m);

/// Raises the class of `exit_code` with `message` (sets the Python error and throws
/// pybind11::error_already_set).
[[noreturn]] void raise(int exit_code, const std::string& message);
/// The same for a failed status: `exit_code` < 0 takes exit_code_for(status).
[[noreturn]] void raise(const Status& status, int exit_code = -1);
/// raise(status, exit_code) when `status` is not OK.
void raise_if_error(const Status& status, int exit_code = -1);

}  // namespace ex2d::python
