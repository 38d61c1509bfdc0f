// SPDX-License-Identifier: BSD-3-Clause
// The eigen-solver of the decorrelation's covariance blocks (Eigen's, or LAPACK's dsyevd in
// builds without Eigen): on blocks shaped like the real ones (74 x 74, condition number ~600)
// it reconstructs the matrix, its eigenvectors are orthonormal, its eigenvalues ascend and
// match LAPACK's QR solver, Q = V diag(w^-1/2) V^T matches LAPACK's to 1e-12, and the strict
// upper triangle is never read.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lapack_fortran.hpp"
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
        const double w = std::pow(cond, double(k) / (n - 1));
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

TEST(SymmetricEigen, DecomposesCovarianceShapedBlocksAsLapackDoes)
{
    SCOPED_TRACE(SymmetricEigenSolver::implementation());
    SymmetricEigenSolver solver;
    for (const int n : {74, 60, 74}) {  // a size change and back reuse the workspace
        const std::vector<double> a = random_spd(n, 657.0, unsigned(n));
        std::vector<double> lower = a;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < j; ++i)
                lower[i + size_t(j) * n] = std::numeric_limits<double>::quiet_NaN();
        ASSERT_TRUE(solver.decompose(n, lower.data())) << n;
        const double* w = solver.eigenvalues();
        const double* v = solver.eigenvectors();
        for (int k = 1; k < n; ++k) EXPECT_LE(w[k - 1], w[k]) << k;

        const double scale = max_abs(a);
        double reconstruction = 0, orthogonality = 0;
        for (int j = 0; j < n; ++j) {
            for (int i = 0; i < n; ++i) {
                double vwv = 0, vtv = 0;
                for (int k = 0; k < n; ++k) {
                    vwv += v[i + size_t(k) * n] * w[k] * v[j + size_t(k) * n];
                    vtv += v[k + size_t(i) * n] * v[k + size_t(j) * n];
                }
                reconstruction =
                    std::max(reconstruction, std::abs(vwv - a[i + size_t(j) * n]) / scale);
                orthogonality = std::max(orthogonality, std::abs(vtv - (i == j ? 1.0 : 0.0)));
            }
        }
        EXPECT_LT(reconstruction, 1e-13) << n;
        EXPECT_LT(orthogonality, 1e-13) << n;

        std::vector<double> reference = a;
        std::vector<double> ref_values(static_cast<size_t>(n));
        ASSERT_EQ(lapack::dsyev('V', 'L', n, reference.data(), n, ref_values.data()), 0);
        for (int k = 0; k < n; ++k)
            EXPECT_NEAR(w[k], ref_values[k], 1e-12 * ref_values[n - 1]) << k;
        const std::vector<double> q = inverse_sqrt(n, w, v);
        const std::vector<double> q_ref = inverse_sqrt(n, ref_values.data(), reference.data());
        double q_error = 0;
        for (size_t i = 0; i < q.size(); ++i)
            q_error = std::max(q_error, std::abs(q[i] - q_ref[i]));
        EXPECT_LT(q_error / max_abs(q_ref), 1e-12) << n;
    }
}

}  // namespace
}  // namespace ex2d::cpu
