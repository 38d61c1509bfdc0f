// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file commands.hpp
/// Subcommands of the ex2d tool. Each add_* function registers its subcommand and options on
/// `app`; the callback it installs returns through ex2d::CommandExit (exit code + one-line
/// reason) so that main() prints one line and exits non-zero on failure.

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ex2d/exit_codes.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/frame_parts.hpp"
#include "ex2d/timing_file.hpp"

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

/// One frame extracted by several processes (desi_proc's MPI ranks through the Python
/// module): `extract` extracts this process's share of the bundles and hands its part to
/// `gather`, which returns every part where this process writes the frame, nullopt where
/// another one does. A failure to exchange the parts throws.
class FrameShare {
public:
    virtual ~FrameShare() = default;
    virtual BundleShare bundles(int nbundle) const = 0;
    virtual std::optional<std::vector<ExtractedFrame>> gather(ExtractedFrame part) = 0;
};

/// How the subcommands run: as the ex2d program, which owns SIGINT and SIGTERM (they end it
/// once its temporary files are removed), or inside another process, the Python module,
/// which owns its signals and stops an extraction through `cancel`.
struct RunContext {
    bool owns_signals = true;
    const std::atomic<bool>* cancel = nullptr;  ///< extract_frame's cancel flag; null: none
    StepTimer* steps = nullptr;   ///< where `extract` leaves its read, extract and write steps
    FrameShare* share = nullptr;  ///< the frame's bundles shared out; null: all of them here
};
/// The context of the subcommand running on this thread (the program's by default).
const RunContext& run_context();

/// Registers every subcommand on `app`.
void add_commands(CLI::App& app);
/// Runs one command line (`args` without the program's name, e.g. {"extract", "-i", ...})
/// in this process under `context`; a failure throws CommandExit, as in the program, and a
/// usage error its CommandExit(kExitUsage, CLI11's message). --help is refused: it prints.
void run_in_process(const std::vector<std::string>& args, const RunContext& context);

void add_extract_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_make_psf_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_accuracy_command(CLI::App& app);
void add_trace_shifts_command(CLI::App& app);

}  // namespace ex2d::tool
