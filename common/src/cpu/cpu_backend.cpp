// SPDX-License-Identifier: BSD-3-Clause
// The CPU backend: patches of a bundle share one evaluation of the bundle's spots, then run
// on a pool of threads. Each patch writes only its own result, so results do not depend on
// the thread count or on the order in which threads pick patches.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <cblas.h>

#include "ex2d/extraction_backend.hpp"
#include "cpu_clock.hpp"
#include "patch_solver.hpp"

extern "C" void openblas_set_num_threads(int);

namespace ex2d {

namespace {

// Patches that share a bundle's spots: consecutive patches with the same bundle id.
struct BundleGroup {
    size_t first = 0;
    size_t last = 0;  // one past
    int fiber_begin = 0;
    int fiber_end = 0;
    int wave_begin = 0;
    int wave_end = 0;
};

std::vector<BundleGroup> group_by_bundle(const std::vector<PatchGeometry>& patches)
{
    std::vector<BundleGroup> groups;
    for (size_t i = 0; i < patches.size(); ++i) {
        const PatchGeometry& p = patches[i];
        if (groups.empty() || patches[groups.back().first].bundle != p.bundle) {
            groups.push_back({i, i, p.fiber_begin, p.fiber_end, p.wave_begin, p.wave_begin + p.nwave});
        }
        BundleGroup& g = groups.back();
        g.last = i + 1;
        g.fiber_begin = std::min(g.fiber_begin, p.fiber_begin);
        g.fiber_end = std::max(g.fiber_end, p.fiber_end);
        g.wave_begin = std::min(g.wave_begin, p.wave_begin);
        g.wave_end = std::max(g.wave_end, p.wave_begin + p.nwave);
    }
    return groups;
}

class CpuBackend final : public ExtractionBackend {
public:
    explicit CpuBackend(int nthreads)
        : nthreads_(nthreads > 0 ? nthreads : std::max(1u, std::thread::hardware_concurrency()))
    {
        // Parallelism comes from patches; a multi-threaded BLAS inside would oversubscribe.
        openblas_set_num_threads(1);
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

        for (const BundleGroup& group : group_by_bundle(batch.patches)) {
            const double t0 = cpu::process_cpu_seconds();
            const std::vector<double> waves(batch.padded_wave->begin() + group.wave_begin,
                                            batch.padded_wave->begin() + group.wave_end);
            const int spot_threads = std::min(nthreads_, group.fiber_end - group.fiber_begin);
            SpotGrid& spots = spots_;
            evaluate_spots(*batch.psf, group.fiber_begin, group.fiber_end - group.fiber_begin,
                           waves, spot_threads, spots);
            times.psf += cpu::process_cpu_seconds() - t0;
            const cpu::BundleSpots bundle_spots{&spots, group.wave_begin};

            std::atomic<size_t> next{group.first};
            auto worker = [&](int t) {
                for (size_t i = next++; i < group.last; i = next++) {
                    cpu::solve_patch(batch.patches[i], bundle_spots, batch.image, batch.regularize,
                                     batch.psferr, workspaces_[t], results[i], thread_times[t]);
                    const long n = ++done;
                    if (progress) {
                        std::lock_guard<std::mutex> lock(progress_mutex);
                        progress(n, total);
                    }
                }
            };
            const int pool = std::min<int>(nthreads_, int(group.last - group.first));
            std::vector<std::thread> threads;
            for (int t = 1; t < pool; ++t) threads.emplace_back(worker, t);
            worker(0);
            for (auto& th : threads) th.join();
        }
        for (const StageTimes& t : thread_times) times += t;
    }

private:
    int nthreads_;
    std::vector<cpu::PatchWorkspace> workspaces_;
    SpotGrid spots_;  // one bundle's spots; kept so later bundles reuse its memory
};

}  // namespace

std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads)
{
    return std::make_unique<CpuBackend>(nthreads);
}

}  // namespace ex2d
