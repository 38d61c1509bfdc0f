// SPDX-License-Identifier: BSD-3-Clause
#pragma once

// The LAPACK and BLAS routines behind the emulated cuBLAS and cuSOLVER beyond those the CPU
// backend declares (lapack_fortran.hpp), through the same Fortran interface.

#include <cstddef>

#include "lapack_fortran.hpp"

extern "C" {
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const double* alpha, const double* a, const int* lda, double* b,
            const int* ldb, std::size_t side_len, std::size_t uplo_len, std::size_t transa_len,
            std::size_t diag_len);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, std::size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             std::size_t jobz_len, std::size_t uplo_len);
}
