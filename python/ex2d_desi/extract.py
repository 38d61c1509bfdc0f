# SPDX-License-Identifier: BSD-3-Clause
"""``ex2d extract`` for a parsed ``desi_extract_spectra`` namespace."""

import logging
import os
import re
import shutil
import subprocess
import time

from . import ranks
from .fibermap_columns import exported_desispec_table, exported_fds

# desi_extract_spectra options (desispec.scripts.extract.parse) that take a value, with the
# ex2d extract flag each becomes; None values are left out, as desispec's defaults apply.
VALUE_OPTIONS = (
    ("input", "-i"),
    ("fibermap", "-f"),
    ("psf", "-p"),
    ("output", "-o"),
    ("model", "-m"),
    ("wavelength", "-w"),
    ("specmin", "-s"),
    ("nspec", "-n"),
    ("regularize", "-r"),
    ("bundlesize", "--bundlesize"),
    ("nsubbundles", "--nsubbundles"),
    ("nwavestep", "--nwavestep"),
    ("psferr", "--psferr"),
    ("pixpad_frac", "--pixpad-frac"),
    ("wavepad_frac", "--wavepad-frac"),
)
# Flags that ex2d extract accepts as they are. --use-specter and --decorrelate-fibers are
# passed on too: ex2d refuses them with its own message, as it would on the command line.
FLAG_OPTIONS = (
    ("verbose", "-v"),
    ("mpi", "--mpi"),
    ("decorrelate_fibers", "--decorrelate-fibers"),
    ("no_scores", "--no-scores"),
    ("barycentric_correction", "--barycentric-correction"),
    ("use_specter", "--use-specter"),
    ("no_gpu", "--no-gpu"),
)


class Ex2dError(RuntimeError):
    """ex2d extract failed: ``returncode`` is its exit code (docs/usage.md: 1 runtime,
    2 usage, 3 input, 4 output, 128+N signal), the message its last line."""

    def __init__(self, returncode, message):
        super().__init__(message)
        self.returncode = returncode


def ex2d_binary():
    """The ex2d program: $EX2D_BINARY, else ``ex2d`` on PATH."""
    path = os.environ.get("EX2D_BINARY") or shutil.which("ex2d")
    if not path:
        raise Ex2dError(1, "ex2d not found: put it on PATH or set EX2D_BINARY")
    return path


def extract_command(args, threads=None, binary="ex2d", fibermap_columns=None, device=None):
    """The ``ex2d extract`` command line (a list) for the namespace ``args``;
    ``fibermap_columns`` is a JSON table of FIBERMAP descriptions (fibermap_columns.py),
    ``device`` a CUDA device index."""
    command = [binary, "extract"]
    for name, flag in VALUE_OPTIONS:
        value = getattr(args, name, None)
        if value is not None:
            command += [flag, str(value)]
    for name, flag in FLAG_OPTIONS:
        if getattr(args, name, False):
            command.append(flag)
    if threads:
        command += ["--threads", str(threads)]
    if fibermap_columns:
        command += ["--fibermap-columns", fibermap_columns]
    if device is not None:
        command += ["--device", str(device)]
    return command


def run_ex2d(command, cpus, timing=None, share=None):
    """Runs the ``ex2d extract`` command line ``command`` on ``cpus``: in this process through
    the ex2d module where it imports (log lines live in Python's logging; ``timing`` gets the
    steps, record_steps), else as the program. ``share`` (a ranks.PartExchange, module only)
    makes it extract this rank's share of the bundles. Raises Ex2dError with ex2d's message
    and exit code on failure."""
    try:
        import ex2d
    except ImportError as err:
        logging.getLogger(__name__).info("the ex2d module does not import (%s): running the "
                                         "ex2d program", err)
        run_program(command, cpus)
        return
    previous = os.sched_getaffinity(0)
    widen_affinity(cpus)
    try:
        steps = ex2d.run(command[1:], share=share)
    except ex2d.Error as err:
        raise Ex2dError(err.exit_code, str(err)) from err
    finally:
        widen_affinity(previous)
    if steps:
        record_steps(timing, steps, camera_of(command))


def camera_of(command):
    """The camera in the output (else input) file name of an ``ex2d extract`` command line:
    ``r0`` for ``frame-r0-00051060.fits``; None where the names follow no such pattern."""
    for flag in ("-o", "-i"):
        if flag in command[:-1]:
            name = os.path.basename(command[command.index(flag) + 1])
            match = re.match(r"[a-z]+-([brz]\d)-", name)
            if match:
                return match.group(1)
    return None


def record_steps(timing, steps, camera):
    """ex2d's read, extract and write steps into desi_proc's timing: a dict gets the marks
    ``ex2d-frame-start``, ``ex2d-read``, ``ex2d-extract``, ``ex2d-write`` (when each step
    ended, as main_gpu_specter's ``frame-*``); a desiutil Timer gets the steps
    ``ex2d-read-CAMERA`` etc., with their own start and stop times. A rank that extracted a
    share of the bundles and did not write has no write step."""
    done = [step for step in ("read", "extract", "write") if step in steps]
    if isinstance(timing, dict):
        timing["ex2d-frame-start"] = steps["read"][0]
        for step in done:
            timing["ex2d-" + step] = steps[step][1]
    elif hasattr(timing, "start") and hasattr(timing, "stop"):
        for step in done:
            name = "ex2d-" + step + ("-" + camera if camera else "")
            timing.start(name, starttime=steps[step][0])
            timing.stop(name, stoptime=steps[step][1])


def widen_affinity(cpus):
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        pass  # a cpuset narrower than the group's union: ex2d uses what it is given


def run_program(command, cpus):
    """The ex2d program for ``command``, where the module is not installed."""
    result = subprocess.run([ex2d_binary(), *command[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, pass_fds=exported_fds(),
                            preexec_fn=lambda: widen_affinity(cpus))
    print(result.stdout, end="", flush=True)
    if result.returncode != 0:
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        message = lines[-1] if lines else "ex2d extract exited {}".format(result.returncode)
        raise Ex2dError(result.returncode, message)


def wait_without_spinning(comm, poll_s=0.05):
    """Waits for rank 0 with a non-blocking barrier and sleeps in between: a blocking MPI
    wait spins on its core, which ex2d's threads on rank 0 need."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll_s)


def main_ex2d(args, comm=None, timing=None, coordinator=None):
    """Extracts one camera as ``main_gpu_specter(args, comm=None)`` does, with ex2d.

    ex2d runs in this process through the ex2d module (its log lines into Python's logging,
    its steps into ``timing``), or as the program where the module is not installed.
    Without ``comm``, ex2d runs with one thread per CPU of this process's affinity.
    With ``comm`` (or a gpu_specter ``coordinator``'s), every rank of the group calls this:
    the extractors (ranks.py: one rank per node on CPUs, one per GPU on GPU nodes) each
    extract a share of the bundles and rank 0 writes the frame; the other ranks wait without
    spinning; every rank raises Ex2dError if any extractor failed. ex2d uses the GPUs it sees
    (``--no-gpu`` or $DESI_NO_GPU keep it on the CPU). Where desispec can be imported, the
    frame's FIBERMAP gets desispec's own column descriptions. ``timing`` is a dict of time
    marks, as main_gpu_specter's (``ex2d-frame-start``, ``ex2d-read``, ``ex2d-extract``,
    ``ex2d-write``, names that do not clash with desispec's ``frame-*``), or desi_proc's
    desiutil Timer, which gets the steps ``ex2d-read-CAMERA``, ``ex2d-extract-CAMERA`` and
    ``ex2d-write-CAMERA`` (record_steps).
    """
    if comm is None and coordinator is not None:
        comm = getattr(coordinator, "comm", None)
    columns = exported_desispec_table()
    if comm is None:
        cpus = set(os.sched_getaffinity(0))
        run_ex2d(extract_command(args, threads=len(cpus), fibermap_columns=columns), cpus,
                 timing)
        return
    members = comm.allgather(ranks.member())
    plan = None
    if comm.rank == 0:
        shareable = ranks.module_imports()
        plan = ranks.plan_extractors(members, ranks.visible_gpus(args),
                                     ranks.bundles_in(args) if shareable else 1, shareable)
    plan = comm.bcast(plan, root=0)
    error = None
    if comm.rank in plan:
        cpus, device = plan[comm.rank]
        share = ranks.PartExchange(comm, sorted(plan)) if len(plan) > 1 else None
        try:
            run_ex2d(extract_command(args, threads=len(cpus), fibermap_columns=columns,
                                     device=device), set(cpus), timing, share)
        except Ex2dError as err:
            error = (err.returncode, str(err))
            if share is not None:
                share.failed(error)
    if comm.rank == 0:
        comm.Ibarrier().Wait()
    else:
        wait_without_spinning(comm)
    error = comm.bcast(error, root=0)
    if error is not None:
        raise Ex2dError(*error)


def extract_main(cmdargs, comm=None, timing=None):
    """``desi_extract_spectra``'s argument list (as desispec.scripts.extract.main takes it),
    parsed by desispec and extracted by main_ex2d in this process: desi_proc's run without MPI
    calls this through desispec.util.runcmd where it ran the desi_extract_spectra program."""
    from desispec.scripts.extract import parse
    main_ex2d(parse(cmdargs), comm=comm, timing=timing)


def extract_main_timed(timer):
    """extract_main with desi_proc's Timer bound, for runcmd, which passes only the arguments."""
    def ex2d_extract(cmdargs):
        extract_main(cmdargs, timing=timer)
    return ex2d_extract
