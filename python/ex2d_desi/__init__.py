# SPDX-License-Identifier: BSD-3-Clause
"""desi_proc's hook for ex2d (the standard library, and the ex2d module where installed).

``main_ex2d(args, comm=None, timing=None)`` takes the parsed ``desi_extract_spectra``
arguments, as ``desispec.scripts.extract.main_gpu_specter`` does, and runs ``ex2d extract``
for them in this process (the program where the module is not installed); ``extract_main``
takes desi_extract_spectra's argument list instead (desi_proc's run without MPI);
``submit_exposure`` hands an exposure's cameras to a running fleet instead (``ex2dctl``);
``trace_shifts_main(cmdargs)`` runs desi_proc's traceshift step with ``ex2d trace-shifts``.
"""

from .extract import Ex2dError, extract_command, extract_main, extract_main_timed, main_ex2d
from .fleet import submit_exposure
from .trace_shifts import trace_shifts_command, trace_shifts_main

__all__ = ["Ex2dError", "extract_command", "extract_main", "extract_main_timed", "main_ex2d",
           "submit_exposure", "trace_shifts_command", "trace_shifts_main"]
