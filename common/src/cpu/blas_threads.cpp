// SPDX-License-Identifier: BSD-3-Clause
// Keeps the linked BLAS to one thread: parallelism comes from patches, and a multi-threaded
// BLAS inside them would oversubscribe the cores. Each vendor has its own call, or none: the
// functions are weak, so the one the linked library defines is called and the others are
// null (the reference BLAS and Cray LibSci's single-threaded builds have nothing to set).
#include "blas_threads.hpp"

extern "C" {
__attribute__((weak)) void openblas_set_num_threads(int);
__attribute__((weak)) void mkl_set_num_threads(int);
__attribute__((weak)) void bli_thread_set_num_threads(long);
// OpenBLAS's pthread build starts its own threads when loaded; they spin in sched_yield for a
// while before sleeping, which cost a one-bundle process 0.1 core-s.
__attribute__((weak)) int blas_thread_shutdown_(void);
}

namespace ex2d {

const char* use_single_threaded_blas()
{
    if (openblas_set_num_threads) {
        openblas_set_num_threads(1);
        if (blas_thread_shutdown_) blas_thread_shutdown_();
        return "OpenBLAS";
    }
    if (mkl_set_num_threads) {
        mkl_set_num_threads(1);
        return "MKL";
    }
    if (bli_thread_set_num_threads) {
        bli_thread_set_num_threads(1);
        return "BLIS";
    }
    return "a BLAS without thread control";
}

}  // namespace ex2d
