// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Householder reduction of a symmetric matrix to tridiagonal form, A = Q T Q^T, with Q formed
// explicitly (Golub & Van Loan, Matrix Computations, 4th ed., algorithm 8.3.1 for T and the
// backward accumulation of section 5.1.6 for Q), for the decorrelation's 74 x 74 covariance
// blocks (B&S eqs. 10-19).
//
// Why our own: at this size a general-purpose reduction spends its time on loop overhead and
// on dependent sums, not on arithmetic. Here each step's matrix-vector product and rank-2
// update run over four columns of the lower triangle at once with four-wide vectors, and Q
// takes two reflectors a pass: a third to a half of the time of LAPACK's dsytrd and dorgtr
// on these blocks (docs/benchmarks-log.md, "CPU speed, fourth step").

#include <vector>

namespace ex2d::cpu {

/// Buffers kept between calls: reducing a block of a size seen before allocates nothing.
struct TridiagonalReductionWorkspace {
    /// The working copy, both triangles near the diagonal.
    std::vector<double> matrix;
    /// Householder vector k in column k, zero outside rows k+1..n-1.
    std::vector<double> reflectors;
    /// Reflector k is I - tau[k] v v^T.
    std::vector<double> tau;
    /// tau A v of the current step.
    std::vector<double> product;
};

/// Reduces the symmetric n x n matrix whose lower triangle is read from `lower` (column-major,
/// leading dimension n; the strict upper triangle is not read) to A = Q T Q^T. T's diagonal
/// goes into diagonal[0..n), its subdiagonal into off_diagonal[0..n-1), and Q into q:
/// column-major with leading dimension ldq, a multiple of 4 that is at least n, rows n..ldq-1
/// zero. A non-finite entry makes T non-finite (the QR that follows then fails that matrix
/// alone). Entries far from 1 are scaled by a power of two first, so no square overflows.
void reduce_to_tridiagonal(int n, const double* lower, double* diagonal, double* off_diagonal,
                           double* q, int ldq, TridiagonalReductionWorkspace& ws);

}  // namespace ex2d::cpu
