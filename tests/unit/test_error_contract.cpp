// SPDX-License-Identifier: BSD-3-Clause
// The error contract: one exit-code table for ex2d, ex2dctl and the services (docs/usage.md,
// "Exit codes"), the code a failed status maps to, and a Result read without being checked as
// a typed programming error (ex2d::Error), not a bare std::logic_error.
#include <csignal>
#include <string>

#include <gtest/gtest.h>

#include "ex2d/exit_codes.hpp"
#include "ex2d/status.hpp"

namespace ex2d {
namespace {

// Scripts read these numbers (desi_proc through python/ex2d_desi, deploy/slurm, operators'
// own): they change only together with docs/usage.md.
TEST(ExitCodes, OneTableForEveryProgram)
{
    EXPECT_EQ(kExitOk, 0);
    EXPECT_EQ(kExitRuntime, 1);
    EXPECT_EQ(kExitUsage, 2);
    EXPECT_EQ(kExitInput, 3);
    EXPECT_EQ(kExitOutput, 4);
    EXPECT_EQ(kExitRedis, 5);
    EXPECT_EQ(kExitWithErrors, 6);
    EXPECT_EQ(kExitTimeout, 7);
    EXPECT_EQ(exit_code_for_signal(SIGINT), 130);
    EXPECT_EQ(exit_code_for_signal(SIGTERM), 143);
}

TEST(ExitCodes, AFailedStatusMapsToItsClass)
{
    EXPECT_EQ(exit_code_for(Status::ok()), kExitOk);
    EXPECT_EQ(exit_code_for(Status::invalid("-n 30")), kExitUsage);
    EXPECT_EQ(exit_code_for(Status::io("psf.fits: no such file")), kExitInput);
    EXPECT_EQ(exit_code_for(Status::format("psf.fits: no HDU named XTRACE")), kExitInput);
    EXPECT_EQ(exit_code_for(Status::numerical("no lit fibre")), kExitRuntime);
    EXPECT_EQ(exit_code_for(Status(StatusCode::not_compiled, "cuda")), kExitRuntime);
    EXPECT_EQ(exit_code_for(Status(StatusCode::device_unavailable, "no GPU")), kExitRuntime);
}

TEST(Result, ValueOfAnErrorIsABadResultAccessNamingTheStatus)
{
    Result<int> failed = Status::io("psf.fits: no such file");
    ASSERT_FALSE(failed.is_ok());
    EXPECT_THROW((void)failed.value(), BadResultAccess);
    try {
        (void)std::move(failed).value();
        FAIL() << "no exception";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("I/O error: psf.fits: no such file"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(Result<int>{Status::ok()}, BadResultAccess);
    Result<int> value = 3;
    ASSERT_TRUE(value.is_ok());
    EXPECT_EQ(value.value(), 3);
    EXPECT_TRUE(value.status().is_ok());
}

}  // namespace
}  // namespace ex2d
