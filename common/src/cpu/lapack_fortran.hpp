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

extern "C" {
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc,
            std::size_t uplo_len, std::size_t trans_len);
// Called by the CUDA emulation's cuBLAS (cublasDgemmStridedBatched) and by tests.
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t transa_len,
            std::size_t transb_len);
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
