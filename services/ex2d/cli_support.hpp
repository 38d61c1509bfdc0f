// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// Helpers shared by the ex2d subcommands.

#include <memory>
#include <string>

#include "commands.hpp"
#include "ex2d/extraction_backend.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/status.hpp"

namespace ex2d::tool {

/// Throws CommandExit(code, status text) when `status` is not OK; code < 0 takes
/// exit_code_for(status) (ex2d/exit_codes.hpp).
void exit_on_error(const Status& status, int code = -1);

template <typename T>
T value_or_exit(Result<T> result, int code = -1)
{
    exit_on_error(result.status(), code);
    return std::move(result).value();
}

/// Throws CommandExit(kExitUsage, its message) when `status` is not OK: an option's error is
/// printed as the option's own sentence, without the "invalid argument:" of Status::to_string.
void exit_on_usage_error(const Status& status);

/// Registers desi_extract_spectra's extraction options on `cmd`.
void add_extraction_options(CLI::App& cmd, ExtractionOptions& opt, std::string& wavelength);

/// Which backend to run and its settings, from --backend, --threads, --device, --gpu-memory.
/// threads 0 = default_thread_count() (affinity mask and cgroup quota).
struct BackendChoice {
    std::string name = "cpu";
    int threads = 0;
    int device = 0;
    double gpu_memory_gib = double(CudaBackendOptions{}.memory_budget_bytes) / (1 << 30);
};
void add_backend_options(CLI::App& cmd, BackendChoice& choice);
/// The chosen backend; exits with a one-line message where it cannot be had (not built,
/// no device). "auto" takes cuda where a device is found, else cpu, and logs which and why.
std::unique_ptr<ExtractionBackend> make_backend_or_exit(const BackendChoice& choice);

/// Progress of an extraction: a ProgressBar created once the backend reports the total.
class ExtractionProgress {
public:
    explicit ExtractionProgress(std::string label) : label_(std::move(label)) {}
    ProgressCallback callback()
    {
        return [this](long done, long total) {
            if (!bar_) bar_ = std::make_unique<ProgressBar>(label_, total);
            bar_->update(done);
        };
    }
    void finish()
    {
        if (bar_) bar_->finish();
    }

private:
    std::string label_;
    std::unique_ptr<ProgressBar> bar_;
};

/// Process CPU seconds (user + system) and peak resident memory in MiB.
double process_cpu_seconds();
double peak_rss_mib();
/// Current resident memory in MiB (from /proc/self/statm).
double current_rss_mib();

}  // namespace ex2d::tool
