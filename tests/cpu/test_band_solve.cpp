// SPDX-License-Identifier: BSD-3-Clause
// The band kernels behind the solve and the covariance blocks: the Cholesky factorization
// against LAPACK's dpbtrf (factor and failure row), and the forward substitution Z = L^-1 E
// against a plain dense substitution (values, exact zeros above each unit row, padding).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "band_solve.hpp"
#include "reference_lapack.hpp"

namespace ex2d::cpu {
namespace {

// A random symmetric band matrix in LAPACK lower band storage, positive definite when the
// diagonal dominates.
std::vector<double> random_band(int m, int kd, double diagonal, unsigned seed)
{
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::vector<double> band(size_t(kd + 1) * m, 0.0);
    for (int j = 0; j < m; ++j) {
        band[size_t(j) * (kd + 1)] = diagonal + uniform(rng);
        for (int d = 1; d <= kd && j + d < m; ++d) band[d + size_t(j) * (kd + 1)] = uniform(rng);
    }
    return band;
}

TEST(BandSolve, CholeskyMatchesLapack)
{
    const int m = 57, kd = 9;
    const std::vector<double> a = random_band(m, kd, 2.0 * kd + 1.0, 3);
    std::vector<double> ours = a, lapack = a;
    ASSERT_EQ(band_cholesky(ours.data(), m, kd), 0);
    ASSERT_EQ(lapack::dpbtrf('L', m, kd, lapack.data(), kd + 1), 0);
    for (int j = 0; j < m; ++j) {
        for (int d = 0; d <= kd && j + d < m; ++d) {
            const size_t k = d + size_t(j) * (kd + 1);
            EXPECT_NEAR(ours[k], lapack[k], 1e-14 * std::max(1.0, std::abs(lapack[k])))
                << j << "," << d;
        }
    }
}

TEST(BandSolve, CholeskyReportsTheRowThatIsNotPositiveAsLapackDoes)
{
    const int m = 40, kd = 6;
    for (const double diagonal : {0.5, 1.5, 3.0}) {  // indefinite for the smaller diagonals
        const std::vector<double> a = random_band(m, kd, diagonal, 11);
        std::vector<double> ours = a, lapack = a;
        const int expected = lapack::dpbtrf('L', m, kd, lapack.data(), kd + 1);
        EXPECT_EQ(band_cholesky(ours.data(), m, kd), expected) << "diagonal " << diagonal;
    }
    std::vector<double> nan_pivot = random_band(m, kd, 20.0, 13);
    nan_pivot[size_t(7) * (kd + 1)] = std::nan("");
    EXPECT_EQ(band_cholesky(nan_pivot.data(), m, kd), 8);
}

TEST(BandSolve, UnitColumnsMatchADenseForwardSubstitution)
{
    const int m = 41, kd = 7, first_row = 2, row_step = 3, ncols = 13, ldz = 16, zero_rows = 6;
    std::vector<double> band = random_band(m, kd, 2.0 * kd + 1.0, 5);
    ASSERT_EQ(band_cholesky(band.data(), m, kd), 0);
    std::vector<double> dense(size_t(m) * m, 0.0);  // L, row-major
    for (int j = 0; j < m; ++j) {
        for (int i = j; i <= std::min(m - 1, j + kd); ++i)
            dense[size_t(i) * m + j] = band[(i - j) + size_t(j) * (kd + 1)];
    }

    BandRows rows;
    band_rows_from_factor(band.data(), m, kd, rows);
    std::vector<double> z(size_t(m) * ldz, -7.0);  // anything not written stays -7
    solve_unit_columns(rows, first_row, row_step, ncols, zero_rows, z.data(), ldz);

    for (int w = 0; w < ncols; ++w) {
        const int unit = first_row + w * row_step;
        std::vector<double> x(m, 0.0);
        for (int k = unit; k < m; ++k) {
            double s = k == unit ? 1.0 : 0.0;
            for (int j = unit; j < k; ++j) s -= dense[size_t(k) * m + j] * x[j];
            x[k] = s / dense[size_t(k) * m + k];
        }
        // The pass holding column w starts at the unit row of its first column.
        const int pass_start = first_row + (w / kBandSolveChunk) * kBandSolveChunk * row_step;
        for (int k = std::max(0, pass_start - zero_rows); k < m; ++k) {
            const double got = z[size_t(k) * ldz + w];
            if (k < unit) {
                EXPECT_EQ(got, 0.0) << "row " << k << " column " << w;
            } else {
                EXPECT_NEAR(got, x[k], 1e-13 * std::max(1.0, std::abs(x[k])))
                    << "row " << k << " column " << w;
            }
        }
        for (int k = 0; k < std::max(0, pass_start - zero_rows); ++k) {
            EXPECT_EQ(z[size_t(k) * ldz + w], -7.0) << "row " << k << " is outside what is written";
        }
    }
    for (int k = first_row + 8 * row_step; k < m; ++k) {
        for (int w = ncols; w < ldz; ++w)
            EXPECT_EQ(z[size_t(k) * ldz + w], 0.0) << "padding " << k << "," << w;
    }
}

}  // namespace
}  // namespace ex2d::cpu
