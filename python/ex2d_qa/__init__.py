# SPDX-License-Identifier: BSD-3-Clause
"""ex2d_qa: an HTML QA report of ex2d's frame files (an exposure, a night or a campaign), with
the fleet's state and timings from Redis where ``ex2dctl`` reaches it. Run as ``ex2dctl qa``
(or ``python3 -m ex2d_qa``); needs numpy, astropy, matplotlib and Jinja2."""

__all__ = ["Report"]


def __getattr__(name):
    if name == "Report":
        from .report import Report
        return Report
    raise AttributeError(name)
