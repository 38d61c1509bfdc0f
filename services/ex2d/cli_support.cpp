// SPDX-License-Identifier: BSD-3-Clause
#include "cli_support.hpp"

#include <fstream>

#include <unistd.h>

#include <sys/resource.h>

#include "ex2d/cpu_count.hpp"

namespace ex2d::tool {

void exit_on_error(const Status& status, int code)
{
    if (!status.is_ok()) {
        throw CommandExit(code < 0 ? exit_code_for(status) : code, status.to_string());
    }
}

void exit_on_usage_error(const Status& status)
{
    if (!status.is_ok()) throw CommandExit(kExitUsage, status.message());
}

void add_backend_options(CLI::App& cmd, BackendChoice& choice)
{
    cmd.add_option("--backend", choice.name, "cpu, cuda, or auto (cuda where a GPU is found)")
        ->capture_default_str();
    cmd.add_option("--threads", choice.threads,
                   "CPU worker threads (default: the CPUs this process may use: affinity mask "
                   "and cgroup quota)");
    cmd.add_option("--device", choice.device, "CUDA device index")->capture_default_str();
    cmd.add_option("--gpu-memory", choice.gpu_memory_gib,
                   "Device memory budget of this worker in GiB (CUDA); batches are sized to fit")
        ->capture_default_str();
}

std::unique_ptr<ExtractionBackend> make_backend_or_exit(const BackendChoice& choice)
{
    if (!(choice.gpu_memory_gib > 0)) {
        throw CommandExit(kExitUsage, "--gpu-memory must be positive");
    }
    if (choice.threads < 0) {
        throw CommandExit(kExitUsage,
                          "--threads must be >= 0 (0: the CPUs this process may "
                          "use), got " +
                              std::to_string(choice.threads));
    }
    std::string name = choice.name;
    if (name == "auto") {
        const int ndevices = cuda_device_count();
        name = ndevices > 0 ? "cuda" : "cpu";
        logger()->info("event=backend_auto backend={} reason=\"{}\"", name,
                       ndevices > 0 ? std::to_string(ndevices) + " CUDA device(s) found"
                                    : std::string("no usable CUDA device in this build/host"));
    }
    const int threads = resolve_thread_count(choice.threads);
    if (name == "cpu" && choice.threads == 0) {
        logger()->debug(
            "event=default_threads threads={} reason=\"affinity mask and cgroup "
            "quota\"",
            threads);
    }
    CudaBackendOptions cuda;
    cuda.device = choice.device;
    cuda.memory_budget_bytes = std::size_t(choice.gpu_memory_gib * double(1 << 30));
    return value_or_exit(make_backend(name, threads, cuda));
}

void add_extraction_options(CLI::App& cmd, ExtractionOptions& opt, std::string& wavelength)
{
    cmd.add_option("-w,--wavelength", wavelength,
                   "Wavelength grid 'wmin,wmax,dw' in Angstrom (default: the PSF HDU's "
                   "WAVEMIN,WAVEMAX with dw 0.8; DESI uses 5760.0,7620.0,0.8 for r)");
    cmd.add_option("-s,--specmin", opt.specmin, "First spectrum (0-499, on a bundle boundary)")
        ->capture_default_str();
    cmd.add_option("-n,--nspec", opt.nspec, "Number of spectra (a multiple of bundlesize)")
        ->capture_default_str();
    cmd.add_option("-r,--regularize", opt.regularize, "Regularization added as alpha^2 to iCov")
        ->capture_default_str();
    cmd.add_option("--psferr", opt.psferr,
                   "PSF error fraction for chi2pix (default: PSF header PSFERR, else 0.01)");
    cmd.add_option("--bundlesize", opt.bundlesize, "Fibres per bundle")->capture_default_str();
    cmd.add_option("--nsubbundles", opt.nsubbundles, "Sub-bundles per bundle")
        ->capture_default_str();
    cmd.add_option("--nwavestep", opt.nwavestep, "Kept wavelength bins per patch")
        ->capture_default_str();
    cmd.add_option("--wavepad", opt.wavepad, "Padding bins each side before wavepad-frac")
        ->capture_default_str();
    cmd.add_option("--pixpad-frac", opt.pixpad_frac, "Fraction of padding rows used")
        ->capture_default_str();
    cmd.add_option("--wavepad-frac", opt.wavepad_frac, "Extra padding as a fraction of wavepad")
        ->capture_default_str();
}

double process_cpu_seconds()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
           usage.ru_stime.tv_usec * 1e-6;
}

double peak_rss_mib()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024.0;
}

double current_rss_mib()
{
    std::ifstream statm("/proc/self/statm");
    long pages_total = 0, pages_resident = 0;
    statm >> pages_total >> pages_resident;
    return double(pages_resident) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

}  // namespace ex2d::tool
