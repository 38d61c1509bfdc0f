// SPDX-License-Identifier: BSD-3-Clause
// ex2d: spectro-perfectionism extraction of DESI frames from the command line.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "ex2d/logging.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"ex2d " EX2D_VERSION ": spectro-perfectionism extraction of DESI spectrograph "
                 "frames (Bolton & Schlegel 2010)\n\n"
                 "Typical use:\n"
                 "  ex2d make-psf --camera r0 -o psf.fits\n"
                 "  ex2d simulate -p psf.fits -o preproc.fits --truth truth.fits\n"
                 "  ex2d extract -i preproc.fits -p psf.fits -o frame.fits\n"
                 "  ex2d accuracy --frame frame.fits --truth truth.fits\n"
                 "  ex2d bench -p psf.fits"};
    app.require_subcommand(1);
    std::string log_level = "info";
    app.add_option("--log-level", log_level, "Log level: debug, info, warning, error")
        ->capture_default_str();
    app.set_version_flag("--version", "ex2d " EX2D_VERSION);
    ex2d::tool::add_extract_command(app);
    ex2d::tool::add_simulate_command(app);
    ex2d::tool::add_make_psf_command(app);
    ex2d::tool::add_accuracy_command(app);
    ex2d::tool::add_bench_command(app);
    app.parse_complete_callback([&] { ex2d::set_log_level(log_level); });
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const ex2d::tool::CommandExit& e) {
        std::fprintf(stderr, "ex2d: %s\n", e.what());
        return e.code();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ex2d: internal error: %s\n", e.what());
        return 70;
    }
    return 0;
}
