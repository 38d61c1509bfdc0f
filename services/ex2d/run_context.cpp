// SPDX-License-Identifier: BSD-3-Clause
// The subcommands registered once for the program and for in-process callers, and the
// context they run under.
#include <string>
#include <vector>

#include "commands.hpp"

namespace ex2d::tool {
namespace {

/// Per thread: two Python threads may each run a command line at the same time, and a
/// subcommand's callback runs on the thread that parses its arguments.
thread_local RunContext current_context;

/// Restores the program's context when the command line is done, however it ends.
class ContextScope {
public:
    explicit ContextScope(const RunContext& context) { current_context = context; }
    ~ContextScope() { current_context = RunContext{}; }
    ContextScope(const ContextScope&) = delete;
    ContextScope& operator=(const ContextScope&) = delete;
};

}  // namespace

const RunContext& run_context()
{
    return current_context;
}

void add_commands(CLI::App& app)
{
    add_extract_command(app);
    add_simulate_command(app);
    add_make_psf_command(app);
    add_accuracy_command(app);
    add_bench_command(app);
    add_trace_shifts_command(app);
}

void run_in_process(const std::vector<std::string>& args, const RunContext& context)
{
    CLI::App app{"ex2d"};
    app.require_subcommand(1);
    add_commands(app);
    // CLI11 takes the arguments last to first.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    const ContextScope scope(context);
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        throw CommandExit(kExitUsage, e.get_exit_code() == 0
                                          ? std::string("--help and --version print; in-process "
                                                        "they are refused")
                                          : std::string(e.what()));
    }
}

}  // namespace ex2d::tool
