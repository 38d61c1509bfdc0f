// SPDX-License-Identifier: BSD-3-Clause
#include "symmetric_eigen.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tridiagonal_qr.hpp"
#include "tridiagonal_reduction.hpp"

namespace ex2d::cpu {

struct SymmetricEigenSolver::State {
    int n = 0, count = 0, stride = 0;
    // Matrix i: values[i n ..], off_diagonal[i n ..], vectors[i stride n ..].
    std::vector<double> values, off_diagonal, vectors;
    TridiagonalReductionWorkspace reduction;
    TridiagonalQrWorkspace qr;
    std::vector<TridiagonalSystem> systems;

    void shape(int size, int matrices)
    {
        if (size == n && matrices <= count) return;
        n = size;
        count = std::max(count, matrices);
        stride = (n + 3) / 4 * 4;
        values.assign(std::size_t(count) * n, 0.0);
        off_diagonal.assign(std::size_t(count) * n, 0.0);
        vectors.assign(std::size_t(count) * stride * n, 0.0);
        systems.assign(std::size_t(count), TridiagonalSystem{});
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
    if (n <= 0 || count <= 0) return false;
    s.shape(n, count);
    for (int i = 0; i < count; ++i) {
        double* d = &s.values[std::size_t(i) * n];
        double* e = &s.off_diagonal[std::size_t(i) * n];
        double* q = &s.vectors[std::size_t(i) * s.stride * n];
        reduce_to_tridiagonal(n, lowers + std::size_t(i) * n * n, d, e, q, s.stride, s.reduction);
        s.systems[std::size_t(i)] = TridiagonalSystem{n, d, e, q, s.stride, false};
    }
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
    return "Householder tridiagonal reduction + batched implicit QR";
}

SymmetricEigenSolver::SymmetricEigenSolver() : state_(std::make_unique<State>()) {}
SymmetricEigenSolver::~SymmetricEigenSolver() = default;
SymmetricEigenSolver::SymmetricEigenSolver(SymmetricEigenSolver&&) noexcept = default;
SymmetricEigenSolver& SymmetricEigenSolver::operator=(SymmetricEigenSolver&&) noexcept = default;

}  // namespace ex2d::cpu
