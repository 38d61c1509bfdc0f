// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// LAPACK and BLAS routines that only tests and benchmarks call, as references for ex2d's own
// kernels (dense solves, eigen-decompositions, band factorizations), through the Fortran
// interface and in the form of the CPU backend's own wrappers (common/src/cpu/lapack_fortran.hpp,
// included here: the routines the backend calls). Column-major.

#include <cstddef>
#include <vector>

#include "lapack_fortran.hpp"

extern "C" {
void dgemv_(const char* trans, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* x, const int* incx, const double* beta, double* y,
            const int* incy, std::size_t trans_len);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info, std::size_t jobz_len, std::size_t uplo_len);
void dpbtrf_(const char* uplo, const int* n, const int* kd, double* ab, const int* ldab, int* info,
             std::size_t uplo_len);
}

namespace ex2d::lapack {

inline void dgemm(char transa, char transb, int m, int n, int k, double alpha, const double* a,
                  int lda, const double* b, int ldb, double beta, double* c, int ldc)
{
    dgemm_(&transa, &transb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}

inline void dgemv(char trans, int m, int n, double alpha, const double* a, int lda, const double* x,
                  double beta, double* y)
{
    const int one = 1;
    dgemv_(&trans, &m, &n, &alpha, a, &lda, x, &one, &beta, y, &one, 1);
}

/// Eigen-decomposition (QR), with its workspace allocated here.
inline int dsyev(char jobz, char uplo, int n, double* a, int lda, double* w)
{
    int info = 0, query_size = -1;
    double query = 0;
    dsyev_(&jobz, &uplo, &n, a, &lda, w, &query, &query_size, &info, 1, 1);
    if (info != 0) return info;
    std::vector<double> work(static_cast<std::size_t>(query));
    const int lwork = int(work.size());
    dsyev_(&jobz, &uplo, &n, a, &lda, w, work.data(), &lwork, &info, 1, 1);
    return info;
}

/// Band Cholesky factorization, the reference for ex2d's own (band_solve.hpp).
inline int dpbtrf(char uplo, int n, int kd, double* ab, int ldab)
{
    int info = 0;
    dpbtrf_(&uplo, &n, &kd, ab, &ldab, &info, 1);
    return info;
}

}  // namespace ex2d::lapack
