// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// CPU-time clocks for the stage split: core-seconds stay meaningful when the machine is
/// shared, where wall-clock time per thread would count time spent descheduled.

#include <ctime>

namespace ex2d::cpu {

/// CPU seconds consumed by the calling thread.
inline double thread_cpu_seconds()
{
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Charges the thread's CPU time since the previous charge to a stage, so that each stage
/// boundary costs one clock read: the thread clock is a system call, not a vDSO read, and a
/// patch crosses about fifteen boundaries.
class StageClock {
public:
    StageClock() : last_(thread_cpu_seconds()) {}
    void charge(double& stage_seconds)
    {
        const double now = thread_cpu_seconds();
        stage_seconds += now - last_;
        last_ = now;
    }

private:
    double last_;
};

/// CPU seconds consumed by the whole process (all threads).
inline double process_cpu_seconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace ex2d::cpu
