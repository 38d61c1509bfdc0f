# SPDX-License-Identifier: BSD-3-Clause
"""An exposure's cameras handed to a running ex2d fleet (``ex2dctl submit``, then ``wait``)."""

import os
import shutil
import subprocess

from .extract import Ex2dError


def ex2dctl_binary():
    """The ex2dctl program: $EX2DCTL_BINARY, else ``ex2dctl`` on PATH."""
    path = os.environ.get("EX2DCTL_BINARY") or shutil.which("ex2dctl")
    if not path:
        raise Ex2dError(1, "ex2dctl not found: put it on PATH or set EX2DCTL_BINARY")
    return path


def submit_command(exposure_dir, psf_template, output_root, extra=(), binary=None):
    """The ``ex2dctl submit`` command line for an exposure folder of preproc files."""
    return [binary or ex2dctl_binary(), "submit", "--exposure-dir", str(exposure_dir),
            "--psf", psf_template, "--output-root", str(output_root)] + list(extra)


def submit_exposure(exposure_dir, psf_template, output_root, expid, campaign="nightly",
                    timeout_s=0, timingfile=None, extra=(), binary=None):
    """Submits the exposure's cameras to the fleet the environment names (EX2D_REDIS_HOST,
    EX2D_REDIS_PORT, ...; docs/fleet.md) and waits until it has ended. Raises Ex2dError
    with ex2dctl's message when the submission is refused or a frame failed."""
    binary = binary or ex2dctl_binary()
    commands = [
        submit_command(exposure_dir, psf_template, output_root, extra, binary),
        [binary, "wait", "--exposure", str(expid), "--campaign", campaign,
         "--timeout", str(timeout_s)] + (["--timingfile", timingfile] if timingfile else []),
    ]
    for command in commands:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        print(result.stdout, end="", flush=True)
        if result.returncode != 0:
            lines = [line for line in result.stdout.splitlines() if line.strip()]
            raise Ex2dError(result.returncode,
                            lines[-1] if lines else "ex2dctl exited {}".format(result.returncode))
