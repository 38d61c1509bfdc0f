// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file fault_injection.hpp
/// Test-only fault injection for the fleet's fault tests and chaos soak, driven by environment
/// variables that no deployment sets (docs/fault-tests.md):
///   EX2D_TEST_DELAY_READ_MS, EX2D_TEST_DELAY_EXTRACT_MS, EX2D_TEST_DELAY_WRITE_MS: sleep this
///     long in that stage, so that a test can kill a process in the middle of a frame (the
///     writer's sleep sits between its last lease check and its rename, with the temporary
///     file complete: the window a stalled writer must not be able to abuse);
///   EX2D_TEST_DELAY_TRACE_SHIFTS_MS: the same in a worker's trace-shift step (its own thread),
///     so that a test can stop a worker while the step runs or make the extraction wait for it;
///   EX2D_TEST_POISON_JOB: a worker that receives this job id kills itself with SIGKILL, as a
///     frame that crashes its worker would;
///   EX2D_TEST_FAIL_FSYNC_FILE, EX2D_TEST_FAIL_FSYNC_DIR: the path of a flag file; while it
///     exists, the writer's fsync of its temporary file (FILE) or of the exposure folder after
///     the rename (DIR) fails with ENOSPC, as a full thin-provisioned or network volume reports
///     it at the fsync, which a tmpfs never does.
/// Only builds configured with EX2D_TEST_HOOKS=ON (CI, benchmarks) read them. In every other
/// build (the default, the container images) both functions are empty inline functions: no
/// variable is read, and nothing of the hooks is compiled into the programs.

#include <string>

namespace ex2d::service {

#if EX2D_TEST_HOOKS

/// Sleeps for EX2D_TEST_DELAY_<STAGE>_MS milliseconds (stage: READ, EXTRACT, WRITE,
/// TRACE_SHIFTS), if set.
void test_delay(const char* stage);
/// True when EX2D_TEST_POISON_JOB names `job_id`.
bool test_poisoned(const std::string& job_id);
/// ENOSPC while the flag file EX2D_TEST_FAIL_FSYNC_<WHAT> names exists (what: FILE, DIR),
/// else 0: the errno a successful fsync is to be reported with instead.
int test_fsync_errno(const char* what);

#else

inline void test_delay(const char* /*stage*/) {}
inline bool test_poisoned(const std::string& /*job_id*/)
{
    return false;
}
inline int test_fsync_errno(const char* /*what*/)
{
    return 0;
}

#endif

}  // namespace ex2d::service
