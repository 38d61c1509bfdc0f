// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Runs the ex2d tool (or another command) as a user would and captures what it printed.

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace ex2d::test {

struct RunResult {
    int exit_code = -1;
    std::string output;  ///< stdout and stderr together
};

/// `prefix` goes before the tool (environment settings); `tool` replaces the ex2d binary.
inline RunResult run_command(const std::string& args, const std::string& prefix = "",
                             const std::string& tool = EX2D_TOOL_PATH)
{
    RunResult r;
    const std::string cmd = prefix + " " + tool + " " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    std::array<char, 4096> buf{};
    while (fgets(buf.data(), buf.size(), pipe)) r.output += buf.data();
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

/// The last line printed (the tool's one-line reason on failure).
inline std::string last_line(const std::string& text)
{
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const std::size_t nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace ex2d::test
