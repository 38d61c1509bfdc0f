// SPDX-License-Identifier: BSD-3-Clause
// The decorrelation's eigen-decompositions alone (B&S eqs. 10-19), on covariance-shaped
// 74 x 74 blocks, five a call as a patch has them: ex2d-eigen-bench [--repeat N] [--size N]
// Times our Householder reduction to tridiagonal form (with Q) against LAPACK's dsytrd and
// dorgtr on the same blocks in the same loop, alternately, so that a busy machine slows both
// alike; then the CPU backend's whole decomposition (reduction and batched QR), and checks
// its eigenvalues against LAPACK's dsyev. Prints microseconds of this thread's CPU time a block.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <random>
#include <vector>

#include <CLI/CLI.hpp>

#include "blas_threads.hpp"
#include "cpu_clock.hpp"
#include "reference_lapack.hpp"
#include "symmetric_eigen.hpp"
#include "tridiagonal_reduction.hpp"

extern "C" {
void dsytrd_(const char* uplo, const int* n, double* a, const int* lda, double* d, double* e,
             double* tau, double* work, const int* lwork, int* info, std::size_t uplo_len);
void dorgtr_(const char* uplo, const int* n, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info, std::size_t uplo_len);
}

namespace {

// B diag(exp(-k / 7)) B^T + 1e-6 I with Gaussian B: symmetric positive definite, eigenvalues
// spread over about five decades as a covariance block's are; column-major, both triangles.
std::vector<double> covariance_shaped(int n, std::mt19937& rng)
{
    std::normal_distribution<double> normal;
    std::vector<double> b(std::size_t(n) * n), a(std::size_t(n) * n);
    for (double& x : b) x = normal(rng);
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
            double sum = 0;
            for (int k = 0; k < n; ++k)
                sum += b[i + std::size_t(k) * n] * b[j + std::size_t(k) * n] * std::exp(-k / 7.0);
            a[i + std::size_t(j) * n] = sum + (i == j ? 1e-6 : 0.0);
        }
    }
    return a;
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"The covariance blocks' eigen-decompositions: ours against LAPACK's"};
    int repeat = 200, n = 74;
    const int count = 5;
    app.add_option("--repeat", repeat, "Passes over the five blocks")->check(CLI::PositiveNumber);
    app.add_option("--size", n, "Block size (desi_proc's grids give 74)")
        ->check(CLI::Range(3, 512));
    CLI11_PARSE(app, argc, argv);

    // One thread, as the CPU backend runs its BLAS (parallelism comes from patches).
    const char* blas = ex2d::use_single_threaded_blas();
    std::mt19937 rng(7);
    std::vector<double> blocks;
    for (int c = 0; c < count; ++c) {
        const std::vector<double> a = covariance_shaped(n, rng);
        blocks.insert(blocks.end(), a.begin(), a.end());
    }
    const std::size_t square = std::size_t(n) * n;
    const int ldq = (n + 3) / 4 * 4;
    std::vector<double> work_matrix(square), d(n), e(n), tau(n), q(std::size_t(ldq) * n);
    const int lwork = 64 * n;
    std::vector<double> work(lwork);
    ex2d::cpu::TridiagonalReductionWorkspace reduction;
    double lapack_s = 0, ours_s = 0;
    for (int r = 0; r < repeat; ++r) {
        for (int c = 0; c < count; ++c) {
            const double* a = &blocks[c * square];
            std::copy(a, a + square, work_matrix.begin());
            int info = 0;
            const double t0 = ex2d::cpu::thread_cpu_seconds();
            dsytrd_("L", &n, work_matrix.data(), &n, d.data(), e.data(), tau.data(), work.data(),
                    &lwork, &info, 1);
            if (info == 0)
                dorgtr_("L", &n, work_matrix.data(), &n, tau.data(), work.data(), &lwork, &info, 1);
            const double t1 = ex2d::cpu::thread_cpu_seconds();
            ex2d::cpu::reduce_to_tridiagonal(n, a, d.data(), e.data(), q.data(), ldq, reduction);
            const double t2 = ex2d::cpu::thread_cpu_seconds();
            if (info != 0) {
                std::fprintf(stderr, "dsytrd/dorgtr failed: info %d\n", info);
                return 1;
            }
            lapack_s += t1 - t0;
            ours_s += t2 - t1;
        }
    }
    const double per_block = 1e6 / (double(repeat) * count);
    std::printf("blocks %d x %d, %d a call, %d passes; LAPACK from %s, one thread\n", n, n, count,
                repeat, blas);
    std::printf(
        "tridiagonal form and Q: LAPACK dsytrd+dorgtr %.1f us a block, ours %.1f us "
        "(%.2fx)\n",
        lapack_s * per_block, ours_s * per_block, lapack_s / ours_s);

    ex2d::cpu::SymmetricEigenSolver solver;
    const double t0 = ex2d::cpu::thread_cpu_seconds();
    bool converged = true;
    for (int r = 0; r < repeat; ++r)
        converged = solver.decompose(n, count, blocks.data()) && converged;
    const double whole_s = ex2d::cpu::thread_cpu_seconds() - t0;
    double worst = 0;
    for (int c = 0; c < count; ++c) {
        std::vector<double> a(blocks.begin() + c * square, blocks.begin() + (c + 1) * square);
        std::vector<double> w(n);
        if (ex2d::lapack::dsyev('N', 'L', n, a.data(), n, w.data()) != 0) {
            std::fprintf(stderr, "dsyev failed on block %d\n", c);
            return 1;
        }
        const double* ours = solver.eigenvalues(c);
        for (int k = 0; k < n; ++k) worst = std::max(worst, std::abs(ours[k] - w[k]) / w[n - 1]);
    }
    std::printf(
        "whole decomposition (reduction + batched QR): %.1f us a block; eigenvalues "
        "against dsyev's: %.1e of the largest%s\n",
        whole_s * per_block, worst, converged ? "" : "; NOT CONVERGED");
    return converged ? 0 : 1;
}
