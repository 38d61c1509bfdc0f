// SPDX-License-Identifier: BSD-3-Clause
// ex2d accuracy: pulls of an extracted frame against the simulation's truth.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli_support.hpp"
#include "ex2d/accuracy.hpp"

namespace ex2d::tool {

namespace {

struct AccuracyArgs {
    std::string frame, truth;
    bool check = false;
};

void run_accuracy(const AccuracyArgs& args)
{
    const FrameFile frame = value_or_exit(read_frame(args.frame));
    const SimulationTruth truth = value_or_exit(read_truth(args.truth));
    const PullStatistics st = value_or_exit(pull_statistics(frame, truth));
    std::printf("accuracy of %s against %s\n", args.frame.c_str(), args.truth.c_str());
    std::printf("  bins compared        %ld (left out for mask or ivar=0: %ld)\n", st.n,
                st.n_masked);
    std::printf("  pull mean            %+.4f   (goal |mean| < 0.02)\n", st.mean);
    std::printf("  pull std deviation   %.4f    (goal 0.97 .. 1.03)\n", st.stddev);
    std::printf("  fraction |pull| > 5  %.2e  (goal < 1e-4)\n", st.frac_beyond_5);
    std::printf("  max |pull|           %.2f\n", st.max_abs);
    std::printf("  median chi2pix       %.3f\n", st.median_chi2pix);
    const bool pass = std::abs(st.mean) < 0.02 && st.stddev >= 0.97 && st.stddev <= 1.03 &&
                      st.frac_beyond_5 < 1e-4;
    std::printf("  verdict              %s\n", pass ? "PASS" : "FAIL");
    if (args.check && !pass)
        throw CommandExit(kExitWithErrors, "pull statistics outside the goals");
}

}  // namespace

void add_accuracy_command(CLI::App& app)
{
    auto args = std::make_shared<AccuracyArgs>();
    CLI::App* cmd =
        app.add_subcommand("accuracy",
                           "Compare an extracted frame with a simulation's truth: pulls "
                           "(flux - R.truth) * sqrt(ivar) over unmasked bins");
    cmd->add_option("--frame", args->frame, "Frame file written by ex2d extract")->required();
    cmd->add_option("--truth", args->truth, "Truth file written by ex2d simulate")->required();
    cmd->add_flag("--check", args->check,
                  "Exit with status 6 (ended with errors) when a goal is missed");
    cmd->callback([args] { run_accuracy(*args); });
}

}  // namespace ex2d::tool
