// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// One chunk of patches through the whole spectro-perfectionism solve on the device: spots,
// iCov and y, batched Cholesky factorisation and solve, the kept fibres' covariance blocks,
// their batched eigen-decomposition and inverse square roots, R, flux, ivar and chi2pix.

#include <vector>

#include "cuda_resources.hpp"
#include "device_memory.hpp"
#include "ex2d/extraction_types.hpp"
#include "ex2d/patch_batching.hpp"
#include "kernels.hpp"

namespace ex2d::cuda {

/// The kept outputs of the last solve, in pinned host memory: entry (i, c, jj) of patch i
/// of the solve's list at (i * ncore + c) * ncore_wave + jj; resolution with ndiag in between.
struct HostOutputs {
    const double* flux;
    const double* ivar;
    const double* xflux;
    const double* chi2pix;
    const double* pixmask;
    const double* resolution;
};

/// Device bytes of the eigen-solver's workspace for a chunk: fixed + per_patch x patches.
struct EigenWorkspace {
    std::size_t fixed = 0;
    std::size_t per_patch = 0;
};

class ChunkSolver {
public:
    ChunkSolver(const CudaResources& resources, MemoryLedger& ledger);

    /// The eigen-solver's workspace for blocks of this layout, for planning chunks; also
    /// chooses the batched solver or the per-block fallback.
    EigenWorkspace eigen_workspace(const DeviceLayout& layout);
    /// Sizes every buffer for chunks of up to `slots` patches (patch_slots_after) of `layout`.
    /// With `resize` every buffer is released first, so what an earlier layout or a larger
    /// plan held does not stay beside the new sizes; otherwise buffers only grow.
    void reserve(const DeviceLayout& layout, const ChunkPlan& plan, std::size_t slots, bool resize);

    /// Evaluates the spots of `chunk`'s box; they stay for the solves that follow.
    void evaluate_spots(const DevicePsf& psf, const double* padded_waves, const PatchChunk& chunk,
                        StageTimes& times);
    /// Solves `patches` (all inside the box of the last evaluate_spots) with `regularize`;
    /// returns the kFlag* bits per patch, outputs in host_outputs().
    std::vector<int> solve(const std::vector<const PatchGeometry*>& patches,
                           const DeviceImage& image, double regularize, double psferr,
                           StageTimes& times);
    HostOutputs host_outputs() const;
    /// Spots of the last evaluate_spots, and how many spots the buffers hold.
    const SpotBox& spots() const { return spots_; }
    std::size_t spot_capacity() const { return spot_corners_.capacity() / 2; }
    /// Device bytes of the eigen-solver workspace that reserve() found for its slots (the
    /// planner's estimate is checked against it).
    std::size_t eigen_device_bytes() const { return eigen_device_bytes_; }
    /// Device seconds per library call since construction: potrfBatched, potrsBatched,
    /// trsmBatched, the GEMM forming the covariance blocks, the eigen-solver, the GEMM forming Q.
    std::vector<std::pair<std::string, double>> call_seconds() const;
    /// The cuBLAS workspace, a buffer of the ledger's (cublasSetWorkspace).
    static constexpr std::size_t kBlasWorkspaceBytes = std::size_t(32) << 20;
    /// Blocks per call of the batched eigen-solver: cuSOLVER has been seen to refuse batches
    /// above about 32,000 matrices (INVALID_VALUE, not documented), so larger chunks (a large
    /// memory budget) are decomposed in several calls.
    static constexpr long long kMaxEigenBatch = 16384;

private:
    ChunkBuffers buffers(int npatch) const;
    // The steps of solve(), in order, all on the resources' stream.
    void build_system(const std::vector<const PatchGeometry*>& patches, const ChunkBuffers& b,
                      const DeviceImage& image, double regularize, int* solve_info);
    void factor_and_solve(const ChunkBuffers& b, int* solve_info, StageEvents& events);
    void decorrelate(const ChunkBuffers& b, long long nblock, StageEvents& events);
    /// Kept outputs and flags to pinned memory (`segment_stride`: doubles between the output
    /// segments), then waits for the stream; throws where potrsBatched rejected an argument.
    void copy_outputs_to_host(const ChunkBuffers& b, std::size_t segment_stride,
                              const int* solve_info);
    void record_seconds(const StageEvents& events, StageTimes& times);
    void decompose_blocks(long long nblock);
    /// One call of the batched eigen-solver on `count` consecutive blocks.
    void decompose_batch(double* blocks, double* eigval, int* info, long long count);
    void upload_patches(const std::vector<const PatchGeometry*>& patches, int& max_window_rows);

    const CudaResources& res_;
    MemoryLedger& ledger_;
    DeviceLayout layout_;
    std::size_t max_patches_ = 0;
    PatchChunk box_;
    SpotBox spots_;
    bool batched_eigen_ = true;
    std::size_t eigen_device_bytes_ = 0;
    std::size_t eigen_host_bytes_ = 0;
    int eigen_lwork_ = 0;  // per-matrix syevd fallback

    DeviceArray<double> spot_values_{"spot stamps"};
    DeviceArray<int> spot_corners_{"spot corners"};
    DeviceArray<DevicePatch> patches_{"patch descriptors"};
    PinnedArray<DevicePatch> host_patches_{"patch descriptors"};
    DeviceArray<double> icov_{"iCov"};
    DeviceArray<double> z_{"Z = L^-1 E"};
    DeviceArray<double> cblock_{"covariance blocks"};
    DeviceArray<double> qblock_{"inverse square roots"};
    DeviceArray<double> eigval_{"eigenvalues"};
    DeviceArray<double> frob2_{"Frobenius norms"};
    DeviceArray<double> vectors_{"per-unknown vectors"};  // rhs, x, fluxweight, pixmask
    DeviceArray<double> outputs_{"kept outputs"};
    DeviceArray<double> window_{"window chi2"};
    DeviceArray<int> info_{"info arrays"};  // factor info, eigen info, flags, solve info
    DeviceArray<double*> pointers_{"batched pointer arrays"};
    DeviceArray<char> eigen_work_{"eigen-solver workspace"};
    std::vector<char> eigen_host_work_;
    DeviceArray<char> blas_workspace_{"cuBLAS workspace"};
    double call_seconds_[6] = {};
    PinnedArray<double> host_outputs_{"kept outputs"};
    PinnedArray<int> host_info_{"info arrays"};
};

}  // namespace ex2d::cuda
