# SPDX-License-Identifier: BSD-3-Clause
"""desi_proc's traceshift step with ex2d: ``trace_shifts_main(cmdargs)`` takes the argument
list desi_proc builds for ``desispec.scripts.trace_shifts.main`` and runs ``ex2d
trace-shifts`` with it (the same options, docs/usage.md section 8)."""

import subprocess

from .extract import Ex2dError, ex2d_binary


def trace_shifts_command(cmdargs, binary=None):
    """The ex2d command line for desi_compute_trace_shifts' arguments ``cmdargs``."""
    return [binary or ex2d_binary(), "trace-shifts"] + [str(a) for a in cmdargs]


def trace_shifts_main(cmdargs, binary=None):
    """Runs ``ex2d trace-shifts`` for ``cmdargs``; raises Ex2dError with ex2d's last line and
    exit code when it fails (desispec's runcmd then counts the camera as failed)."""
    result = subprocess.run(trace_shifts_command(cmdargs, binary), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    print(result.stdout, end="", flush=True)
    if result.returncode != 0:
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        message = lines[-1] if lines else "ex2d trace-shifts exited {}".format(result.returncode)
        raise Ex2dError(result.returncode, message)
