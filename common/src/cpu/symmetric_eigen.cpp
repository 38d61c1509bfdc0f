// SPDX-License-Identifier: BSD-3-Clause
#include "symmetric_eigen.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tridiagonal_qr.hpp"

#ifdef EX2D_HAVE_EIGEN
#include <Eigen/Eigenvalues>
#else
#include "lapack_fortran.hpp"
#endif

namespace ex2d::cpu {

struct SymmetricEigenSolver::State {
    int n = 0, count = 0, stride = 0;
    // Matrix i: values[i n ..], off_diagonal[i n ..], vectors[i stride n ..].
    std::vector<double> values, off_diagonal, vectors;
    TridiagonalQrWorkspace qr;
    std::vector<TridiagonalSystem> systems;
#ifdef EX2D_HAVE_EIGEN
    std::vector<Eigen::Tridiagonalization<Eigen::MatrixXd>> reducers;
#else
    std::vector<double> tau, work;
#endif

    // Sizes the arrays; the vectors' padding rows are zeroed here and never written after.
    bool shape(int size, int matrices)
    {
        if (size == n && matrices <= count) return true;
        n = size;
        count = std::max(count, matrices);
        stride = (n + 3) / 4 * 4;
        values.assign(std::size_t(count) * n, 0.0);
        off_diagonal.assign(std::size_t(count) * n, 0.0);
        vectors.assign(std::size_t(count) * stride * n, 0.0);
        systems.assign(std::size_t(count), TridiagonalSystem{});
#ifdef EX2D_HAVE_EIGEN
        reducers.assign(std::size_t(count), Eigen::Tridiagonalization<Eigen::MatrixXd>(n));
        return true;
#else
        tau.assign(std::size_t(n), 0.0);
        double query_trd = 0, query_org = 0;
        if (lapack::dsytrd('L', n, vectors.data(), stride, values.data(), off_diagonal.data(),
                           tau.data(), &query_trd, -1) != 0 ||
            lapack::dorgtr('L', n, vectors.data(), stride, tau.data(), &query_org, -1) != 0) {
            n = 0;
            return false;
        }
        work.assign(std::size_t(std::max(query_trd, query_org)), 0.0);
        return true;
#endif
    }

    // A = Q T Q^T: T's diagonal and off-diagonal into values and off_diagonal, Q into vectors.
    bool reduce(int i, const double* lower)
    {
        double* d = &values[std::size_t(i) * n];
        double* e = &off_diagonal[std::size_t(i) * n];
        double* q = &vectors[std::size_t(i) * stride * n];
#ifdef EX2D_HAVE_EIGEN
        // Only the lower triangle is referenced (Eigen's contract for Tridiagonalization).
        auto& reducer = reducers[std::size_t(i)];
        reducer.compute(Eigen::Map<const Eigen::MatrixXd>(lower, n, n));
        Eigen::Map<Eigen::VectorXd>(d, n) = reducer.diagonal();
        Eigen::Map<Eigen::VectorXd>(e, n - 1) = reducer.subDiagonal();
        Eigen::Map<Eigen::MatrixXd, 0, Eigen::OuterStride<>>(
            q, n, n, Eigen::OuterStride<>(stride)) = reducer.matrixQ();
        return true;
#else
        for (int j = 0; j < n; ++j) {
            std::copy(lower + std::size_t(j) * n + j, lower + std::size_t(j + 1) * n,
                      q + std::size_t(j) * stride + j);
        }
        const int lwork = int(work.size());
        return lapack::dsytrd('L', n, q, stride, d, e, tau.data(), work.data(), lwork) == 0 &&
               lapack::dorgtr('L', n, q, stride, tau.data(), work.data(), lwork) == 0;
#endif
    }

    // Eigenvalues ascending, their vectors with them.
    void sort(int i)
    {
        double* w = &values[std::size_t(i) * n];
        double* v = &vectors[std::size_t(i) * stride * n];
        for (int k = 0; k + 1 < n; ++k) {
            const int smallest = int(std::min_element(w + k, w + n) - w);
            if (smallest == k) continue;
            std::swap(w[k], w[smallest]);
            std::swap_ranges(v + std::size_t(k) * stride, v + std::size_t(k + 1) * stride,
                             v + std::size_t(smallest) * stride);
        }
    }
};

bool SymmetricEigenSolver::decompose(int n, int count, const double* lowers)
{
    State& s = *state_;
    if (n <= 0 || count <= 0 || !s.shape(n, count)) return false;
    bool reduced = true;
    for (int i = 0; i < count; ++i) {
        const bool ok = s.reduce(i, lowers + std::size_t(i) * n * n);
        reduced = reduced && ok;
        s.systems[std::size_t(i)] = TridiagonalSystem{n,
                                                      &s.values[std::size_t(i) * n],
                                                      &s.off_diagonal[std::size_t(i) * n],
                                                      &s.vectors[std::size_t(i) * s.stride * n],
                                                      s.stride,
                                                      false};
    }
    if (!reduced) return false;
    tridiagonal_qr(s.systems.data(), count, s.qr);
    bool all = true;
    for (int i = 0; i < count; ++i) {
        if (s.systems[std::size_t(i)].converged) {
            s.sort(i);
        } else {
            all = false;
        }
    }
    return all;
}

bool SymmetricEigenSolver::converged(int i) const
{
    return state_->systems.at(std::size_t(i)).converged;
}

const double* SymmetricEigenSolver::eigenvalues(int i) const
{
    return &state_->values[std::size_t(i) * state_->n];
}

const double* SymmetricEigenSolver::eigenvectors(int i) const
{
    return &state_->vectors[std::size_t(i) * state_->stride * state_->n];
}

int SymmetricEigenSolver::vector_stride() const
{
    return state_->stride;
}

const char* SymmetricEigenSolver::implementation()
{
#ifdef EX2D_HAVE_EIGEN
    return "Eigen Tridiagonalization + batched implicit QR";
#else
    return "LAPACK dsytrd/dorgtr + batched implicit QR";
#endif
}

SymmetricEigenSolver::SymmetricEigenSolver() : state_(std::make_unique<State>()) {}
SymmetricEigenSolver::~SymmetricEigenSolver() = default;
SymmetricEigenSolver::SymmetricEigenSolver(SymmetricEigenSolver&&) noexcept = default;
SymmetricEigenSolver& SymmetricEigenSolver::operator=(SymmetricEigenSolver&&) noexcept = default;

}  // namespace ex2d::cpu
