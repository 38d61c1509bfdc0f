// SPDX-License-Identifier: BSD-3-Clause
#include "symmetric_eigen.hpp"

#include <cstddef>
#include <vector>

#ifdef EX2D_HAVE_EIGEN
#include <Eigen/Eigenvalues>
#else
#include "lapack_fortran.hpp"
#endif

namespace ex2d::cpu {

#ifdef EX2D_HAVE_EIGEN

struct SymmetricEigenSolver::State {
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver;
};

bool SymmetricEigenSolver::decompose(int n, const double* lower)
{
    // Only the lower triangle is referenced (Eigen's documented contract for compute()).
    state_->solver.compute(Eigen::Map<const Eigen::MatrixXd>(lower, n, n),
                           Eigen::ComputeEigenvectors);
    return state_->solver.info() == Eigen::Success;
}

const double* SymmetricEigenSolver::eigenvalues() const
{
    return state_->solver.eigenvalues().data();
}

const double* SymmetricEigenSolver::eigenvectors() const
{
    return state_->solver.eigenvectors().data();
}

const char* SymmetricEigenSolver::implementation()
{
    return "Eigen SelfAdjointEigenSolver";
}

#else

struct SymmetricEigenSolver::State {
    int size = 0;
    std::vector<double> values, vectors, work;
    std::vector<int> iwork;
};

bool SymmetricEigenSolver::decompose(int n, const double* lower)
{
    State& s = *state_;
    s.vectors.assign(lower, lower + std::size_t(n) * std::size_t(n));
    s.values.resize(std::size_t(n));
    if (s.size != n) {
        double work_query = 0;
        int iwork_query = 0;
        if (lapack::dsyevd('V', 'L', n, s.vectors.data(), n, s.values.data(), &work_query, -1,
                           &iwork_query, -1) != 0) {
            return false;
        }
        s.work.resize(std::size_t(work_query));
        s.iwork.resize(std::size_t(iwork_query));
        s.size = n;
    }
    return lapack::dsyevd('V', 'L', n, s.vectors.data(), n, s.values.data(), s.work.data(),
                          int(s.work.size()), s.iwork.data(), int(s.iwork.size())) == 0;
}

const double* SymmetricEigenSolver::eigenvalues() const
{
    return state_->values.data();
}

const double* SymmetricEigenSolver::eigenvectors() const
{
    return state_->vectors.data();
}

const char* SymmetricEigenSolver::implementation()
{
    return "LAPACK dsyevd";
}

#endif

SymmetricEigenSolver::SymmetricEigenSolver() : state_(std::make_unique<State>()) {}
SymmetricEigenSolver::~SymmetricEigenSolver() = default;
SymmetricEigenSolver::SymmetricEigenSolver(SymmetricEigenSolver&&) noexcept = default;
SymmetricEigenSolver& SymmetricEigenSolver::operator=(SymmetricEigenSolver&&) noexcept = default;

}  // namespace ex2d::cpu
