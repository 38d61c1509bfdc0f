// SPDX-License-Identifier: BSD-3-Clause
// Choosing a backend by name: the CPU one always, the CUDA one where it is built and a
// device is present, and a clear status otherwise (never an exception to the caller).
#include <gtest/gtest.h>

#include "ex2d/extraction_backend.hpp"

namespace ex2d {
namespace {

TEST(BackendFactory, CpuIsAlwaysAvailable)
{
    auto backend = make_backend("cpu", 1);
    ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
    EXPECT_EQ(backend.value()->name(), "cpu");
    EXPECT_TRUE(backend.value()->device_report().device_name.empty());
}

TEST(BackendFactory, CudaAnswersWithAStatusWhereItCannotRun)
{
    auto backend = make_backend("cuda", 1);
    if (cuda_device_count() > 0) {
        ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
        EXPECT_EQ(backend.value()->name(), "cuda");
        EXPECT_FALSE(backend.value()->device_report().device_name.empty());
        return;
    }
    ASSERT_FALSE(backend.is_ok());
    const StatusCode code = backend.status().code();
    EXPECT_TRUE(code == StatusCode::not_compiled || code == StatusCode::device_unavailable)
        << backend.status().to_string();
    EXPECT_NE(backend.status().message().find("CUDA"), std::string::npos)
        << backend.status().to_string();
}

TEST(BackendFactory, DeviceIndexBeyondTheDevicesIsUnavailable)
{
    CudaBackendOptions options;
    options.device = 64;
    auto backend = make_backend("cuda", 1, options);
    ASSERT_FALSE(backend.is_ok());
    const StatusCode code = backend.status().code();
    EXPECT_TRUE(code == StatusCode::not_compiled || code == StatusCode::device_unavailable);
}

TEST(BackendFactory, AutoTakesTheGpuWhereThereIsOne)
{
    auto backend = make_backend("auto", 1);
    ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
    EXPECT_EQ(backend.value()->name(), cuda_device_count() > 0 ? "cuda" : "cpu");
}

TEST(BackendFactory, UnknownNameIsInvalid)
{
    auto backend = make_backend("gpu", 1);
    ASSERT_FALSE(backend.is_ok());
    EXPECT_EQ(backend.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(backend.status().message().find("gpu"), std::string::npos);
}

}  // namespace
}  // namespace ex2d
