# SPDX-License-Identifier: BSD-3-Clause
"""ex2d's extraction engine in-process.

Spectro-perfectionism (Bolton & Schlegel 2010) on DESI's Gauss-Hermite PSFs, the engine of
the ``ex2d`` program, on numpy arrays: ``read_psf``, ``read_preproc``, ``extract``. Its log
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
    extract,
    read_preproc,
    read_psf,
)

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
    "extract",
    "read_preproc",
    "read_psf",
]
