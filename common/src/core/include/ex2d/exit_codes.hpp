// SPDX-License-Identifier: BSD-3-Clause
#pragma once

/// @file exit_codes.hpp
/// The exit codes of every ex2d program: the `ex2d` tool (and `desi_extract_spectra`,
/// `desi_compute_trace_shifts`), `ex2dctl` and the fleet's services (`ex2d-reader`,
/// `ex2d-worker`, `ex2d-writer`). One table, documented once (docs/usage.md, "Exit codes"): a
/// code means the same in every program, and each program uses the codes of the failures it
/// can have.

#include "ex2d/status.hpp"

namespace ex2d {

enum ExitCode : int {
    kExitOk = 0,  ///< success; a service's normal end or drain (SIGTERM included), --help
    /// A failure while running: the extraction or a measurement failed, the backend asked for
    /// is not built or has no device, or an internal error (an exception no caller handled).
    kExitRuntime = 1,
    /// Usage or configuration: an unknown option, a bad or contradictory value, a bad
    /// configuration file or key, a refused Redis password; a service that refuses to start
    /// (unsafe Redis, an address it cannot bind, CURVE keys missing or refused).
    kExitUsage = 2,
    kExitInput = 3,   ///< an input file is missing, unreadable or not in the expected format
    kExitOutput = 4,  ///< an output file or its folder cannot be written, the disk is full
    kExitRedis = 5,   ///< Redis unreachable or answering with an error (ex2dctl)
    kExitWithErrors =
        6,  ///< ex2dctl wait: the exposure ended with failed or dead frames, or cancelled
    kExitTimeout = 7,  ///< ex2dctl wait: --timeout passed
    /// A worker's device failed mid-frame (the frame went back to the queue): its supervisor
    /// restarts it, and an operator looks at the device if it keeps failing.
    kExitDevice = 8,
};

/// 128 + N: ended by signal N, as a shell reports it (ex2d after SIGINT or SIGTERM, once its
/// temporary files are removed; any program killed by a signal it does not handle).
constexpr int exit_code_for_signal(int signal)
{
    return 128 + signal;
}

/// The exit code of a failed operation by its status: invalid_argument -> usage, io and
/// format errors -> input, anything else -> runtime; ok -> ok. A caller that knows better
/// (a file being written is output) gives the code itself.
inline int exit_code_for(const Status& status)
{
    switch (status.code()) {
        case StatusCode::ok:
            return kExitOk;
        case StatusCode::invalid_argument:
            return kExitUsage;
        case StatusCode::io_error:
        case StatusCode::format_error:
            return kExitInput;
        case StatusCode::device_failed:
            return kExitDevice;
        default:
            return kExitRuntime;
    }
}

}  // namespace ex2d
