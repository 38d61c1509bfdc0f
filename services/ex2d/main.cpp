// SPDX-License-Identifier: BSD-3-Clause
// ex2d: spectro-perfectionism extraction of DESI frames from the command line.
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "ex2d/logging.hpp"

namespace {

/// Installed under desispec's names (symlinks, see services/ex2d/CMakeLists.txt), the tool
/// is `ex2d extract` or `ex2d trace-shifts`, so that desi_proc-style command lines run
/// unchanged.
std::vector<char*> arguments_for(int argc, char** argv)
{
    std::vector<char*> args(argv, argv + argc);
    const char* slash = std::strrchr(argv[0], '/');
    const char* base = slash ? slash + 1 : argv[0];
    static char extract[] = "extract";
    static char trace_shifts[] = "trace-shifts";
    if (std::strcmp(base, "desi_extract_spectra") == 0) args.insert(args.begin() + 1, extract);
    if (std::strcmp(base, "desi_compute_trace_shifts") == 0) {
        args.insert(args.begin() + 1, trace_shifts);
    }
    return args;
}

/// The final error line, in the log format of every other line (time stamp, level).
int fail(int code, const std::string& message)
{
    ex2d::logger()->error("ex2d: {}", message);
    ex2d::logger()->flush();
    return code;
}

}  // namespace

// A function-try-block: what escapes a command, CLI11's set-up included, ends in one line.
int main(int argc, char** argv)
try {
    using namespace ex2d::tool;
    CLI::App app{"ex2d " EX2D_VERSION
                 ": spectro-perfectionism extraction of DESI spectrograph "
                 "frames (Bolton & Schlegel 2010)\n\n"
                 "Typical use:\n"
                 "  ex2d make-psf --camera r0 -o psf.fits\n"
                 "  ex2d simulate -p psf.fits -o preproc.fits --truth truth.fits\n"
                 "  ex2d trace-shifts -i preproc.fits --psf psf.fits -o psf-shifted.fits "
                 "--degxx 2 --degyx 2 --sky\n"
                 "  ex2d extract -i preproc.fits -p psf.fits -o frame.fits\n"
                 "  ex2d accuracy --frame frame.fits --truth truth.fits\n"
                 "  ex2d bench -p psf.fits"};
    app.require_subcommand(1);
    std::string log_level = "info";
    app.add_option("--log-level", log_level,
                   "Log level: trace, debug, info, warning, error, critical or off")
        ->check(CLI::IsMember(ex2d::log_level_names()))
        ->capture_default_str();
    app.set_version_flag("--version", "ex2d " EX2D_VERSION);
    ex2d::tool::add_commands(app);
    app.parse_complete_callback([&] { ex2d::set_log_level(log_level); });
    std::vector<char*> args = arguments_for(argc, argv);
    try {
        app.parse(int(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
        // --help and --version are "errors" with code 0; every other parse error is usage.
        if (e.get_exit_code() == 0) return app.exit(e);
        return fail(ex2d::kExitUsage,
                    std::string(e.what()) + " (run with --help for more information)");
    } catch (const CommandExit& e) {
        return fail(e.code(), e.what());
    }
    return ex2d::kExitOk;
} catch (const std::exception& e) {
    return fail(ex2d::kExitRuntime, std::string("internal error: ") + e.what());
}
