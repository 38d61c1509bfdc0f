# SPDX-License-Identifier: BSD-3-Clause
"""The metadata is in pyproject.toml; this only says that the package holds a compiled module
(ex2d/_ex2d*.so, built by CMake), so that the wheel is tagged for this Python and platform and
installed where compiled modules go, not as a pure-Python one."""

from setuptools import setup
from setuptools.dist import Distribution


class CompiledDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=CompiledDistribution)
