// SPDX-License-Identifier: BSD-3-Clause
// The Householder reduction of the decorrelation's covariance blocks to tridiagonal form,
// A = Q T Q^T: for sizes around the four-wide vector blocks and the real 74, Q is orthonormal
// with zero padding rows, Q T Q^T rebuilds A, T has A's eigenvalues (LAPACK's dsyev on both),
// and the strict upper triangle is never read. Power-of-two scalings of A give exactly
// scaled results, a matrix that is already tridiagonal comes back unchanged with Q = I, and a
// workspace reused across sizes gives what a fresh one gives.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference_lapack.hpp"
#include "tridiagonal_reduction.hpp"

namespace ex2d::cpu {
namespace {

struct Reduced {
    int ldq = 0;
    std::vector<double> diagonal, off_diagonal, q;
};

Reduced reduce(int n, const std::vector<double>& lower, TridiagonalReductionWorkspace& ws)
{
    Reduced r;
    r.ldq = (n + 3) / 4 * 4;
    r.diagonal.assign(size_t(n), std::numeric_limits<double>::quiet_NaN());
    r.off_diagonal.assign(size_t(std::max(n - 1, 0)), std::numeric_limits<double>::quiet_NaN());
    r.q.assign(size_t(r.ldq) * n, std::numeric_limits<double>::quiet_NaN());
    reduce_to_tridiagonal(n, lower.data(), r.diagonal.data(), r.off_diagonal.data(), r.q.data(),
                          r.ldq, ws);
    return r;
}

// Symmetric with Gaussian entries (indefinite, like no covariance block, to test the general
// case), column-major, both triangles filled.
std::vector<double> random_symmetric(int n, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    std::vector<double> a(size_t(n) * n);
    for (int j = 0; j < n; ++j) {
        for (int i = j; i < n; ++i) {
            const double x = normal(rng);
            a[i + size_t(j) * n] = x;
            a[j + size_t(i) * n] = x;
        }
    }
    return a;
}

std::vector<double> lower_only(int n, std::vector<double> a)
{
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < j; ++i) a[i + size_t(j) * n] = std::numeric_limits<double>::quiet_NaN();
    return a;
}

std::vector<double> eigenvalues(int n, std::vector<double> a)
{
    std::vector<double> w(static_cast<size_t>(n));
    EXPECT_EQ(lapack::dsyev('N', 'L', n, a.data(), n, w.data()), 0);
    return w;
}

void expect_reduction_of(int n, const std::vector<double>& a, const Reduced& r)
{
    SCOPED_TRACE("n " + std::to_string(n));
    double scale = 0;
    for (double x : a) scale = std::max(scale, std::abs(x));
    std::vector<double> t(size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) t[i + size_t(i) * n] = r.diagonal[size_t(i)];
    for (int i = 0; i + 1 < n; ++i) {
        t[i + 1 + size_t(i) * n] = r.off_diagonal[size_t(i)];
        t[i + size_t(i + 1) * n] = r.off_diagonal[size_t(i)];
    }
    const auto q = [&](int i, int j) { return r.q[size_t(i) + size_t(j) * r.ldq]; };
    double orthogonality = 0, reconstruction = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
            double qtq = 0, qtqt = 0;
            for (int k = 0; k < n; ++k) {
                qtq += q(k, i) * q(k, j);
                for (int l = 0; l < n; ++l) qtqt += q(i, k) * t[k + size_t(l) * n] * q(j, l);
            }
            orthogonality = std::max(orthogonality, std::abs(qtq - (i == j ? 1.0 : 0.0)));
            reconstruction = std::max(reconstruction, std::abs(qtqt - a[i + size_t(j) * n]));
        }
    }
    EXPECT_LT(orthogonality, 1e-14 * (n + 1));
    EXPECT_LT(reconstruction, 1e-14 * (n + 1) * scale);
    for (int j = 0; j < n; ++j)
        for (int i = n; i < r.ldq; ++i) EXPECT_EQ(q(i, j), 0.0) << "padding row " << i;
    const std::vector<double> expected = eigenvalues(n, a), got = eigenvalues(n, t);
    for (int k = 0; k < n; ++k) EXPECT_NEAR(got[size_t(k)], expected[size_t(k)], 1e-13 * n * scale);
}

TEST(TridiagonalReduction, RebuildsTheMatrixAndKeepsItsEigenvalues)
{
    for (const int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 74}) {
        const std::vector<double> a = random_symmetric(n, unsigned(n));
        TridiagonalReductionWorkspace ws;
        expect_reduction_of(n, a, reduce(n, lower_only(n, a), ws));
    }
}

TEST(TridiagonalReduction, PowerOfTwoScalingsGiveExactlyScaledResults)
{
    const int n = 74;
    const std::vector<double> a = random_symmetric(n, 21);
    TridiagonalReductionWorkspace ws;
    const Reduced plain = reduce(n, lower_only(n, a), ws);
    for (const int exponent : {700, -700}) {
        SCOPED_TRACE("2^" + std::to_string(exponent));
        std::vector<double> scaled = a;
        for (double& x : scaled) x = std::ldexp(x, exponent);
        const Reduced r = reduce(n, lower_only(n, scaled), ws);
        for (int i = 0; i < n; ++i)
            EXPECT_EQ(r.diagonal[size_t(i)], std::ldexp(plain.diagonal[size_t(i)], exponent));
        for (int i = 0; i + 1 < n; ++i)
            EXPECT_EQ(r.off_diagonal[size_t(i)],
                      std::ldexp(plain.off_diagonal[size_t(i)], exponent));
        EXPECT_EQ(r.q, plain.q);
    }
}

TEST(TridiagonalReduction, ATridiagonalMatrixComesBackUnchanged)
{
    const int n = 11;
    std::vector<double> a(size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) a[i + size_t(i) * n] = 1.5 * i - 4.0;
    for (int i = 0; i + 1 < n; ++i) {
        const double e = i % 3 == 0 ? 0.0 : 0.25 * (i + 1);
        a[i + 1 + size_t(i) * n] = e;
        a[i + size_t(i + 1) * n] = e;
    }
    TridiagonalReductionWorkspace ws;
    const Reduced r = reduce(n, lower_only(n, a), ws);
    for (int i = 0; i < n; ++i) EXPECT_EQ(r.diagonal[size_t(i)], a[i + size_t(i) * n]) << i;
    for (int i = 0; i + 1 < n; ++i)
        EXPECT_EQ(r.off_diagonal[size_t(i)], a[i + 1 + size_t(i) * n]) << i;
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < r.ldq; ++i)
            EXPECT_EQ(r.q[size_t(i) + size_t(j) * r.ldq], i == j ? 1.0 : 0.0) << i << " " << j;
}

TEST(TridiagonalReduction, AReusedWorkspaceGivesWhatAFreshOneGives)
{
    TridiagonalReductionWorkspace reused;
    for (const int n : {74, 5, 74, 30}) {
        SCOPED_TRACE("n " + std::to_string(n));
        const std::vector<double> lower = lower_only(n, random_symmetric(n, unsigned(50 + n)));
        TridiagonalReductionWorkspace fresh;
        const Reduced a = reduce(n, lower, reused), b = reduce(n, lower, fresh);
        EXPECT_EQ(a.diagonal, b.diagonal);
        EXPECT_EQ(a.off_diagonal, b.off_diagonal);
        EXPECT_EQ(a.q, b.q);
    }
}

}  // namespace
}  // namespace ex2d::cpu
