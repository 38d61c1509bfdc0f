// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file extraction_backend.hpp
/// The kernel interface that every backend implements: a batch of patches in, per-patch
/// results and statuses out. The CPU backend (LAPACK, threads) is always built; the CUDA
/// backend is built when nvcc is found and is otherwise a stub that throws NotCompiled.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/psf.hpp"
#include "ex2d/status.hpp"

namespace ex2d {

/// Read-only view of a frame's pixels, [ny][nx] row-major.
/// Pixels and weights of a CCD of ny x nx pixels, all of it or the columns
/// [col_begin, col_begin + ncols) of every row (a one-bundle run reads only its columns).
struct ImageView {
    int ny = 0;
    int nx = 0;
    const double* pixels = nullptr;   ///< electrons, [ny][stride()]
    const double* weights = nullptr;  ///< ivar with masked pixels already set to 0
    int col_begin = 0;                ///< first CCD column held
    int ncols = 0;                    ///< columns held; 0 = nx (the whole CCD)

    int stride() const { return ncols > 0 ? ncols : nx; }
    bool whole() const { return col_begin == 0 && stride() == nx; }
    /// Index of CCD pixel (row, col) in pixels and weights.
    std::size_t index(int row, int col) const
    {
        return std::size_t(row) * std::size_t(stride()) + std::size_t(col - col_begin);
    }
};

/// Everything a backend needs to extract a batch of patches of one frame.
struct PatchBatch {
    const GaussHermitePsf* psf = nullptr;
    ImageView image;
    const std::vector<double>* padded_wave = nullptr;  ///< grid with wavepad_eff bins each side
    std::vector<PatchGeometry> patches;                ///< order is the result order
    double regularize = 0.0;
    double psferr = 0.01;
    bool want_model = false;  ///< a model_image call will follow (device backends reserve for it)
    /// Set by the caller to stop early (Ctrl-C in the Python module): a backend looks at it
    /// between patches (CPU) or chunks (CUDA) and returns with the rest unsolved. Null: never.
    const std::atomic<bool>* cancel = nullptr;

    bool cancelled() const { return cancel != nullptr && cancel->load(std::memory_order_relaxed); }
};

/// What a backend needs to draw the model image A . xflux of a stitched frame.
struct ModelRequest {
    const GaussHermitePsf* psf = nullptr;
    const std::vector<double>* wave = nullptr;   ///< extraction grid
    const std::vector<double>* xflux = nullptr;  ///< [nspec][nwave] deconvolved flux per bin
    int specmin = 0;
    int nspec = 0;
    int bundlesize = 25;
    int ny = 0;  ///< CCD rows and columns of the model
    int nx = 0;
};

/// Called from the backend after each finished patch with (patches done, patches total).
using ProgressCallback = std::function<void(long, long)>;

/// What a device backend holds on its device, for benchmarks, logs and operators sharing a
/// GPU between several workers under MPS. All zero for host backends.
struct DeviceReport {
    std::string device_name;            ///< e.g. "NVIDIA H100 80GB HBM3"; empty on the host
    std::size_t held_bytes = 0;         ///< device memory held now by this backend's buffers
    std::size_t peak_held_bytes = 0;    ///< most it has held since it was made
    std::size_t budget_bytes = 0;       ///< the budget its batches are sized to fit
    std::size_t held_buffers = 0;       ///< device allocations behind held_bytes
    std::size_t device_free_bytes = 0;  ///< cudaMemGetInfo at the time of the report
    std::size_t device_total_bytes = 0;
    /// Device seconds of each library call since the backend was made (name, seconds), so a
    /// benchmark shows where the solve and decorrelate stages go; empty on the host.
    std::vector<std::pair<std::string, double>> call_seconds;
};

class ExtractionBackend {
public:
    virtual ~ExtractionBackend() = default;
    virtual std::string name() const = 0;
    /// Whether this backend can extract `batch` at all; extract_frame returns any other
    /// status before calling extract. Numerical backends take every batch; a backend bound
    /// to fixed inputs (the test stand-in) refuses a batch of another shape here.
    virtual Status check_batch(const PatchBatch& /*batch*/) const { return Status::ok(); }
    /// Extracts every patch of `batch`; `results` is resized to batch.patches.size().
    /// Per-patch numerical failures are reported in PatchResult::status, never thrown.
    /// Results are bit-identical whatever the thread count or batch split.
    virtual void extract(const PatchBatch& batch, std::vector<PatchResult>& results,
                         StageTimes& times, const ProgressCallback& progress = {}) = 0;
    /// Fills `model` ([ny][nx]) with A . xflux, adding per pixel bundle by bundle, fibre by
    /// fibre, wavelength by wavelength, as the driver's host code does. Returns false where
    /// the backend leaves the model to that host code.
    virtual bool model_image(const ModelRequest& /*request*/, std::vector<double>& /*model*/,
                             StageTimes& /*times*/)
    {
        return false;
    }
    /// Device memory and name; host backends report nothing.
    virtual DeviceReport device_report() const { return {}; }
};

/// Settings of the CUDA backend. The budget bounds every buffer it allocates (batches of
/// patches are sized to fit), so that several workers can share one GPU under MPS.
struct CudaBackendOptions {
    int device = 0;
    std::size_t memory_budget_bytes = std::size_t(3) << 30;
};

/// Settings of the stand-in backend, which exists only in test and benchmark builds
/// (EX2D_TEST_HOOKS): every extraction returns the arrays of one frame file written by
/// `ex2d extract`, read once, after `delay_s` seconds spent asleep, so that a fleet on a
/// machine without a GPU moves frames at a GPU's pace.
struct StandinBackendOptions {
    std::string frame_path;
    double delay_s = 0.0;
    /// 1-based: the stand-in's Nth batch in this process fails half-way through its delay
    /// with a DeviceFailure, as a GPU's Xid or ECC error would (fault tests); 0 = never.
    int device_failure_at_batch = 0;
};

// The backends' factories: defined in ex2d::cpu, ex2d::cuda and ex2d::backends (make_backend),
// which a caller links; ex2d::core only declares them beside the interface.

/// CPU backend with `nthreads` worker threads (<= 0: default_thread_count(), the CPUs this
/// process may use).
std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads);
/// The same with the memory for one evaluation of spots set (default 16 MiB): a bundle's
/// patches are taken in wavelength windows whose spots fit it. Results do not depend on it.
std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads, std::size_t spot_window_bytes);
/// CUDA backend; throws NotCompiled in builds without CUDA and DeviceUnavailable where no
/// usable device is found.
std::unique_ptr<ExtractionBackend> make_cuda_backend(const CudaBackendOptions& options = {});
/// Usable CUDA devices: 0 in builds without CUDA, without a driver or without a GPU.
int cuda_device_count();
/// Why no CUDA device can be used, in words with CUDA's own error where there is one ("the
/// CUDA backend is not part of this build", "cudaGetDeviceCount: CUDA driver version is
/// insufficient for CUDA runtime version (cudaErrorInsufficientDriver)"); empty where
/// cuda_device_count() > 0.
std::string cuda_unavailable_reason();
/// "cpu", "cuda" or "auto" (cuda where a device is found, else cpu), or "standin" in test
/// and benchmark builds; an unknown name is an invalid_argument status, a CUDA backend that
/// is not built or has no device a not_compiled or device_unavailable status, "standin" in a
/// release build a not_compiled status and an unreadable stand-in frame its read status.
Result<std::unique_ptr<ExtractionBackend>> make_backend(const std::string& name, int nthreads,
                                                        const CudaBackendOptions& cuda = {},
                                                        const StandinBackendOptions& standin = {});

}  // namespace ex2d
