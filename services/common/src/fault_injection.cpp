// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/service/fault_injection.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ex2d/logging.hpp"

namespace ex2d::service {

#ifdef EX2D_TEST_HOOKS

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

#else

// Release builds (images, EX2D_TEST_HOOKS=OFF): a stray variable in a deployment can neither
// slow a frame down nor kill a worker.
void test_delay(const char*) {}
bool test_poisoned(const std::string&)
{
    return false;
}

#endif

}  // namespace ex2d::service
