// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Eigenvalues and eigenvectors of symmetric tridiagonal matrices by implicit QR steps with
// Wilkinson shifts (Golub & Van Loan, Matrix Computations, 4th ed., algorithm 8.3.3), several
// matrices at once.
//
// Why our own: on the decorrelation's 74 x 74 blocks the bulge chase is a chain of dependent
// scalar operations (a square root and two divisions per rotation), so a solver working on one
// matrix at a time waits on latency: Eigen's spends about 90 us a block there, LAPACK's dsteqr
// more. Chasing the bulges of the five blocks of a patch in one loop lets the processor
// overlap the chains, and a sweep's rotations are applied to the eigenvectors afterwards, many
// rows at a time, with each column's new value carried in registers to the next rotation.

#include <vector>

namespace ex2d::cpu {

/// One symmetric tridiagonal matrix and the matrix its rotations accumulate into.
struct TridiagonalSystem {
    int n = 0;
    double* diagonal = nullptr;      ///< [n]: in, the diagonal; out, the eigenvalues (unsorted)
    double* off_diagonal = nullptr;  ///< [n - 1]: destroyed
    /// n columns of `stride` rows, column-major; rows n..stride-1 zero. In: the orthogonal
    /// matrix of the reduction to tridiagonal form (identity for the tridiagonal itself).
    /// Out: that matrix times the eigenvectors of the tridiagonal, column k for eigenvalue k.
    double* vectors = nullptr;
    int stride = 0;          ///< a multiple of 4, at least n
    bool converged = false;  ///< out: false when 30 n sweeps did not reduce it
};

/// Rotations and per-system state, kept between calls so that a patch's decompositions
/// allocate nothing once warm.
class TridiagonalQrWorkspace {
public:
    TridiagonalQrWorkspace();
    ~TridiagonalQrWorkspace();
    struct Chase;  ///< one system's state, defined with the algorithm

private:
    friend void tridiagonal_qr(TridiagonalSystem*, int, TridiagonalQrWorkspace&);
    std::vector<double> rotations_;
    std::vector<Chase> chases_;
};

/// Decomposes every system.
void tridiagonal_qr(TridiagonalSystem* systems, int count, TridiagonalQrWorkspace& workspace);

}  // namespace ex2d::cpu
