# SPDX-License-Identifier: BSD-3-Clause
"""ex2d's extraction engine in-process.

Spectro-perfectionism (Bolton & Schlegel 2010) on DESI's Gauss-Hermite PSFs, the engine of
the ``ex2d`` program, on numpy arrays: ``read_psf``, ``read_preproc``, ``extract``; and its
command lines in this process: ``run``, ``extract_file``. Its log
lines go to Python's ``logging`` (logger ``"ex2d"``); its errors are ``ex2d.Error`` and its
subclasses, one per exit-code class of the program. See docs/python.md.
"""
from ._ex2d import (
    Backend,
    Error,
    Extraction,
    ExtractionError,
    InputError,
    OutputError,
    Preproc,
    Psf,
    UsageError,
    __version__,
    cuda_device_count,
    extract,
    read_preproc,
    read_psf,
    run,
)


def extract_file(input, psf, output, **options):  # noqa: A002 (ex2d extract's own name)
    """``ex2d extract`` in this process: reads ``input`` and ``psf``, writes the frame file
    ``output`` (and ``model=``, ``timingfile=`` ...) exactly as the program does. Options are
    the program's long options with ``_`` for ``-``: ``nspec=25``, ``wavelength=(wmin, wmax,
    dw)``, ``backend="cuda"``, ``no_scores=True``; None and False leave one out. Returns the
    read, extract and write steps as :func:`run` does."""
    args = ["extract", "--input", str(input), "--psf", str(psf), "--output", str(output)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (tuple, list)):
            args += [flag, ",".join(repr(float(v)) for v in value)]
        else:
            args += [flag, str(value)]
    return run(args)

__all__ = [
    "Backend",
    "Error",
    "Extraction",
    "ExtractionError",
    "InputError",
    "OutputError",
    "Preproc",
    "Psf",
    "UsageError",
    "__version__",
    "cuda_device_count",
    "extract",
    "extract_file",
    "read_preproc",
    "read_psf",
    "run",
]
