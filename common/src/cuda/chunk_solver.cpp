// SPDX-License-Identifier: BSD-3-Clause
#include "chunk_solver.hpp"

#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "indefinite_patch.hpp"
#include "ex2d/logging.hpp"
#include "ex2d/status.hpp"

namespace ex2d::cuda {

namespace {

constexpr double kOne = 1.0;
constexpr double kZero = 0.0;

// Offsets of the segments packed into the shared arrays, for chunks of up to `capacity`
// patches; fixed by the capacity so the batched pointer arrays stay valid.
struct Segments {
    long long capacity, n, ncol, nblock, nw, kept, ndiag;
    Segments(const DeviceLayout& l, std::size_t cap)
        : capacity(cap),
          n(l.nunknown()),
          ncol((long long)l.ncore * l.nwave),
          nblock((long long)cap * l.ncore),
          nw(l.nwave),
          kept(nblock * l.ncore_wave),
          ndiag(l.ndiag)
    {
    }
    std::size_t icov() const { return capacity * n * n; }
    std::size_t z() const { return capacity * n * ncol; }
    std::size_t block() const { return nblock * nw * nw; }
    std::size_t vectors() const { return 4 * capacity * n; }
    std::size_t outputs() const { return kept * (5 + ndiag); }
    std::size_t info() const { return 2 * capacity + nblock + 1; }
};

}  // namespace

ChunkSolver::ChunkSolver(const CudaResources& resources, MemoryLedger& ledger)
    : res_(resources), ledger_(ledger)
{
    // cuBLAS would otherwise allocate its workspace outside the ledger; 32 MiB is what its
    // documentation recommends for Hopper.
    blas_workspace_.reserve(kBlasWorkspaceBytes, ledger_);
    EX2D_CUDA_CHECK(cuda_libraries().cublasSetWorkspace(res_.blas(), blas_workspace_.data(),
                                                        kBlasWorkspaceBytes));
}

EigenWorkspace ChunkSolver::eigen_workspace(const DeviceLayout& layout)
{
    batched_eigen_ = true;
    const int nw = layout.nwave;
    DeviceArray<double> probe("eigen-solver probe");
    probe.reserve(std::size_t(nw) * nw + nw, ledger_);
    const long long batches[2] = {64LL * layout.ncore, 128LL * layout.ncore};
    std::size_t device_bytes[2] = {0, 0}, host_bytes = 0;
    for (int i = 0; i < 2; ++i) {
        const cusolverStatus_t status = cuda_libraries().cusolverDnXsyevBatched_bufferSize(
            res_.solver(), res_.solver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
            nw, CUDA_R_64F, probe.data(), nw, CUDA_R_64F, probe.data() + std::size_t(nw) * nw,
            CUDA_R_64F, &device_bytes[i], &host_bytes, batches[i]);
        if (status == CUSOLVER_STATUS_NOT_SUPPORTED || status == CUSOLVER_STATUS_INVALID_VALUE) {
            // This cuSOLVER has no batched eigen-solver for blocks of this size: fall back to
            // one syevd per block (correct, slower), and say so.
            batched_eigen_ = false;
            EX2D_CUDA_CHECK(cuda_libraries().cusolverDnDsyevd_bufferSize(
                res_.solver(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nw, probe.data(),
                nw, probe.data() + std::size_t(nw) * nw, &eigen_lwork_));
            logger()->warn(
                "cusolverDnXsyevBatched does not take {} x {} blocks ({}); using one "
                "syevd per block",
                nw, nw, cusolver_status_name(status));
            return {std::size_t(eigen_lwork_) * sizeof(double), 0};
        }
        EX2D_CUDA_CHECK(status);
    }
    logger()->info(
        "cusolverDnXsyevBatched takes the {} x {} covariance blocks: batched eigen-solver", nw, nw);
    // Linear in the batch from two probes: a fixed part and a part per patch.
    const std::size_t per_patch =
        device_bytes[1] > device_bytes[0] ? (device_bytes[1] - device_bytes[0] + 63) / 64 : 0;
    const std::size_t fixed =
        device_bytes[0] > 64 * per_patch ? device_bytes[0] - 64 * per_patch : 0;
    return {fixed, per_patch};
}

void ChunkSolver::reserve(const DeviceLayout& layout, const ChunkPlan& plan, std::size_t slots,
                          bool resize)
{
    if (slots < plan.max_patches)
        throw Error("CUDA backend: fewer patch slots than the plan needs");
    if (resize) {
        spot_values_.release();
        spot_corners_.release();
        patches_.release();
        icov_.release();
        z_.release();
        cblock_.release();
        qblock_.release();
        eigval_.release();
        frob2_.release();
        vectors_.release();
        outputs_.release();
        window_.release();
        info_.release();
        pointers_.release();
        eigen_work_.release();
    }
    layout_ = layout;
    max_patches_ = slots;
    const Segments seg(layout, max_patches_);
    patches_.reserve(max_patches_, ledger_);
    host_patches_.reserve(max_patches_);
    icov_.reserve(seg.icov(), ledger_);
    z_.reserve(seg.z(), ledger_);
    cblock_.reserve(seg.block(), ledger_);
    qblock_.reserve(seg.block(), ledger_);
    eigval_.reserve(seg.nblock * seg.nw, ledger_);
    frob2_.reserve(seg.nblock, ledger_);
    vectors_.reserve(seg.vectors(), ledger_);
    outputs_.reserve(seg.outputs(), ledger_);
    host_outputs_.reserve(seg.outputs());
    window_.reserve(2 * std::max<std::size_t>(plan.max_window_pixels, 1), ledger_);
    info_.reserve(seg.info(), ledger_);
    host_info_.reserve(seg.info());
    pointers_.reserve(3 * max_patches_, ledger_);

    if (batched_eigen_) {
        std::size_t host_bytes = 0;
        EX2D_CUDA_CHECK(cuda_libraries().cusolverDnXsyevBatched_bufferSize(
            res_.solver(), res_.solver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
            layout.nwave, CUDA_R_64F, cblock_.data(), layout.nwave, CUDA_R_64F, eigval_.data(),
            CUDA_R_64F, &eigen_device_bytes_, &host_bytes, std::min(seg.nblock, kMaxEigenBatch)));
        eigen_work_.reserve(std::max<std::size_t>(eigen_device_bytes_, 1), ledger_);
        eigen_host_bytes_ = host_bytes;
        eigen_host_work_.resize(std::max<std::size_t>(host_bytes, 1));
    } else {
        eigen_work_.reserve(std::size_t(std::max(eigen_lwork_, 1)) * sizeof(double), ledger_);
    }

    // Pointer arrays of the batched calls: iCov, x and Z of patch slot p.
    std::vector<double*> host_pointers(3 * max_patches_);
    for (std::size_t p = 0; p < max_patches_; ++p) {
        host_pointers[p] = icov_.data() + p * seg.n * seg.n;
        host_pointers[max_patches_ + p] = vectors_.data() + seg.capacity * seg.n + p * seg.n;
        host_pointers[2 * max_patches_ + p] = z_.data() + p * seg.n * seg.ncol;
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(pointers_.data(), host_pointers.data(),
                                    host_pointers.size() * sizeof(double*), cudaMemcpyHostToDevice,
                                    res_.stream()));
    EX2D_CUDA_CHECK(cudaStreamSynchronize(res_.stream()));
}

ChunkBuffers ChunkSolver::buffers(int npatch) const
{
    const Segments seg(layout_, max_patches_);
    ChunkBuffers b;
    b.npatch = npatch;
    b.patches = patches_.data();
    b.icov = icov_.data();
    b.z = z_.data();
    b.cblock = cblock_.data();
    b.qblock = qblock_.data();
    b.eigval = eigval_.data();
    b.frob2 = frob2_.data();
    b.factor_info = info_.data();
    b.eig_info = info_.data() + seg.capacity;
    b.flags = info_.data() + seg.capacity + seg.nblock;
    const std::size_t nvec = seg.capacity * seg.n;
    b.rhs = vectors_.data();
    b.x = vectors_.data() + nvec;
    b.fluxweight = vectors_.data() + 2 * nvec;
    b.pixmask = vectors_.data() + 3 * nvec;
    b.out_flux = outputs_.data();
    b.out_ivar = outputs_.data() + seg.kept;
    b.out_xflux = outputs_.data() + 2 * seg.kept;
    b.out_chi2pix = outputs_.data() + 3 * seg.kept;
    b.out_pixmask = outputs_.data() + 4 * seg.kept;
    b.out_resolution = outputs_.data() + 5 * seg.kept;
    b.window_chi2 = window_.data();
    b.window_weight = window_.data() + window_.capacity() / 2;
    return b;
}

HostOutputs ChunkSolver::host_outputs() const
{
    const Segments seg(layout_, max_patches_);
    const double* h = host_outputs_.data();
    return {
        h, h + seg.kept, h + 2 * seg.kept, h + 3 * seg.kept, h + 4 * seg.kept, h + 5 * seg.kept};
}

void ChunkSolver::evaluate_spots(const DevicePsf& psf, const double* padded_waves,
                                 const PatchChunk& chunk, StageTimes& times)
{
    box_ = chunk;
    const int ny = 2 * psf.hsizey + 1, nx = 2 * psf.hsizex + 1;
    spot_values_.reserve(chunk.nspot() * ny * nx, ledger_);
    spot_corners_.reserve(2 * chunk.nspot(), ledger_);
    spots_ = SpotBox{spot_values_.data(),
                     spot_corners_.data(),
                     spot_corners_.data() + chunk.nspot(),
                     chunk.fiber_begin,
                     chunk.fiber_end - chunk.fiber_begin,
                     chunk.wave_end - chunk.wave_begin,
                     ny,
                     nx};
    StageEvents events;
    events.mark(0, res_.stream());
    launch_spots(psf, padded_waves + chunk.wave_begin, spots_, res_.stream());
    events.mark(1, res_.stream());
    EX2D_CUDA_CHECK(cudaStreamSynchronize(res_.stream()));
    times.psf += events.seconds(0, 1);
}

void ChunkSolver::upload_patches(const std::vector<const PatchGeometry*>& patches,
                                 int& max_window_rows)
{
    long long window_offset = 0;
    max_window_rows = 0;
    for (std::size_t i = 0; i < patches.size(); ++i) {
        const PatchGeometry& p = *patches[i];
        DevicePatch d;
        d.spot_fiber = p.fiber_begin - box_.fiber_begin;
        d.spot_wave = p.wave_begin - box_.wave_begin;
        d.nfiber = p.nfiber();
        d.core_slot = p.core_fiber_begin - p.fiber_begin;
        d.ncore_wave = p.ncore_wave;
        d.row_begin = p.row_begin;
        d.row_end = p.row_end;
        d.col_begin = p.col_begin;
        d.col_end = p.col_end;
        d.window_offset = window_offset;
        if (p.fiber_begin < box_.fiber_begin || p.fiber_end > box_.fiber_end ||
            p.wave_begin < box_.wave_begin || p.wave_begin + p.nwave > box_.wave_end) {
            throw Error("CUDA backend: patch outside the chunk's spot box (bundle " +
                        std::to_string(p.bundle) + ")");
        }
        window_offset += (long long)(p.row_end - p.row_begin) * (p.col_end - p.col_begin);
        max_window_rows = std::max(max_window_rows, p.row_end - p.row_begin);
        host_patches_[i] = d;
    }
    if (std::size_t(window_offset) > window_.capacity() / 2) {
        throw Error("CUDA backend: chunk windows exceed the planned window buffer");
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(patches_.data(), host_patches_.data(),
                                    patches.size() * sizeof(DevicePatch), cudaMemcpyHostToDevice,
                                    res_.stream()));
}

void ChunkSolver::decompose_batch(double* blocks, double* eigval, int* info, long long count)
{
    const int nw = layout_.nwave;
    std::size_t device_bytes = 0, host_bytes = 0;
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnXsyevBatched_bufferSize(
        res_.solver(), res_.solver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nw,
        CUDA_R_64F, blocks, nw, CUDA_R_64F, eigval, CUDA_R_64F, &device_bytes, &host_bytes, count));
    if (device_bytes > eigen_work_.capacity() || host_bytes > eigen_host_work_.size()) {
        // Grow rather than lose the frame; the ledger records it and the next plan sees it.
        logger()->warn(
            "eigen-solver workspace grows beyond the plan: {} MiB device, {} KiB host for {} "
            "blocks",
            device_bytes >> 20, host_bytes >> 10, count);
        eigen_work_.reserve(device_bytes, ledger_);
        if (host_bytes > eigen_host_work_.size()) eigen_host_work_.resize(host_bytes);
        eigen_device_bytes_ = std::max(eigen_device_bytes_, device_bytes);
    }
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnXsyevBatched(
        res_.solver(), res_.solver_params(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nw,
        CUDA_R_64F, blocks, nw, CUDA_R_64F, eigval, CUDA_R_64F, eigen_work_.data(), device_bytes,
        eigen_host_work_.data(), host_bytes, info, count));
}

void ChunkSolver::decompose_blocks(long long nblock)
{
    const int nw = layout_.nwave;
    const ChunkBuffers b = buffers(0);
    if (batched_eigen_) {
        for (long long first = 0; first < nblock; first += kMaxEigenBatch) {
            const long long count = std::min(kMaxEigenBatch, nblock - first);
            decompose_batch(b.cblock + first * nw * nw, b.eigval + first * nw, b.eig_info + first,
                            count);
        }
        return;
    }
    for (long long k = 0; k < nblock; ++k) {
        EX2D_CUDA_CHECK(cuda_libraries().cusolverDnDsyevd(
            res_.solver(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nw,
            b.cblock + k * nw * nw, nw, b.eigval + k * nw,
            reinterpret_cast<double*>(eigen_work_.data()), eigen_lwork_, b.eig_info + k));
    }
}

std::vector<int> ChunkSolver::solve(const std::vector<const PatchGeometry*>& patches,
                                    const DeviceImage& image, double regularize, double psferr,
                                    StageTimes& times)
{
    const int npatch = int(patches.size());
    if (npatch == 0) return {};
    if (std::size_t(npatch) > max_patches_) throw Error("CUDA backend: chunk larger than planned");
    const Segments seg(layout_, max_patches_);
    const long long nblock = (long long)npatch * layout_.ncore;
    cudaStream_t stream = res_.stream();
    int max_window_rows = 0;
    upload_patches(patches, max_window_rows);
    const ChunkBuffers b = buffers(npatch);
    int* solve_info = info_.data() + 2 * seg.capacity + seg.nblock;

    StageEvents events;
    events.mark(0, stream);
    build_system(patches, b, image, regularize, solve_info);
    events.mark(1, stream);
    factor_and_solve(b, solve_info, events);
    events.mark(2, stream);
    decorrelate(b, nblock, events);
    events.mark(3, stream);
    launch_window_chi2(layout_, image, spots_, b, psferr, max_window_rows, stream);
    launch_chi2pix(layout_, spots_, b, stream);
    events.mark(4, stream);
    copy_outputs_to_host(b, std::size_t(seg.kept), solve_info);
    record_seconds(events, times);
    return std::vector<int>(host_info_.data(), host_info_.data() + npatch);
}

void ChunkSolver::build_system(const std::vector<const PatchGeometry*>& patches,
                               const ChunkBuffers& b, const DeviceImage& image, double regularize,
                               int* solve_info)
{
    const int npatch = b.npatch, n = layout_.nunknown(), ncol = layout_.ncore * layout_.nwave;
    const long long nblock = (long long)npatch * layout_.ncore;
    cudaStream_t stream = res_.stream();
    EX2D_CUDA_CHECK(
        cudaMemsetAsync(b.icov, 0, std::size_t(npatch) * n * n * sizeof(double), stream));
    EX2D_CUDA_CHECK(
        cudaMemsetAsync(b.z, 0, std::size_t(npatch) * n * ncol * sizeof(double), stream));
    EX2D_CUDA_CHECK(cudaMemsetAsync(b.flags, 0, npatch * sizeof(int), stream));
    EX2D_CUDA_CHECK(cudaMemsetAsync(b.factor_info, 0, npatch * sizeof(int), stream));
    EX2D_CUDA_CHECK(cudaMemsetAsync(b.eig_info, 0, nblock * sizeof(int), stream));
    // potrsBatched's single info reports only a wrong argument, and nothing documents that it
    // is written on success: a stale or uninitialised value would read back as a rejection.
    EX2D_CUDA_CHECK(cudaMemsetAsync(solve_info, 0, sizeof(int), stream));
    launch_gather(layout_, image, spots_, b, stream);
    launch_icov(layout_, image, spots_, b, stream);
    launch_regularize(layout_, b, regularize, stream);
    // The tests' seam (indefinite_patch.hpp); compiled away in builds without test hooks.
    static const double indefinite = -1.0;
    for (std::size_t k = 0; k < patches.size(); ++k) {
        if (!test_hooks::is_forced_indefinite(*patches[k])) continue;
        EX2D_CUDA_CHECK(cudaMemcpyAsync(b.icov + k * n * n, &indefinite, sizeof indefinite,
                                        cudaMemcpyHostToDevice, stream));
    }
}

void ChunkSolver::factor_and_solve(const ChunkBuffers& b, int* solve_info, StageEvents& events)
{
    const int npatch = b.npatch, n = layout_.nunknown(), ncol = layout_.ncore * layout_.nwave;
    const int nw = layout_.nwave;
    const long long nblock = (long long)npatch * layout_.ncore;
    cudaStream_t stream = res_.stream();
    double* const* icov_ptrs = pointers_.data();
    double* const* x_ptrs = pointers_.data() + max_patches_;
    double* const* z_ptrs = pointers_.data() + 2 * max_patches_;
    // B&S eq. 4 by Cholesky: iCov = L L^T, x = iCov^-1 y, and Z = L^-1 E so that the
    // diagonal blocks of C = iCov^-1 are C_ss = Z_s^T Z_s (no full inverse is formed).
    // Marks 5-9 time each library call for the benchmark's per-call split.
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnDpotrfBatched(res_.solver(), CUBLAS_FILL_MODE_LOWER,
                                                             n, const_cast<double**>(icov_ptrs), n,
                                                             b.factor_info, npatch));
    launch_mark_factor_failures(b, stream);
    events.mark(5, stream);
    EX2D_CUDA_CHECK(cuda_libraries().cusolverDnDpotrsBatched(
        res_.solver(), CUBLAS_FILL_MODE_LOWER, n, 1, const_cast<double**>(icov_ptrs), n,
        const_cast<double**>(x_ptrs), n, solve_info, npatch));
    launch_unit_columns(layout_, b, stream);
    events.mark(6, stream);
    EX2D_CUDA_CHECK(cuda_libraries().cublasDtrsmBatched(
        res_.blas(), CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n,
        ncol, &kOne, const_cast<const double* const*>(icov_ptrs), n, z_ptrs, n, npatch));
    events.mark(7, stream);
    EX2D_CUDA_CHECK(cuda_libraries().cublasDgemmStridedBatched(
        res_.blas(), CUBLAS_OP_T, CUBLAS_OP_N, nw, nw, n, &kOne, b.z, n, (long long)n * nw, b.z, n,
        (long long)n * nw, &kZero, b.cblock, nw, (long long)nw * nw, nblock));
}

void ChunkSolver::decorrelate(const ChunkBuffers& b, long long nblock, StageEvents& events)
{
    const int nw = layout_.nwave;
    cudaStream_t stream = res_.stream();
    launch_frobenius(layout_, b, stream);
    decompose_blocks(nblock);
    events.mark(8, stream);
    launch_scale_eigenvectors(layout_, b, stream);
    EX2D_CUDA_CHECK(cuda_libraries().cublasDgemmStridedBatched(
        res_.blas(), CUBLAS_OP_N, CUBLAS_OP_T, nw, nw, nw, &kOne, b.cblock, nw, (long long)nw * nw,
        b.cblock, nw, (long long)nw * nw, &kZero, b.qblock, nw, (long long)nw * nw, nblock));
    events.mark(9, stream);
    launch_finalize(layout_, b, stream);
}

void ChunkSolver::copy_outputs_to_host(const ChunkBuffers& b, std::size_t segment_stride,
                                       const int* solve_info)
{
    const int npatch = b.npatch;
    cudaStream_t stream = res_.stream();
    const std::size_t kept = std::size_t(npatch) * layout_.ncore * layout_.ncore_wave;
    const std::size_t segments[6] = {kept, kept, kept, kept, kept, kept * layout_.ndiag};
    for (int s = 0; s < 6; ++s) {
        const std::size_t offset = std::size_t(s) * segment_stride;
        EX2D_CUDA_CHECK(cudaMemcpyAsync(host_outputs_.data() + offset, outputs_.data() + offset,
                                        segments[s] * sizeof(double), cudaMemcpyDeviceToHost,
                                        stream));
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(host_info_.data(), b.flags, npatch * sizeof(int),
                                    cudaMemcpyDeviceToHost, stream));
    EX2D_CUDA_CHECK(cudaMemcpyAsync(host_info_.data() + npatch, solve_info, sizeof(int),
                                    cudaMemcpyDeviceToHost, stream));
    EX2D_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (host_info_[npatch] != 0) {
        throw Error("CUDA backend: cusolverDnDpotrsBatched rejected argument " +
                    std::to_string(-host_info_[npatch]));
    }
}

void ChunkSolver::record_seconds(const StageEvents& events, StageTimes& times)
{
    times.build += events.seconds(0, 1);
    times.solve += events.seconds(1, 2);
    times.decorrelate += events.seconds(2, 3);
    times.chi2 += events.seconds(3, 4);
    const int call_marks[7] = {1, 5, 6, 7, 2, 8, 9};
    for (int k = 0; k < 6; ++k)
        call_seconds_[k] += events.seconds(call_marks[k], call_marks[k + 1]);
}

std::vector<std::pair<std::string, double>> ChunkSolver::call_seconds() const
{
    static const char* const names[6] = {"potrfBatched", "potrsBatched", "trsmBatched",
                                         "gemm C=Z^TZ",  "syevBatched",  "gemm Q=BB^T"};
    std::vector<std::pair<std::string, double>> out;
    out.reserve(6);
    for (int k = 0; k < 6; ++k) out.emplace_back(names[k], call_seconds_[k]);
    return out;
}

}  // namespace ex2d::cuda
