// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file commands.hpp
/// Subcommands of the ex2d tool. Each add_* function registers its subcommand and options on
/// `app`; the callback it installs returns through ex2d::CommandExit (exit code + one-line
/// reason) so that main() prints one line and exits non-zero on failure.

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "ex2d/exit_codes.hpp"

namespace ex2d::tool {

/// Thrown by a subcommand to end the program with `code` (ex2d/exit_codes.hpp: runtime,
/// usage, input or output) after printing `what()`.
class CommandExit : public std::runtime_error {
public:
    CommandExit(int code, const std::string& reason) : std::runtime_error(reason), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

void add_extract_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_make_psf_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_accuracy_command(CLI::App& app);
void add_trace_shifts_command(CLI::App& app);

}  // namespace ex2d::tool
