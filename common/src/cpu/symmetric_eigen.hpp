// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// Eigen-decompositions of the small symmetric covariance blocks of the decorrelation (B&S eqs.
// 10-19; 74 x 74 on desi_proc's grids, five a patch, 23,500 an r frame), a patch's blocks
// together. Each block is reduced to tridiagonal form (tridiagonal_reduction.hpp), then all of
// them go through one batched implicit QR (tridiagonal_qr.hpp). Q = C^-1/2 agrees with
// LAPACK's dsyev to ~1e-13 of its largest entry.

#include <memory>

namespace ex2d::cpu {

class SymmetricEigenSolver {
public:
    SymmetricEigenSolver();
    ~SymmetricEigenSolver();
    SymmetricEigenSolver(SymmetricEigenSolver&&) noexcept;
    SymmetricEigenSolver& operator=(SymmetricEigenSolver&&) noexcept;

    /// Decomposes `count` n x n symmetric matrices; matrix i's lower triangle is read from
    /// lowers + i n^2 (column-major, leading dimension n; the strict upper triangle is not
    /// read). True when every one converged. Workspace is kept between calls.
    bool decompose(int n, int count, const double* lowers);
    /// One matrix: decompose(n, 1, lower).
    bool decompose(int n, const double* lower) { return decompose(n, 1, lower); }

    /// Of the last decomposition, matrix i: whether it converged; its n eigenvalues in
    /// ascending order; its eigenvectors as the columns of a column-major matrix with leading
    /// dimension vector_stride(), column k belonging to eigenvalue k.
    bool converged(int i) const;
    const double* eigenvalues(int i = 0) const;
    const double* eigenvectors(int i = 0) const;
    int vector_stride() const;

    /// What this build reduces with, and that the QR is batched.
    static const char* implementation();

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace ex2d::cpu
