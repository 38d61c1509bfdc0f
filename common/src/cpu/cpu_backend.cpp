// SPDX-License-Identifier: BSD-3-Clause
// The CPU backend: patches of a bundle share one evaluation of their spots, then run
// on a pool of threads. Each patch writes only its own result, so results do not depend on
// the thread count or on the order in which threads pick patches.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "ex2d/cpu_count.hpp"
#include "ex2d/extraction_backend.hpp"
#include "blas_threads.hpp"
#include "cpu_clock.hpp"
#include "patch_solver.hpp"

namespace ex2d {

namespace {

// Done once at load as well, so that OpenBLAS's threads stop before the frame is read rather
// than spinning through it.
[[maybe_unused]] const bool kBlasSingleThreadedAtLoad = (use_single_threaded_blas(), true);

// Patches that share one evaluation of spots: patches of one bundle whose padded wavelength
// ranges fall in one window. Spots of a whole bundle take about 90 MB on the r grid; windows
// of spot_window_bytes keep the grid, and the fresh pages the kernel must zero, that small
// (one bundle's process spent a fifth of its time zeroing pages), at the cost of evaluating
// again the 2 x wavepad wavelengths shared by neighbouring windows.
constexpr size_t kDefaultWindowSpotBytes = size_t(16) << 20;
// Threads meet at the end of each window; enough patches per thread keep that wait small.
constexpr size_t kWindowPatchesPerThread = 8;

struct SpotWindow {
    std::vector<size_t> patches;
    int fiber_begin = 0;
    int fiber_end = 0;
    int wave_begin = 0;
    int wave_end = 0;
};

void add_to_window(SpotWindow& window, size_t index, const PatchGeometry& p)
{
    if (window.patches.empty()) {
        window = {{}, p.fiber_begin, p.fiber_end, p.wave_begin, p.wave_begin + p.nwave};
    }
    window.patches.push_back(index);
    window.fiber_begin = std::min(window.fiber_begin, p.fiber_begin);
    window.fiber_end = std::max(window.fiber_end, p.fiber_end);
    window.wave_begin = std::min(window.wave_begin, p.wave_begin);
    window.wave_end = std::max(window.wave_end, p.wave_begin + p.nwave);
}

// Cuts [first, last), one bundle's patches, into windows of at most max_waves padded
// wavelengths each, and at least min_patches patches where the bundle has them.
void cut_windows(const std::vector<PatchGeometry>& patches, size_t first, size_t last,
                 int max_waves, size_t min_patches, std::vector<SpotWindow>& windows)
{
    std::vector<size_t> order(last - first);
    for (size_t i = first; i < last; ++i) order[i - first] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return patches[a].wave_begin < patches[b].wave_begin;
    });
    SpotWindow window;
    for (size_t i : order) {
        const PatchGeometry& p = patches[i];
        const bool full = !window.patches.empty() && window.patches.size() >= min_patches &&
                          p.wave_begin + p.nwave - window.wave_begin > max_waves;
        if (full) {
            windows.push_back(std::move(window));
            window = SpotWindow{};
        }
        add_to_window(window, i, p);
    }
    if (!window.patches.empty()) windows.push_back(std::move(window));
}

std::vector<SpotWindow> spot_windows(const std::vector<PatchGeometry>& patches,
                                     const GaussHermitePsf& psf, int nthreads, size_t window_bytes)
{
    std::vector<SpotWindow> windows;
    const size_t min_patches = kWindowPatchesPerThread * size_t(nthreads);
    size_t first = 0;
    for (size_t i = 1; i <= patches.size(); ++i) {
        if (i < patches.size() && patches[i].bundle == patches[first].bundle) continue;
        int fiber_begin = patches[first].fiber_begin;
        int fiber_end = patches[first].fiber_end;
        for (size_t j = first; j < i; ++j) {
            fiber_begin = std::min(fiber_begin, patches[j].fiber_begin);
            fiber_end = std::max(fiber_end, patches[j].fiber_end);
        }
        const size_t stamp_bytes = sizeof(double) * size_t(psf.stamp_ny()) * psf.stamp_nx();
        const size_t bytes_per_wave = stamp_bytes * size_t(std::max(1, fiber_end - fiber_begin));
        const int max_waves = int(std::max<size_t>(1, window_bytes / bytes_per_wave));
        cut_windows(patches, first, i, max_waves, min_patches, windows);
        first = i;
    }
    return windows;
}

class CpuBackend final : public ExtractionBackend {
public:
    CpuBackend(int nthreads, size_t spot_window_bytes)
        : nthreads_(resolve_thread_count(nthreads)), spot_window_bytes_(spot_window_bytes)
    {
        use_single_threaded_blas();
    }

    std::string name() const override { return "cpu"; }

    void extract(const PatchBatch& batch, std::vector<PatchResult>& results, StageTimes& times,
                 const ProgressCallback& progress) override
    {
        if (!batch.psf || !batch.padded_wave || !batch.image.pixels || !batch.image.weights) {
            throw Error("cpu backend: incomplete PatchBatch");
        }
        results.assign(batch.patches.size(), PatchResult{});
        workspaces_.resize(nthreads_);
        std::vector<StageTimes> thread_times(nthreads_);
        std::atomic<long> done{0};
        const long total = long(batch.patches.size());
        std::mutex progress_mutex;

        const std::vector<SpotWindow> windows =
            spot_windows(batch.patches, *batch.psf, nthreads_, spot_window_bytes_);
        for (const SpotWindow& window : windows) {
            if (batch.cancelled()) break;
            const double t0 = cpu::process_cpu_seconds();
            const std::vector<double> waves(batch.padded_wave->begin() + window.wave_begin,
                                            batch.padded_wave->begin() + window.wave_end);
            const int nfiber = window.fiber_end - window.fiber_begin;
            evaluate_spots(*batch.psf, window.fiber_begin, nfiber, waves,
                           std::min(nthreads_, nfiber), spots_);
            times.psf += cpu::process_cpu_seconds() - t0;
            const cpu::BundleSpots bundle_spots{&spots_, window.wave_begin};

            std::atomic<size_t> next{0};
            auto worker = [&](int t) {
                for (size_t k = next++; k < window.patches.size() && !batch.cancelled();
                     k = next++) {
                    const size_t i = window.patches[k];
                    cpu::solve_patch(batch.patches[i], bundle_spots, batch.image, batch.regularize,
                                     batch.psferr, workspaces_[t], results[i], thread_times[t]);
                    const long n = ++done;
                    if (progress) {
                        std::lock_guard<std::mutex> lock(progress_mutex);
                        progress(n, total);
                    }
                }
            };
            const int pool = std::min<int>(nthreads_, int(window.patches.size()));
            std::vector<std::thread> threads;
            for (int t = 1; t < pool; ++t) threads.emplace_back(worker, t);
            worker(0);
            for (auto& th : threads) th.join();
        }
        for (const StageTimes& t : thread_times) times += t;
    }

private:
    int nthreads_;
    size_t spot_window_bytes_;
    std::vector<cpu::PatchWorkspace> workspaces_;
    SpotGrid spots_;  // one window's spots; kept so later windows reuse its memory
};

}  // namespace

std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads)
{
    return make_cpu_backend(nthreads, kDefaultWindowSpotBytes);
}

std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads, size_t spot_window_bytes)
{
    return std::make_unique<CpuBackend>(nthreads, spot_window_bytes);
}

}  // namespace ex2d
