// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The band Cholesky factorization of iCov (B&S eq. 4) and the forward substitution with its
// factor for many unit right-hand sides at once: Z = L^-1 E in the covariance blocks of B&S
// eqs. 10-11 (C_ss = Z^T Z). Small band problems are where a general-purpose BLAS and
// LAPACK are least efficient (a GEMM and a TRSM per block of 40 rows ran at a fifth of the
// core's peak; dpbtrf makes a few small BLAS calls per column), so these are written for
// the shapes at hand.

#include <vector>

namespace ex2d::cpu {

/// Cholesky factorization A = L L^T in place, in LAPACK's lower band storage (as dpbtrf with
/// UPLO = 'L', leading dimension kd + 1). Returns 0, or k + 1 where the pivot of row k is not
/// positive (or NaN): A is not positive definite, as dpbtrf's INFO = k + 1.
int band_cholesky(double* band, int m, int kd);

/// Rows of a lower band factor L (half-width kd) laid out for forward substitution: row k
/// holds L(k, k - kd .. k), zero-padded before column 0, and the inverse of L(k, k).
struct BandRows {
    int m = 0;
    int kd = 0;
    std::vector<double> rows;      ///< [m][kd + 1]
    std::vector<double> inv_diag;  ///< [m]
};

/// From LAPACK's lower band storage (dpbtrf, UPLO = 'L', leading dimension kd + 1).
void band_rows_from_factor(const double* factor, int m, int kd, BandRows& out);

/// Columns per pass of solve_unit_columns; a row stride that is a multiple of it holds every
/// pass without a remainder.
constexpr int kBandSolveChunk = 8;

/// Z = L^-1 E where column w of E is the unit vector at row first_row + w * row_step, for w
/// in [0, ncols). Z is row-major with stride ldz, a multiple of kBandSolveChunk that is at
/// least ncols; columns ncols..ldz-1 come out zero. Row k of column w is zero for k below
/// its unit row; only rows from zero_rows_before rows above each pass's first unit row are
/// written, so a caller reads Z only there.
void solve_unit_columns(const BandRows& factor, int first_row, int row_step, int ncols,
                        int zero_rows_before, double* z, int ldz);

}  // namespace ex2d::cpu
