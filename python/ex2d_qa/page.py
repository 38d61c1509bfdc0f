# SPDX-License-Identifier: BSD-3-Clause
"""The report's HTML: one file, inline CSS, figures as data: URIs, and the numbers again as
JSON (<script type="application/json" id="qa-data">) for scripts and tests. The markup is in
templates/ (Jinja2, every value escaped); this module gathers what they show."""

import datetime
import math
import os
import socket

import jinja2
import numpy as np

from . import checks
from .fleet import frame_timing
from .stats import SUMMARY_BITS


def _score_columns(frames):
    snr, count = None, None
    for f in frames:
        for name in (f.rec or {}).get("scores", {}):
            if name.startswith("MEDIAN_RAW_SNR"):
                snr = name
            if name.startswith("MEDIAN_RAW_COUNT"):
                count = name
    return snr, count


def outcome(f):
    """done, failed (by the fleet, or a missing or unreadable file), dead, or other (queued,
    in flight, cancelled)."""
    state = f.fleet.get("state") if f.fleet else None
    if state in ("failed", "dead"):
        return state
    if state and state != "done":
        return "other"
    return "done" if f.readable else "failed"


def summarise(frames):
    """One summary row over frames of one camera (or one frame): counts, fractions over all
    their bins, medians of the frames' medians, the worst flag."""
    readable = [f for f in frames if f.readable]
    states = [outcome(f) for f in frames]
    row = {"frames": len(frames), "done": states.count("done"), "failed": states.count("failed"),
           "dead": states.count("dead"), "other": states.count("other"),
           "flag": checks.worst(f.flag for f in frames)}
    bins = sum(f.rec["nbins"] for f in readable)
    row["bins"] = bins
    row["nan"] = sum(f.rec["nan_flux"] + f.rec["nan_ivar"] + f.rec["nan_chi2pix"]
                     for f in readable)
    row["ivar0"] = sum(f.rec["ivar0"] for f in readable)
    row["chi2_above5"] = sum(f.rec["chi2_above5"] for f in readable)
    row["mask"] = {b: sum(f.rec["mask"][b] for f in readable) for b in SUMMARY_BITS}
    medians = [f.rec["chi2_median"] for f in readable]
    row["chi2_median"] = float(np.median(medians)) if medians else None
    snr, count = _score_columns(readable)
    row["snr_column"], row["count_column"] = snr, count
    for key, col in (("snr", snr), ("counts", count)):
        vals = [f.rec["scores"][col] for f in readable if col in f.rec.get("scores", {})]
        row[key] = float(np.median(vals)) if vals else None
    for b in SUMMARY_BITS:
        row[b + "_frac"] = row["mask"][b] / bins if bins else None
    row["ivar0_frac"] = row["ivar0"] / bins if bins else None
    row["chi2_above5_frac"] = row["chi2_above5"] / bins if bins else None
    return row


def frames_per_hour(timings):
    done = [t for t in timings if t["done"] is not None and t["start"] is not None]
    if not done:
        return None
    span = max(t["done"] for t in done) - min(t["start"] for t in done)
    return 3600.0 * len(done) / span if span > 0 else None


def exposure_view(report, night, expid, cams):
    """What templates/exposure.html.j2 shows of one exposure."""
    frames = [cams[c] for c in sorted(cams)]
    timing = report.timing.get((night, expid), {})
    timings = [(f, frame_timing(f.fleet) if f.fleet else None) for f in frames]
    fph = None
    if timing.get("available"):
        fph = frames_per_hour([t for _, t in timings if t is not None])
    return {"expid": expid, "anchor": "exp-%s-%s" % (night, expid), "cams": cams,
            "frames": frames, "flag": checks.worst(f.flag for f in frames),
            "summaries": [summarise([f]) for f in frames],
            "problems": [f for f in frames if f.flag != "PASS"],
            "readable": [f for f in frames if f.readable],
            "timing": timing, "timings": timings, "frames_per_hour": fph,
            "undetailed": [f.camera for f in frames if f.readable and not f.figure],
            "folder": os.path.dirname(frames[0].path) if frames else ""}


def night_view(report, night, exposures):
    """A night's exposures and its per-camera summary rows."""
    by_camera = {}
    for cams in exposures.values():
        for cam, f in cams.items():
            by_camera.setdefault(cam, []).append(f)
    flags = [f.flag for cams in exposures.values() for f in cams.values()]
    return {"night": night, "flags": flags, "flag": checks.worst(flags),
            "cameras": {cam: summarise(by_camera[cam]) for cam in sorted(by_camera)},
            "exposures": [exposure_view(report, night, e, exposures[e])
                          for e in sorted(exposures)]}


def frame_json(f):
    rec = {k: v for k, v in (f.rec or {}).items() if k not in ("detail", "figure")}
    rec.update(night=f.night, expid=f.expid, camera=f.camera, path=f.path, flag=f.flag,
               reasons=f.reasons, state=f.state, detail_shown=bool(f.figure))
    if f.readable:
        rec["quantities"] = checks.quantities(f.rec)
    if f.fleet:
        rec["fleet"] = f.fleet
        rec["timing"] = frame_timing(f.fleet)
    return rec


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


def _environment():
    env = jinja2.Environment(loader=jinja2.PackageLoader("ex2d_qa", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = checks.fmt
    env.tests["nan"] = lambda v: isinstance(v, float) and math.isnan(v)
    env.globals["summary_bits"] = SUMMARY_BITS
    return env


def render_page(report, title=None):
    nights = report.nights
    frames = list(report.all_frames())
    flag = checks.worst(f.flag for f in frames) if frames else "FAIL"
    nexp = sum(len(e) for e in nights.values())
    if not title:
        if len(nights) == 1 and nexp == 1:
            night = next(iter(nights))
            title = "ex2d QA: exposure %s (night %s)" % (next(iter(nights[night])), night)
        elif len(nights) == 1:
            title = "ex2d QA: night %s" % next(iter(nights))
        else:
            title = "ex2d QA: %d nights" % len(nights)
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    views = [night_view(report, n, nights[n]) for n in sorted(nights)]
    data = {"title": title, "flag": flag, "generated": now, "inputs": report.inputs,
            "fleet_unavailable": report.fleet.unavailable,
            "thresholds": [{"key": k, "what": w, "warn": a, "fail": b}
                           for k, w, a, b in checks.THRESHOLDS],
            "cameras": {v["night"]: v["cameras"] for v in views},
            "frames": [frame_json(f) for f in frames], "seconds": report.seconds}
    took = {step: report.seconds.get(step, 0) for step in ("read", "fleet", "figures")}
    return _environment().get_template("page.html.j2").render(
        title=title, flag=flag, now=now, host=socket.gethostname(), inputs=report.inputs,
        took=took, fleet_unavailable=report.fleet.unavailable, frames=frames, nexp=nexp,
        nights=views, thresholds=checks.THRESHOLDS, data=_clean(data))
