// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/fault_injection.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "ex2d/logging.hpp"

// Compiled only in builds with test hooks (services/common/CMakeLists.txt).
namespace ex2d::service {

void test_delay(const char* stage)
{
    const std::string name = std::string("EX2D_TEST_DELAY_") + stage + "_MS";
    const char* value = std::getenv(name.c_str());
    if (!value || !*value) return;
    const long ms = std::atol(value);
    if (ms <= 0) return;
    logger()->info("{}: sleeping {} ms", name, ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool test_poisoned(const std::string& job_id)
{
    const char* poison = std::getenv("EX2D_TEST_POISON_JOB");
    return poison && *poison && job_id == poison;
}

int test_fsync_errno(const char* what)
{
    const std::string name = std::string("EX2D_TEST_FAIL_FSYNC_") + what;
    const char* flag = std::getenv(name.c_str());
    if (!flag || !*flag || ::access(flag, F_OK) != 0) return 0;
    logger()->info("{}: {} exists, reporting ENOSPC", name, flag);
    return ENOSPC;
}

}  // namespace ex2d::service
