// SPDX-License-Identifier: BSD-3-Clause
// The BLAS the CPU backend runs on is the one the build was configured for (BLA_VENDOR): a
// reference or MKL build whose tests ran on OpenBLAS through a shared soname (Debian's
// libblas.so.3 alternatives) would prove nothing about that implementation.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "blas_threads.hpp"
#include "lapack_fortran.hpp"

namespace ex2d {
namespace {

// What use_single_threaded_blas() reports for each BLA_VENDOR; empty where CMake's vendor
// name does not say which library it is (All, or a vendor with no thread call we know).
std::string expected_for(const std::string& vendor)
{
    if (vendor == "OpenBLAS") return "OpenBLAS";
    if (vendor.rfind("Intel10", 0) == 0) return "MKL";
    if (vendor == "FLAME") return "BLIS";
    if (vendor == "Generic") return "a BLAS without thread control";
    return "";
}

TEST(BlasVendor, TheBlasInUseIsTheConfiguredOne)
{
    // A LAPACK call first, as the backend makes: the library that answers it is the one
    // linked (a process that calls none may not load any).
    double one = 4.0;
    ASSERT_EQ(lapack::dpotrf('L', 1, &one, 1), 0);
    EXPECT_EQ(one, 2.0);
    const std::string found = use_single_threaded_blas();
    const std::string expected = expected_for(EX2D_BLA_VENDOR);
    std::printf("BLA_VENDOR %s: the process runs on %s\n", EX2D_BLA_VENDOR, found.c_str());
    if (expected.empty()) GTEST_SKIP() << "BLA_VENDOR " << EX2D_BLA_VENDOR << " names no library";
    EXPECT_EQ(found, expected);
}

}  // namespace
}  // namespace ex2d
