// SPDX-License-Identifier: BSD-3-Clause
// The emulated cuBLAS and cuSOLVER through the table the backend calls them by
// (cuda_libraries()), held to the real libraries' conventions: one info per matrix of a
// batch, potrsBatched's single right-hand side, workspaces from the _bufferSize calls, and
// the CUDA 13.0 toolkit's refusal of an algorithm for the batched eigen-solver.
#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_check.hpp"
#include "device_memory.hpp"

namespace ex2d::cuda {
namespace {

const CudaLibraries& libs()
{
    return cuda_libraries();
}

// Host data copied to a fresh device buffer, and back.
struct DeviceCopy {
    MemoryLedger ledger;
    DeviceArray<double> array{"library test"};
    std::size_t size;
    explicit DeviceCopy(const std::vector<double>& host) : size(host.size())
    {
        array.reserve(size, ledger);
        EX2D_CUDA_CHECK(cudaMemcpyAsync(array.data(), host.data(), size * sizeof(double),
                                        cudaMemcpyHostToDevice, nullptr));
    }
    std::vector<double> read() const
    {
        std::vector<double> host(size);
        EX2D_CUDA_CHECK(cudaMemcpyAsync(host.data(), array.data(), size * sizeof(double),
                                        cudaMemcpyDeviceToHost, nullptr));
        return host;
    }
};

// Three 3x3 column-major matrices: positive definite, indefinite from its second minor on,
// positive definite.
const std::vector<double> kMatrices = {4, 1, 0, 1, 3, 1, 0, 1, 2,  //
                                       1, 2, 0, 2, 1, 0, 0, 0, 5,  //
                                       9, 3, 1, 3, 5, 2, 1, 2, 6};

TEST(EmulatedLibraries, BatchedCholeskyReportsEachMatrixAndSolvesOneRightHandSide)
{
    cusolverDnHandle_t solver = nullptr;
    ASSERT_EQ(libs().cusolverDnCreate(&solver), CUSOLVER_STATUS_SUCCESS);
    DeviceCopy a(kMatrices), b({1, 2, 3, 1, 1, 1, 3, 2, 1});
    MemoryLedger ledger;
    DeviceArray<double*> a_ptrs("pointers"), b_ptrs("pointers");
    DeviceArray<int> info("info");
    a_ptrs.reserve(3, ledger);
    b_ptrs.reserve(3, ledger);
    info.reserve(4, ledger);
    std::vector<double*> ha, hb;
    for (int i = 0; i < 3; ++i) {
        ha.push_back(a.array.data() + 9 * i);
        hb.push_back(b.array.data() + 3 * i);
    }
    EX2D_CUDA_CHECK(cudaMemcpyAsync(a_ptrs.data(), ha.data(), 3 * sizeof(double*),
                                    cudaMemcpyHostToDevice, nullptr));
    EX2D_CUDA_CHECK(cudaMemcpyAsync(b_ptrs.data(), hb.data(), 3 * sizeof(double*),
                                    cudaMemcpyHostToDevice, nullptr));
    EX2D_CUDA_CHECK(libs().cusolverDnDpotrfBatched(solver, CUBLAS_FILL_MODE_LOWER, 3, a_ptrs.data(),
                                                   3, info.data(), 3));
    int host_info[4] = {};
    EX2D_CUDA_CHECK(
        cudaMemcpyAsync(host_info, info.data(), 3 * sizeof(int), cudaMemcpyDeviceToHost, nullptr));
    EXPECT_EQ(host_info[0], 0);
    EXPECT_EQ(host_info[1], 2) << "the leading minor of order 2 is not positive";
    EXPECT_EQ(host_info[2], 0);

    EX2D_CUDA_CHECK(cudaMemsetAsync(info.data() + 3, 0, sizeof(int), nullptr));
    EXPECT_EQ(libs().cusolverDnDpotrsBatched(solver, CUBLAS_FILL_MODE_LOWER, 3, 2, a_ptrs.data(), 3,
                                             b_ptrs.data(), 3, info.data() + 3, 3),
              CUSOLVER_STATUS_INVALID_VALUE)
        << "cuSOLVER takes one right-hand side per matrix";
    EX2D_CUDA_CHECK(libs().cusolverDnDpotrsBatched(solver, CUBLAS_FILL_MODE_LOWER, 3, 1,
                                                   a_ptrs.data(), 3, b_ptrs.data(), 3,
                                                   info.data() + 3, 3));
    const std::vector<double> x = b.read();
    for (int m : {0, 2}) {
        const double rhs[2][3] = {{1, 2, 3}, {3, 2, 1}};
        for (int i = 0; i < 3; ++i) {
            double ax = 0;
            for (int j = 0; j < 3; ++j) ax += kMatrices[9 * m + i + 3 * j] * x[3 * m + j];
            EXPECT_NEAR(ax, rhs[m / 2][i], 1e-12) << "matrix " << m << " row " << i;
        }
    }
    EXPECT_EQ(libs().cusolverDnDestroy(solver), CUSOLVER_STATUS_SUCCESS);
}

TEST(EmulatedLibraries, BatchedAndSingleEigenSolversAgreeAndRefuseWhatCuda13Refuses)
{
    cusolverDnHandle_t solver = nullptr;
    cusolverDnParams_t params = nullptr;
    ASSERT_EQ(libs().cusolverDnCreate(&solver), CUSOLVER_STATUS_SUCCESS);
    ASSERT_EQ(libs().cusolverDnCreateParams(&params), CUSOLVER_STATUS_SUCCESS);
    for (cusolverAlgMode_t alg : {CUSOLVER_ALG_0, CUSOLVER_ALG_1, CUSOLVER_ALG_2}) {
        EXPECT_EQ(libs().cusolverDnSetAdvOptions(params, CUSOLVERDN_SYEVBATCHED, alg),
                  CUSOLVER_STATUS_INVALID_VALUE);
    }
    const std::vector<double> spd = {4, 1, 0, 1, 3, 1, 0, 1, 2, 9, 3, 1, 3, 5, 2, 1, 2, 6};
    DeviceCopy batched(spd), single(spd), w_batched(std::vector<double>(6)),
        w_single(std::vector<double>(6));
    std::size_t device64 = 0, device128 = 0, host = 0, device2 = 0;
    auto size_for = [&](std::int64_t batch, std::size_t* device_bytes) {
        return libs().cusolverDnXsyevBatched_bufferSize(
            solver, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, 3, CUDA_R_64F,
            batched.array.data(), 3, CUDA_R_64F, w_batched.array.data(), CUDA_R_64F, device_bytes,
            &host, batch);
    };
    ASSERT_EQ(size_for(64, &device64), CUSOLVER_STATUS_SUCCESS);
    ASSERT_EQ(size_for(128, &device128), CUSOLVER_STATUS_SUCCESS);
    ASSERT_EQ(size_for(2, &device2), CUSOLVER_STATUS_SUCCESS);
    EXPECT_GT(device128, device64) << "the workspace grows with the batch";
    MemoryLedger ledger;
    DeviceArray<char> work("eigen workspace");
    DeviceArray<int> info("info");
    work.reserve(device2, ledger);
    info.reserve(3, ledger);
    auto solve_batched = [&](std::size_t bytes) {
        return libs().cusolverDnXsyevBatched(
            solver, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, 3, CUDA_R_64F,
            batched.array.data(), 3, CUDA_R_64F, w_batched.array.data(), CUDA_R_64F, work.data(),
            bytes, nullptr, host, info.data(), 2);
    };
    EXPECT_EQ(solve_batched(device2 - 1), CUSOLVER_STATUS_INVALID_VALUE);
    EX2D_CUDA_CHECK(solve_batched(device2));

    int lwork = 0;
    EX2D_CUDA_CHECK(libs().cusolverDnDsyevd_bufferSize(
        solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, 3, single.array.data(), 3,
        w_single.array.data(), &lwork));
    DeviceArray<double> single_work("syevd workspace");
    single_work.reserve(lwork, ledger);
    for (int m = 0; m < 2; ++m) {
        EX2D_CUDA_CHECK(
            libs().cusolverDnDsyevd(solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, 3,
                                    single.array.data() + 9 * m, 3, w_single.array.data() + 3 * m,
                                    single_work.data(), lwork, info.data() + 2));
    }
    const std::vector<double> wb = w_batched.read(), ws = w_single.read();
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(wb[k], ws[k], 1e-12) << k;
    // Trace and ascending order of the first matrix.
    EXPECT_NEAR(wb[0] + wb[1] + wb[2], 9.0, 1e-12);
    EXPECT_LT(wb[0], wb[1]);

    setenv("EX2D_EMULATION_SYEVBATCHED_MAX_N", "2", 1);
    EXPECT_EQ(size_for(64, &device64), CUSOLVER_STATUS_INVALID_VALUE);
    unsetenv("EX2D_EMULATION_SYEVBATCHED_MAX_N");
    EXPECT_EQ(libs().cusolverDnDestroyParams(params), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(libs().cusolverDnDestroy(solver), CUSOLVER_STATUS_SUCCESS);
}

TEST(EmulatedLibraries, StridedGemmAndBatchedTriangularSolveAreColumnMajor)
{
    cublasHandle_t blas = nullptr;
    ASSERT_EQ(libs().cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
    // Two 2x3 A (column-major), C = A^T A (3x3).
    const std::vector<double> a = {1, 2, 3, 4, 5, 6, -1, 0, 2, 1, 0, 3};
    DeviceCopy da(a), dc(std::vector<double>(18, 7.0));
    const double one = 1, zero = 0;
    EX2D_CUDA_CHECK(libs().cublasDgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, 3, 3, 2, &one,
                                                     da.array.data(), 2, 6, da.array.data(), 2, 6,
                                                     &zero, dc.array.data(), 3, 9, 2));
    const std::vector<double> c = dc.read();
    for (int m = 0; m < 2; ++m) {
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) {
                const double expected = a[6 * m + 2 * i] * a[6 * m + 2 * j] +
                                        a[6 * m + 2 * i + 1] * a[6 * m + 2 * j + 1];
                EXPECT_EQ(c[9 * m + i + 3 * j], expected);
            }
        }
    }
    EXPECT_EQ(libs().cublasDgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_N, 3, 3, 2, &one,
                                               da.array.data(), 1, 6, da.array.data(), 2, 6, &zero,
                                               dc.array.data(), 3, 9, 2),
              CUBLAS_STATUS_INVALID_VALUE)
        << "lda below the rows of A";

    // L = [[2, 0], [1, 4]] (lower, column-major); solve L X = B for B = L * [[1, 2], [3, 4]].
    DeviceCopy l({2, 1, 0, 4}), x({2, 13, 4, 18});
    MemoryLedger ledger;
    DeviceArray<const double*> l_ptr("pointers");
    DeviceArray<double*> x_ptr("pointers");
    l_ptr.reserve(1, ledger);
    x_ptr.reserve(1, ledger);
    const double* hl = l.array.data();
    double* hx = x.array.data();
    EX2D_CUDA_CHECK(
        cudaMemcpyAsync(l_ptr.data(), &hl, sizeof(hl), cudaMemcpyHostToDevice, nullptr));
    EX2D_CUDA_CHECK(
        cudaMemcpyAsync(x_ptr.data(), &hx, sizeof(hx), cudaMemcpyHostToDevice, nullptr));
    EX2D_CUDA_CHECK(libs().cublasDtrsmBatched(blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                              CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 2, 2, &one,
                                              l_ptr.data(), 2, x_ptr.data(), 2, 1));
    EXPECT_EQ(x.read(), (std::vector<double>{1, 3, 2, 4}));
    EXPECT_STREQ(libs().cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
                 "an invalid numeric value was used as an argument");
    EXPECT_EQ(libs().cublasDestroy(blas), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace ex2d::cuda
