// SPDX-License-Identifier: BSD-3-Clause
#include "band_solve.hpp"

#include "vector_ops.hpp"

#include <algorithm>
#include <cmath>

namespace ex2d::cpu {

int band_cholesky(double* band, int m, int kd)
{
    const int ldab = kd + 1;
    // Right-looking, column by column as LAPACK's dpbtf2, with the rank-one update of the
    // trailing triangle written out so that each column of it is one vectorised loop.
    for (int j = 0; j < m; ++j) {
        double* col = band + size_t(j) * ldab;  // col[d] = A(j + d, j)
        const double pivot = col[0];
        if (!(pivot > 0)) return j + 1;
        col[0] = std::sqrt(pivot);
        const double inv = 1.0 / col[0];
        const int len = std::min(kd, m - 1 - j);
        for (int d = 1; d <= len; ++d) col[d] *= inv;
        for (int b = 1; b <= len; ++b) {
            const double lb = col[b];
            double* trailing = band + size_t(j + b) * ldab - b;  // trailing[a] = A(j + a, j + b)
            for (int a = b; a <= len; ++a) trailing[a] -= col[a] * lb;
        }
    }
    return 0;
}

void band_rows_from_factor(const double* factor, int m, int kd, BandRows& out)
{
    const int ldab = kd + 1;
    out.m = m;
    out.kd = kd;
    out.rows.assign(size_t(m) * ldab, 0.0);
    out.inv_diag.resize(m);
    for (int k = 0; k < m; ++k) {
        double* row = &out.rows[size_t(k) * ldab];
        for (int j = std::max(0, k - kd); j <= k; ++j)
            row[j - (k - kd)] = factor[(k - j) + size_t(j) * ldab];
        out.inv_diag[k] = 1.0 / row[kd];
    }
}

void solve_unit_columns(const BandRows& factor, int first_row, int row_step, int ncols,
                        int zero_rows_before, double* z, int ldz)
{
    const int m = factor.m, kd = factor.kd;
    for (int c0 = 0; c0 < ldz; c0 += kBandSolveChunk) {
        // Every column of the pass starts at or after the unit row of its first column;
        // rows between are computed too, and come out exactly zero.
        const int start = std::min(m, first_row + c0 * row_step);
        for (int k = std::max(0, start - zero_rows_before); k < start; ++k) {
            std::fill(z + size_t(k) * ldz + c0, z + size_t(k) * ldz + c0 + kBandSolveChunk, 0.0);
        }
        // Column c0 + next_unit has its unit in row unit_row (no division in the row loop).
        int next_unit = 0;
        int unit_row = first_row + c0 * row_step;
        for (int k = start; k < m; ++k) {
            // Two running sums per half, over alternate rows of the band, so that consecutive
            // multiply-adds do not wait on each other.
            Vec4 lo_even{}, hi_even{}, lo_odd{}, hi_odd{};
            if (k == unit_row && next_unit < kBandSolveChunk && c0 + next_unit < ncols) {
                if (next_unit < 4) {
                    lo_even[next_unit] = 1.0;
                } else {
                    hi_even[next_unit - 4] = 1.0;
                }
                ++next_unit;
                unit_row += row_step;
            }
            const double* lrow = &factor.rows[size_t(k) * (kd + 1)] + kd - k;  // lrow[j] = L(k, j)
            int j = std::max(start, k - kd);
            for (; j + 1 < k; j += 2) {
                const double* z0 = z + size_t(j) * ldz + c0;
                const double* z1 = z0 + ldz;
                const Vec4 l0 = splat4(lrow[j]), l1 = splat4(lrow[j + 1]);
                lo_even -= l0 * load4(z0);
                hi_even -= l0 * load4(z0 + 4);
                lo_odd -= l1 * load4(z1);
                hi_odd -= l1 * load4(z1 + 4);
            }
            if (j < k) {
                const double* z0 = z + size_t(j) * ldz + c0;
                const Vec4 l0 = splat4(lrow[j]);
                lo_even -= l0 * load4(z0);
                hi_even -= l0 * load4(z0 + 4);
            }
            const Vec4 inv = splat4(factor.inv_diag[k]);
            double* out = z + size_t(k) * ldz + c0;
            store4(out, (lo_even + lo_odd) * inv);
            store4(out + 4, (hi_even + hi_odd) * inv);
        }
    }
}

}  // namespace ex2d::cpu
