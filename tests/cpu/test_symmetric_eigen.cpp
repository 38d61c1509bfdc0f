// SPDX-License-Identifier: BSD-3-Clause
// The eigen-solver of the decorrelation's covariance blocks (our Householder reduction to
// tridiagonal form, then one batched implicit QR for a patch's blocks): on blocks shaped like
// the real ones (74 x 74, condition number ~600), decomposed one at a time and five together,
// it reconstructs the matrix, its eigenvectors are orthonormal, its eigenvalues ascend and
// match LAPACK's QR solver, Q = V diag(w^-1/2) V^T matches LAPACK's to 1e-12, and the strict
// upper triangle is never read. Diagonal, zero and badly conditioned matrices come out right,
// and a matrix with a NaN fails alone.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference_lapack.hpp"
#include "symmetric_eigen.hpp"

namespace ex2d::cpu {
namespace {

// A = V diag(w) V^T with eigenvalues spread over [1, cond] and random orthonormal V
// (Gram-Schmidt on Gaussian columns); column-major, both triangles filled.
std::vector<double> random_spd(int n, double cond, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    std::vector<double> v(size_t(n) * n);
    for (double& x : v) x = normal(rng);
    for (int k = 0; k < n; ++k) {
        double* col = &v[size_t(k) * n];
        for (int j = 0; j < k; ++j) {
            const double* prev = &v[size_t(j) * n];
            double dot = 0;
            for (int i = 0; i < n; ++i) dot += col[i] * prev[i];
            for (int i = 0; i < n; ++i) col[i] -= dot * prev[i];
        }
        double norm = 0;
        for (int i = 0; i < n; ++i) norm += col[i] * col[i];
        for (int i = 0; i < n; ++i) col[i] /= std::sqrt(norm);
    }
    std::vector<double> a(size_t(n) * n, 0.0);
    for (int k = 0; k < n; ++k) {
        const double w = std::pow(cond, n > 1 ? double(k) / (n - 1) : 0.0);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i)
                a[i + size_t(j) * n] += w * v[i + size_t(k) * n] * v[j + size_t(k) * n];
    }
    return a;
}

// Q = V diag(w^-1/2) V^T, column-major.
std::vector<double> inverse_sqrt(int n, const double* values, const double* vectors)
{
    std::vector<double> q(size_t(n) * n, 0.0);
    for (int k = 0; k < n; ++k) {
        const double s = 1.0 / std::sqrt(values[k]);
        const double* v = &vectors[size_t(k) * n];
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) q[i + size_t(j) * n] += s * v[i] * v[j];
    }
    return q;
}

double max_abs(const std::vector<double>& x)
{
    double m = 0;
    for (double v : x) m = std::max(m, std::abs(v));
    return m;
}

// Lower triangle of a, the strict upper one NaN (it must not be read).
std::vector<double> lower_only(int n, std::vector<double> a)
{
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < j; ++i) a[i + size_t(j) * n] = std::numeric_limits<double>::quiet_NaN();
    return a;
}

// Matrix `index` of the solver's last decomposition against `a` and LAPACK's dsyev.
void expect_decomposition_of(const SymmetricEigenSolver& solver, int index, int n,
                             const std::vector<double>& a, double q_tolerance)
{
    SCOPED_TRACE("n " + std::to_string(n) + ", matrix " + std::to_string(index));
    ASSERT_TRUE(solver.converged(index));
    const double* w = solver.eigenvalues(index);
    const double* v = solver.eigenvectors(index);
    const size_t ld = size_t(solver.vector_stride());
    ASSERT_GE(ld, size_t(n));
    for (int k = 1; k < n; ++k) EXPECT_LE(w[k - 1], w[k]) << k;

    const double scale = std::max(max_abs(a), std::numeric_limits<double>::min());
    double reconstruction = 0, orthogonality = 0;
    for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) {
            double vwv = 0, vtv = 0;
            for (int k = 0; k < n; ++k) {
                vwv += v[i + k * ld] * w[k] * v[j + k * ld];
                vtv += v[k + i * ld] * v[k + j * ld];
            }
            reconstruction = std::max(reconstruction, std::abs(vwv - a[i + size_t(j) * n]) / scale);
            orthogonality = std::max(orthogonality, std::abs(vtv - (i == j ? 1.0 : 0.0)));
        }
    }
    EXPECT_LT(reconstruction, 1e-13);
    EXPECT_LT(orthogonality, 1e-13);

    std::vector<double> reference = a;
    std::vector<double> ref_values(static_cast<size_t>(n));
    ASSERT_EQ(lapack::dsyev('V', 'L', n, reference.data(), n, ref_values.data()), 0);
    for (int k = 0; k < n; ++k) EXPECT_NEAR(w[k], ref_values[k], 1e-12 * scale) << k;
    if (q_tolerance <= 0) return;
    std::vector<double> packed(size_t(n) * n);
    for (int k = 0; k < n; ++k)
        for (int i = 0; i < n; ++i) packed[i + size_t(k) * n] = v[i + k * ld];
    const std::vector<double> q = inverse_sqrt(n, w, packed.data());
    const std::vector<double> q_ref = inverse_sqrt(n, ref_values.data(), reference.data());
    double q_error = 0;
    for (size_t i = 0; i < q.size(); ++i) q_error = std::max(q_error, std::abs(q[i] - q_ref[i]));
    EXPECT_LT(q_error / max_abs(q_ref), q_tolerance);
}

TEST(SymmetricEigen, DecomposesCovarianceShapedBlocksAsLapackDoes)
{
    SCOPED_TRACE(SymmetricEigenSolver::implementation());
    SymmetricEigenSolver solver;
    for (const int n : {74, 60, 74, 1, 2}) {  // size changes reuse and regrow the workspace
        const std::vector<double> a = random_spd(n, 657.0, unsigned(n));
        ASSERT_TRUE(solver.decompose(n, lower_only(n, a).data())) << n;
        expect_decomposition_of(solver, 0, n, a, 1e-12);
    }
}

TEST(SymmetricEigen, APatchsFiveBlocksDecomposedTogetherAsEachAlone)
{
    SCOPED_TRACE(SymmetricEigenSolver::implementation());
    const int n = 74, count = 5;
    std::vector<std::vector<double>> blocks;
    std::vector<double> lowers;
    for (int i = 0; i < count; ++i) {
        blocks.push_back(random_spd(n, 100.0 * (i + 1), unsigned(100 + i)));
        const std::vector<double> lower = lower_only(n, blocks.back());
        lowers.insert(lowers.end(), lower.begin(), lower.end());
    }
    SymmetricEigenSolver together, alone;
    ASSERT_TRUE(together.decompose(n, count, lowers.data()));
    for (int i = 0; i < count; ++i) {
        expect_decomposition_of(together, i, n, blocks[size_t(i)], 1e-12);
        ASSERT_TRUE(alone.decompose(n, &lowers[size_t(i) * n * n]));
        for (int k = 0; k < n; ++k)
            EXPECT_EQ(together.eigenvalues(i)[k], alone.eigenvalues()[k]) << i << " " << k;
    }
}

TEST(SymmetricEigen, DiagonalZeroAndBadlyConditionedMatrices)
{
    SCOPED_TRACE(SymmetricEigenSolver::implementation());
    const int n = 74;
    std::vector<double> diagonal(size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) diagonal[i + size_t(i) * n] = double((i * 37) % n) - 20.0;
    const std::vector<double> zero(size_t(n) * n, 0.0);
    // Eigenvalues over [1, 1e12] and a cluster of equal ones.
    const std::vector<double> wide = random_spd(n, 1e12, 7);
    std::vector<double> cluster = random_spd(n, 1.0, 8);
    SymmetricEigenSolver solver;
    for (const std::vector<double>* a :
         std::initializer_list<const std::vector<double>*>{&diagonal, &zero, &wide, &cluster}) {
        ASSERT_TRUE(solver.decompose(n, lower_only(n, *a).data()));
        // Q is only defined for positive definite matrices, and for the wide one it is as
        // uncertain as its smallest eigenvalues (eps times the largest) in any solver.
        expect_decomposition_of(solver, 0, n, *a, a == &cluster ? 1e-10 : 0);
    }
}

TEST(SymmetricEigen, AMatrixWithANanFailsAloneInItsBatch)
{
    SCOPED_TRACE(SymmetricEigenSolver::implementation());
    const int n = 74;
    const std::vector<double> good = random_spd(n, 657.0, 11);
    std::vector<double> bad = good;
    bad[5 + size_t(3) * n] = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> lowers = lower_only(n, good);
    const std::vector<double> bad_lower = lower_only(n, bad);
    lowers.insert(lowers.end(), bad_lower.begin(), bad_lower.end());
    const std::vector<double> last = lower_only(n, good);
    lowers.insert(lowers.end(), last.begin(), last.end());
    SymmetricEigenSolver solver;
    EXPECT_FALSE(solver.decompose(n, 3, lowers.data()));
    EXPECT_FALSE(solver.converged(1));
    expect_decomposition_of(solver, 0, n, good, 1e-12);
    expect_decomposition_of(solver, 2, n, good, 1e-12);
}

}  // namespace
}  // namespace ex2d::cpu
