// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file lapack_fortran.hpp
/// The BLAS and LAPACK routines ex2d calls, through their Fortran interface, which every
/// implementation provides (OpenBLAS, MKL, Cray LibSci, BLIS with libflame, the reference):
/// no LAPACKE or CBLAS layer, so a site links the library it chose with BLA_VENDOR.
/// Matrices are column-major. Character arguments carry their hidden lengths at the end, as
/// gfortran passes them (LAPACK_FORTRAN_STRLEN_END); implementations that do not read them
/// ignore the extra arguments.

#include <cstddef>
#include <vector>

extern "C" {
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc,
            std::size_t uplo_len, std::size_t trans_len);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t transa_len,
            std::size_t transb_len);
void dgemv_(const char* trans, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* x, const int* incx, const double* beta, double* y,
            const int* incy, std::size_t trans_len);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
            double* work, const int* lwork, int* info, std::size_t jobz_len, std::size_t uplo_len);
void dpbtrf_(const char* uplo, const int* n, const int* kd, double* ab, const int* ldab, int* info,
             std::size_t uplo_len);
void dpbtrs_(const char* uplo, const int* n, const int* kd, const int* nrhs, const double* ab,
             const int* ldab, double* b, const int* ldb, int* info, std::size_t uplo_len);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             std::size_t uplo_len);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             std::size_t uplo_len);
}

namespace ex2d::lapack {

/// C = alpha A A^T + beta C (trans 'N', A n x k) or alpha A^T A + beta C (trans 'T', A k x n).
inline void dsyrk(char uplo, char trans, int n, int k, double alpha, const double* a, int lda,
                  double beta, double* c, int ldc)
{
    dsyrk_(&uplo, &trans, &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
}

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

/// Eigen-decomposition (QR), with its workspace allocated here: for tests and references.
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

inline int dpbtrf(char uplo, int n, int kd, double* ab, int ldab)
{
    int info = 0;
    dpbtrf_(&uplo, &n, &kd, ab, &ldab, &info, 1);
    return info;
}

inline int dpbtrs(char uplo, int n, int kd, int nrhs, const double* ab, int ldab, double* b,
                  int ldb)
{
    int info = 0;
    dpbtrs_(&uplo, &n, &kd, &nrhs, ab, &ldab, b, &ldb, &info, 1);
    return info;
}

inline int dpotrf(char uplo, int n, double* a, int lda)
{
    int info = 0;
    dpotrf_(&uplo, &n, a, &lda, &info, 1);
    return info;
}

inline int dpotri(char uplo, int n, double* a, int lda)
{
    int info = 0;
    dpotri_(&uplo, &n, a, &lda, &info, 1);
    return info;
}

}  // namespace ex2d::lapack
