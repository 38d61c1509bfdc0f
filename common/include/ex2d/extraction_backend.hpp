// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file extraction_backend.hpp
/// The kernel interface that every backend implements: a batch of patches in, per-patch
/// results and statuses out. The CPU backend (LAPACK, threads) is always built; the CUDA
/// backend is built when nvcc is found and is otherwise a stub that throws NotCompiled.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ex2d/extraction_types.hpp"
#include "ex2d/psf.hpp"

namespace ex2d {

/// Read-only view of a frame's pixels, [ny][nx] row-major.
struct ImageView {
    int ny = 0;
    int nx = 0;
    const double* pixels = nullptr;   ///< electrons
    const double* weights = nullptr;  ///< ivar with masked pixels already set to 0
};

/// Everything a backend needs to extract a batch of patches of one frame.
struct PatchBatch {
    const GaussHermitePsf* psf = nullptr;
    ImageView image;
    const std::vector<double>* padded_wave = nullptr;  ///< grid with wavepad_eff bins each side
    std::vector<PatchGeometry> patches;                ///< order is the result order
    double regularize = 0.0;
    double psferr = 0.01;
};

/// Called from the backend after each finished patch with (patches done, patches total).
using ProgressCallback = std::function<void(long, long)>;

class ExtractionBackend {
public:
    virtual ~ExtractionBackend() = default;
    virtual std::string name() const = 0;
    /// Extracts every patch of `batch`; `results` is resized to batch.patches.size().
    /// Per-patch numerical failures are reported in PatchResult::status, never thrown.
    /// Results are bit-identical whatever the thread count or batch split.
    virtual void extract(const PatchBatch& batch, std::vector<PatchResult>& results,
                         StageTimes& times, const ProgressCallback& progress = {}) = 0;
};

/// CPU backend with `nthreads` worker threads (<= 0: all cores).
std::unique_ptr<ExtractionBackend> make_cpu_backend(int nthreads);
/// CUDA backend on device `device`; throws NotCompiled in builds without CUDA.
std::unique_ptr<ExtractionBackend> make_cuda_backend(int device);
/// "cpu" or "cuda"; an unknown name is an invalid_argument status.
Result<std::unique_ptr<ExtractionBackend>> make_backend(const std::string& name, int nthreads);

}  // namespace ex2d
