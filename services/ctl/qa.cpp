// SPDX-License-Identifier: BSD-3-Clause
// ex2dctl qa: runs the QA report writer (python/ex2d_qa) with this ex2dctl for the fleet's
// state. The report needs numpy, astropy, matplotlib and Jinja2; Debian's python3-numpy,
// python3-astropy, python3-matplotlib and python3-jinja2 live in /usr/bin/python3's path, which is used unless $EX2D_QA_PYTHON names another
// interpreter.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "ctl.hpp"

#ifndef EX2D_PYTHON_SOURCE_DIR
#define EX2D_PYTHON_SOURCE_DIR ""
#endif

namespace ex2d::ctl {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback)
{
    const char* v = std::getenv(name);
    return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

/// The folder holding the ex2d_qa package: $EX2D_QA_PYTHONPATH, the installed copy beside
/// this program (PREFIX/share/ex2d/python), else the source tree it was built from.
std::string package_dir(const fs::path& self)
{
    std::string given = env_or("EX2D_QA_PYTHONPATH", "");
    if (!given.empty()) return given;
    std::error_code ec;
    const fs::path installed = self.parent_path().parent_path() / "share" / "ex2d" / "python";
    if (fs::exists(installed / "ex2d_qa" / "__main__.py", ec)) return installed.string();
    const fs::path source = EX2D_PYTHON_SOURCE_DIR;
    if (!source.empty() && fs::exists(source / "ex2d_qa" / "__main__.py", ec)) return source;
    return "";
}

}  // namespace

int run_qa(const std::vector<std::string>& args, const std::vector<std::string>& fleet_args)
{
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) self = fs::absolute("ex2dctl");
    const std::string dir = package_dir(self);
    if (dir.empty()) {
        std::cerr << "ex2dctl: qa: the ex2d_qa package was not found (set EX2D_QA_PYTHONPATH to "
                     "the folder holding it)\n";
        return kExitUsage;
    }
    const std::string old_path = env_or("PYTHONPATH", "");
    const std::string path = old_path.empty() ? dir : dir + ":" + old_path;
    ::setenv("PYTHONPATH", path.c_str(), 1);
    // glibc malloc: keep freed memory for the next frame instead of mapping fresh pages. Each
    // .fits.gz is inflated into a new 70 MB buffer, above the largest mmap threshold, and
    // faulting in zeroed pages cost 0.06 CPU-second a frame of 0.27 (mallopt(3); a caller's
    // own setting is kept).
    ::setenv("MALLOC_MMAP_MAX_", "0", 0);
    ::setenv("MALLOC_TRIM_THRESHOLD_", "1073741824", 0);
    const std::string python = env_or(
        "EX2D_QA_PYTHON", ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3");
    std::vector<std::string> command = {python, "-m", "ex2d_qa", "--ex2dctl", self.string()};
    command.insert(command.end(), fleet_args.begin(), fleet_args.end());
    command.insert(command.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(command.size() + 1);
    for (auto& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::cerr << "ex2dctl: qa: cannot run " << python << ": " << std::strerror(errno) << "\n";
    return kExitRuntime;
}

}  // namespace ex2d::ctl
