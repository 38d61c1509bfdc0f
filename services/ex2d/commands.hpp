// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file commands.hpp
/// Subcommands of the ex2d tool. Each add_* function registers its subcommand and options on
/// `app`; the callback it installs returns through ex2d::CommandExit (exit code + one-line
/// reason) so that main() prints one line and exits non-zero on failure.

#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace ex2d::tool {

/// Exit codes of the tool, one per failure class (table in docs/usage.md). A signal N ends
/// the program with 128 + N, as a shell reports it.
enum ExitCode : int {
    kExitOk = 0,
    kExitRuntime = 1,  ///< the extraction failed, or the requested backend cannot be had
    kExitUsage = 2,    ///< a bad option or option value (CLI parsing included)
    kExitInput = 3,    ///< an input file is missing, unreadable or not in the expected format
    kExitOutput = 4,   ///< an output file or its folder cannot be written
};

/// Thrown by a subcommand to end the program with `code` after printing `what()`.
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
