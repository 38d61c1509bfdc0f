# SPDX-License-Identifier: BSD-3-Clause
"""PASS, WARN and FAIL: the thresholds (stated on the page) and how a frame and a camera's
frames are judged."""

import math

# (key, what, WARN above, FAIL above); fractions are of the frame's flux bins.
THRESHOLDS = (
    ("nan", "bins with NaN or Inf in FLUX, IVAR or CHI2PIX", None, 0),
    ("ivar0_frac", "fraction of bins with IVAR = 0", 0.02, 0.10),
    ("chi2_median", "median CHI2PIX", 2.0, 10.0),
    ("chi2_above5_frac", "fraction of bins with CHI2PIX > 5 x the frame's median", 0.01, 0.05),
    ("SOMEBADPIX", "fraction of bins with SOMEBADPIX", 0.02, 0.10),
    ("ALLBADPIX", "fraction of bins with ALLBADPIX", 0.01, 0.05),
    ("BAD2DFIT", "fraction of bins with BAD2DFIT", 0.01, 0.05),
    ("BADCOLUMN", "fraction of bins with BADCOLUMN", 0.05, 0.20),
    # Trace shifts (issue 31): the largest shift of any fibre, and the brightest fibres' median
    # CHI2PIX, which a PSF off by 0.1 px raises from 0.8 to 2.3 and by 0.2 px to 7.
    ("trace_shift_max", "largest trace shift |dx| or |dy| (px)", 1.0, 3.0),
    ("bright_chi2_median", "median CHI2PIX of the brightest 5% of fibres", 2.0, 5.0),
)
ORDER = {"PASS": 0, "WARN": 1, "FAIL": 2}


def quantities(rec):
    """The judged numbers of a readable frame (or of a camera's frames summed)."""
    n = rec["nbins"] or 1
    q = {"nan": rec["nan_flux"] + rec["nan_ivar"] + rec["nan_chi2pix"],
         "ivar0_frac": rec["ivar0"] / n, "chi2_median": rec["chi2_median"],
         "chi2_above5_frac": rec["chi2_above5"] / n}
    for bit, count in rec["mask"].items():
        q[bit] = count / n
    q["bright_chi2_median"] = rec.get("bright_chi2_median", 0.0)
    q["trace_shift_max"] = trace_shift_max(rec.get("trace_shifts"))
    return q


def trace_shift_max(shifts):
    """Largest |shift| the frame's header records, 0 without the step or measurement."""
    if not shifts:
        return 0.0
    values = [abs(shifts[k]) for k in ("mindx", "maxdx", "mindy", "maxdy")
              if shifts.get(k) is not None]
    return max(values) if values else 0.0


def judge(rec):
    """(flag, reasons) of one frame record (stats.frame_stats plus the fleet's state)."""
    if rec.get("error"):
        return "FAIL", [rec["error"]]
    q = quantities(rec)
    flag, reasons = "PASS", []
    shifts = rec.get("trace_shifts")
    if shifts and shifts["method"].upper() == "FAILED":
        # The fleet's rule (docs/fleet.md): extracted with the input PSF, and flagged.
        flag = "WARN"
        reasons.append("traces not shifted: " + (shifts["reason"] or "the step failed"))
    for key, what, warn, fail in THRESHOLDS:
        v = q[key]
        if isinstance(v, float) and math.isnan(v):
            flag = "FAIL"
            reasons.append("%s is NaN" % what)
        elif fail is not None and v > fail:
            flag = "FAIL"
            reasons.append("%s %s > %s" % (what, fmt(v), fmt(fail)))
        elif warn is not None and v > warn:
            if flag == "PASS":
                flag = "WARN"
            reasons.append("%s %s > %s" % (what, fmt(v), fmt(warn)))
    return flag, reasons


def worst(flags):
    flags = list(flags)
    return max(flags, key=lambda f: ORDER[f]) if flags else "PASS"


def fmt(v):
    if isinstance(v, int):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) < 1e-3 or abs(v) >= 1e5:
        return "%.2e" % v
    return "%.4g" % v
