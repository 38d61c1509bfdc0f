// SPDX-License-Identifier: BSD-3-Clause
// The CUDA backend: a frame's patches padded to one shape, cut into chunks that fit the
// worker's device-memory budget, each chunk solved with batched kernels and library calls
// on one stream. Patches whose solve fails are retried once with regularize 1e-4, then
// zeroed; a failure is data (PatchResult::status), never an exception.

#include <algorithm>
#include <string>

#include "chunk_solver.hpp"
#include "cuda_check.hpp"
#include "cuda_resources.hpp"
#include "device_frame.hpp"
#include "ex2d/extraction_backend.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/patch_batching.hpp"

namespace ex2d {

namespace {

// cuSOLVER's internal allocations (the batched Cholesky keeps its own) beside our buffers;
// cuBLAS's workspace is a buffer of the ledger (ChunkSolver::kBlasWorkspaceBytes).
constexpr std::size_t kLibraryReserveBytes = std::size_t(64) << 20;

std::string failure_reason(int flags)
{
    std::string reason;
    auto add = [&](const char* what) {
        reason += (reason.empty() ? "" : ", ") + std::string(what);
    };
    if (flags & cuda::kFlagFactor) add("iCov is not positive definite");
    if (flags & cuda::kFlagEigen)
        add("covariance block eigen-decomposition failed or has no positive eigenvalue");
    if (flags & cuda::kFlagNonFinite) add("non-finite flux, ivar, resolution or deconvolved flux");
    return reason;
}

// Copies entry i of the last solve into `r`; with `zeroed`, keeps only pixmask_fraction (a
// failed patch's outputs are zero, its masked fraction still describes the pixels).
void copy_result(const cuda::HostOutputs& out, const PaddedLayout& layout, std::size_t i,
                 const PatchGeometry& p, bool zeroed, PatchResult& r)
{
    const int ndiag = layout.ndiag(), ncw = layout.ncore_wave, ncore = layout.ncore_fiber;
    r.zero_for(p, ndiag);
    for (int cf = 0; cf < ncore; ++cf) {
        for (int jj = 0; jj < p.ncore_wave; ++jj) {
            const std::size_t src = (i * ncore + cf) * ncw + jj;
            const std::size_t dst = std::size_t(cf) * p.ncore_wave + jj;
            r.pixmask_fraction[dst] = out.pixmask[src];
            if (zeroed) continue;
            r.flux[dst] = out.flux[src];
            r.ivar[dst] = out.ivar[src];
            r.xflux[dst] = out.xflux[src];
            r.chi2pix[dst] = out.chi2pix[src];
            for (int d = 0; d < ndiag; ++d) {
                r.resolution[(std::size_t(cf) * ndiag + d) * p.ncore_wave + jj] =
                    out.resolution[((i * ncore + cf) * ndiag + d) * ncw + jj];
            }
        }
    }
}

class CudaBackend final : public ExtractionBackend {
public:
    explicit CudaBackend(const CudaBackendOptions& options)
        : options_(options), res_(options.device), frame_(res_, ledger_), solver_(res_, ledger_)
    {
        logger()->info("cuda backend on device {} ({}), memory budget {} MiB", options_.device,
                       res_.device_name(), options_.memory_budget_bytes >> 20);
    }

    std::string name() const override { return "cuda"; }

    void extract(const PatchBatch& batch, std::vector<PatchResult>& results, StageTimes& times,
                 const ProgressCallback& progress) override
    {
        if (!batch.psf || !batch.padded_wave || !batch.image.pixels || !batch.image.weights) {
            throw Error("cuda backend: incomplete PatchBatch");
        }
        // The device holds the whole CCD; column windows are a CPU-only saving.
        if (!batch.image.whole()) throw Error("cuda backend: needs the whole image, not a window");
        res_.activate();
        results.assign(batch.patches.size(), PatchResult{});
        if (batch.patches.empty()) return;
        const PaddedLayout layout =
            padded_layout(batch.patches, batch.psf->stamp_ny(), batch.psf->stamp_nx());
        const cuda::DeviceLayout device_layout{layout.nslot,       layout.nwave,
                                               layout.ncore_fiber, layout.core_wave_offset,
                                               layout.ncore_wave,  layout.ndiag()};
        frame_.upload(batch.image, *batch.psf, *batch.padded_wave);
        uploaded_psf_ = batch.psf;
        if (eigen_layout_nwave_ != layout.nwave || eigen_layout_ncore_ != layout.ncore_fiber) {
            eigen_workspace_ = solver_.eigen_workspace(device_layout);
            eigen_layout_nwave_ = layout.nwave;
            eigen_layout_ncore_ = layout.ncore_fiber;
        }
        const std::size_t model_bytes =
            batch.want_model ? model_bytes_needed(batch.image, batch.patches, *batch.padded_wave)
                             : 0;
        const std::size_t fixed =
            cuda::DeviceFrame::bytes_needed(batch.image, *batch.psf, batch.padded_wave->size()) +
            kLibraryReserveBytes + cuda::ChunkSolver::kBlasWorkspaceBytes + eigen_workspace_.fixed +
            model_bytes;
        ChunkPlan plan;
        // The eigen-solver's workspace per patch is estimated from two probes; reserve() asks
        // cuSOLVER for the planned batch, and a larger answer re-plans with it (twice at most).
        for (int attempt = 0;; ++attempt) {
            plan = plan_chunks(batch.patches, layout, options_.memory_budget_bytes, fixed,
                               eigen_workspace_.per_patch);
            const std::size_t slots =
                patch_slots_after(held_layout_, held_slots_, layout, plan,
                                  options_.memory_budget_bytes, eigen_workspace_.per_patch);
            solver_.reserve(device_layout, plan, slots,
                            !same_shape(held_layout_, layout) || slots != held_slots_);
            held_layout_ = layout;
            held_slots_ = slots;
            const std::size_t estimated =
                eigen_workspace_.fixed + eigen_workspace_.per_patch * slots;
            if (solver_.eigen_device_bytes() <= estimated || attempt == 2) break;
            eigen_workspace_.per_patch =
                (solver_.eigen_device_bytes() -
                 std::min(solver_.eigen_device_bytes(), eigen_workspace_.fixed) + slots - 1) /
                slots;
            logger()->info(
                "cuda plan: the eigen-solver needs {} MiB for {} patches, more than the "
                "{} MiB estimated; planning again",
                solver_.eigen_device_bytes() >> 20, slots, estimated >> 20);
        }
        logger()->debug("cuda plan: {} patches in {} chunks of up to {}, {} MiB of {} MiB budget",
                        batch.patches.size(), plan.chunks.size(), plan.max_patches,
                        plan.estimated_bytes >> 20, options_.memory_budget_bytes >> 20);

        long done = 0;
        const long total = long(batch.patches.size());
        for (const PatchChunk& chunk : plan.chunks) {
            if (batch.cancelled()) break;
            solver_.evaluate_spots(frame_.psf(), frame_.padded_wave(), chunk, times);
            solve_chunk(batch, layout, chunk, results, times);
            done += long(chunk.npatch());
            if (progress) progress(done, total);
        }
    }

    bool model_image(const ModelRequest& request, std::vector<double>& model,
                     StageTimes& times) override
    {
        // The PSF tables on the device are those of the last extract; the model follows it.
        if (request.psf != uploaded_psf_ || solver_.spot_capacity() == 0) return false;
        res_.activate();
        // The model buffers live for this call only: the plan of the next extract counts
        // them only when that frame asks for a model.
        struct ReleaseModelBuffers {
            CudaBackend& backend;
            ~ReleaseModelBuffers()
            {
                backend.model_.release();
                backend.model_xflux_.release();
                backend.model_waves_.release();
                backend.model_bounds_.release();
            }
        } release_model_buffers{*this};
        const int nwave = int(request.wave->size());
        const std::size_t npix = std::size_t(request.ny) * request.nx;
        model_xflux_.reserve(request.xflux->size(), ledger_);
        model_.reserve(npix, ledger_);
        model_waves_.reserve(request.wave->size(), ledger_);
        model_bounds_.reserve(3, ledger_);
        cudaStream_t stream = res_.stream();
        EX2D_CUDA_CHECK(cudaMemcpyAsync(model_xflux_.data(), request.xflux->data(),
                                        request.xflux->size() * sizeof(double),
                                        cudaMemcpyHostToDevice, stream));
        EX2D_CUDA_CHECK(cudaMemcpyAsync(model_waves_.data(), request.wave->data(),
                                        nwave * sizeof(double), cudaMemcpyHostToDevice, stream));
        EX2D_CUDA_CHECK(cudaMemsetAsync(model_.data(), 0, npix * sizeof(double), stream));
        // Fibres per pass: as many of a bundle as the spot buffers of the solve hold.
        const int group = int(std::max<std::size_t>(
            1, std::min<std::size_t>(request.bundlesize,
                                     solver_.spot_capacity() / std::max(nwave, 1))));
        for (int b = 0; b < request.nspec; b += request.bundlesize) {
            for (int g = b; g < std::min(b + request.bundlesize, request.nspec); g += group) {
                const int nfiber =
                    std::min(group, std::min(b + request.bundlesize, request.nspec) - g);
                PatchChunk box;
                box.fiber_begin = request.specmin + g;
                box.fiber_end = box.fiber_begin + nfiber;
                box.wave_begin = 0;
                box.wave_end = nwave;
                solver_.evaluate_spots(frame_.psf(), model_waves_.data(), box, times);
                int bounds[3] = {0, 0, 0};
                cuda::launch_model_bounds(solver_.spots(), model_bounds_.data(), stream);
                EX2D_CUDA_CHECK(cudaMemcpyAsync(bounds, model_bounds_.data(), sizeof(bounds),
                                                cudaMemcpyDeviceToHost, stream));
                EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));
                if (bounds[2] != 0) {
                    logger()->info(
                        "model image on the host: stamp rows of fibres {}-{} are not "
                        "monotonic in wavelength",
                        box.fiber_begin, box.fiber_end - 1);
                    return false;
                }
                cuda::launch_model_image(
                    solver_.spots(), model_xflux_.data() + std::size_t(g) * nwave, model_.data(),
                    request.ny, request.nx, bounds[0], bounds[1], stream);
            }
        }
        model.resize(npix);
        EX2D_CUDA_CHECK(cudaMemcpyAsync(model.data(), model_.data(), npix * sizeof(double),
                                        cudaMemcpyDeviceToHost, stream));
        EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));
        return true;
    }

    DeviceReport device_report() const override
    {
        DeviceReport report;
        report.device_name = res_.device_name();
        report.held_bytes = ledger_.held;
        report.peak_held_bytes = ledger_.peak;
        report.held_buffers = ledger_.buffers;
        report.budget_bytes = options_.memory_budget_bytes;
        res_.activate();
        EX2D_CUDA_CHECK(cudaMemGetInfo(&report.device_free_bytes, &report.device_total_bytes));
        report.call_seconds = solver_.call_seconds();
        return report;
    }

private:
    void solve_chunk(const PatchBatch& batch, const PaddedLayout& layout, const PatchChunk& chunk,
                     std::vector<PatchResult>& results, StageTimes& times)
    {
        std::vector<const PatchGeometry*> patches;
        for (std::size_t i = chunk.first; i < chunk.last; ++i) patches.push_back(&batch.patches[i]);
        const std::vector<int> flags =
            solver_.solve(patches, frame_.image(), batch.regularize, batch.psferr, times);
        const cuda::HostOutputs out = solver_.host_outputs();
        std::vector<const PatchGeometry*> retry;
        std::vector<std::size_t> retry_index;
        for (std::size_t k = 0; k < patches.size(); ++k) {
            PatchResult& r = results[chunk.first + k];
            copy_result(out, layout, k, *patches[k], false, r);
            if (flags[k] == 0) continue;
            r.status = PatchStatus::retried;
            r.failure = failure_reason(flags[k]);
            retry.push_back(patches[k]);
            retry_index.push_back(chunk.first + k);
        }
        if (retry.empty()) return;
        const std::vector<int> retry_flags = solver_.solve(
            retry, frame_.image(), SolverConstants::retry_regularize, batch.psferr, times);
        const cuda::HostOutputs retry_out = solver_.host_outputs();
        for (std::size_t k = 0; k < retry.size(); ++k) {
            PatchResult& r = results[retry_index[k]];
            const bool failed = retry_flags[k] != 0;
            copy_result(retry_out, layout, k, *retry[k], failed, r);
            if (failed) {
                r.status = PatchStatus::failed;
                r.failure += "; retry: " + failure_reason(retry_flags[k]);
            }
        }
    }

    // The model image and the stitched xflux it needs, on top of the frame's inputs.
    static std::size_t model_bytes_needed(const ImageView& image,
                                          const std::vector<PatchGeometry>& patches,
                                          const std::vector<double>& padded_wave)
    {
        int first = patches.front().core_fiber_begin, last = patches.front().core_fiber_end;
        for (const PatchGeometry& p : patches) {
            first = std::min(first, p.core_fiber_begin);
            last = std::max(last, p.core_fiber_end);
        }
        const std::size_t nwave = padded_wave.size();
        return (std::size_t(image.ny) * image.nx + std::size_t(last - first) * nwave + nwave) *
                   sizeof(double) +
               3 * sizeof(int);
    }

    CudaBackendOptions options_;
    cuda::MemoryLedger ledger_;
    cuda::CudaResources res_;
    cuda::DeviceFrame frame_;
    cuda::ChunkSolver solver_;
    PaddedLayout held_layout_;  // what the solver's buffers are sized for
    std::size_t held_slots_ = 0;
    int eigen_layout_nwave_ = -1;
    int eigen_layout_ncore_ = -1;
    cuda::EigenWorkspace eigen_workspace_;
    const GaussHermitePsf* uploaded_psf_ = nullptr;
    cuda::DeviceArray<double> model_{"model image"};
    cuda::DeviceArray<double> model_xflux_{"model xflux"};
    cuda::DeviceArray<double> model_waves_{"model grid"};
    cuda::DeviceArray<int> model_bounds_{"model bounds"};
};

}  // namespace

int cuda_device_count()
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // no driver or no device: not an error for the caller, just none
        return 0;
    }
    return count;
}

std::string cuda_unavailable_reason()
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status) + " (" +
               cudaGetErrorName(status) + ")";
    }
    return count > 0 ? std::string() : std::string("cudaGetDeviceCount found no device");
}

std::unique_ptr<ExtractionBackend> make_cuda_backend(const CudaBackendOptions& options)
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        throw DeviceUnavailable(std::string("no usable CUDA device: ") +
                                cudaGetErrorString(status));
    }
    if (options.device < 0 || options.device >= count) {
        throw DeviceUnavailable("CUDA device " + std::to_string(options.device) +
                                " requested but " + std::to_string(count) + " found");
    }
    return std::make_unique<CudaBackend>(options);
}

}  // namespace ex2d
