// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Eigen-decompositions of the small symmetric covariance blocks of the decorrelation (B&S eqs.
// 10-19; 74 x 74 on desi_proc's grids, 23,500 an r frame). Eigen's solver (tridiagonal
// reduction, then implicit QR with the rotations applied to contiguous columns) takes about half
// the time of LAPACK's divide and conquer (dsyevd) at this size; builds without Eigen call
// dsyevd. Both give Q = C^-1/2 to ~1e-13 of its largest entry.

#include <memory>

namespace ex2d::cpu {

class SymmetricEigenSolver {
public:
    SymmetricEigenSolver();
    ~SymmetricEigenSolver();
    SymmetricEigenSolver(SymmetricEigenSolver&&) noexcept;
    SymmetricEigenSolver& operator=(SymmetricEigenSolver&&) noexcept;

    /// Decomposes the n x n symmetric matrix whose lower triangle `lower` holds (column-major,
    /// leading dimension n; the strict upper triangle is not read). False when the solver does
    /// not converge. Workspace is kept between calls of the same n.
    bool decompose(int n, const double* lower);
    /// Of the last decomposition: n eigenvalues in ascending order, and the eigenvectors as the
    /// columns of an n x n column-major matrix, column k belonging to eigenvalue k.
    const double* eigenvalues() const;
    const double* eigenvectors() const;

    /// "Eigen SelfAdjointEigenSolver" or "LAPACK dsyevd": what this build decomposes with.
    static const char* implementation();

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace ex2d::cpu
