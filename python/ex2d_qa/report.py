# SPDX-License-Identifier: BSD-3-Clause
"""The QA report: frames found under the inputs, read in parallel, judged, and written as one
self-contained HTML file (figures embedded as base64 PNG; no script, no network)."""

import multiprocessing
import os
import re
import time

from . import checks
from .fleet import Fleet, frame_timing
from .stats import frame_stats

FRAME_RE = re.compile(r"^frame-([brz]\d)-(\d{8})\.fits(\.gz)?$")
EIGHT = re.compile(r"^\d{8}$")


# ---- finding the frames -------------------------------------------------------------------

def _frames_in(folder):
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if FRAME_RE.match(n)]


def find_frames(inputs):
    """[(path, night hint)] of the frame files named or found under the inputs: a frame file,
    an exposure folder, a night folder (EXPID sub-folders), or any folder above them."""
    out = []
    for item in map(os.path.abspath, inputs):
        if not os.path.isdir(item):
            out.append((item, _night_of(item)))
            continue
        for root, dirs, files in os.walk(item):
            dirs.sort()
            for path in _frames_in(root):
                out.append((path, _night_of(path)))
    return out


def _night_of(path):
    parts = os.path.abspath(path).split(os.sep)
    return parts[-3] if len(parts) >= 3 and EIGHT.match(parts[-3]) else None


# ---- the report's model -------------------------------------------------------------------

class Frame:
    def __init__(self, path, camera, expid, night):
        self.path, self.camera, self.expid, self.night = path, camera, expid, night
        self.rec = None
        self.fleet = None        # the frame's hash in Redis, where the fleet knows it
        self.flag, self.reasons = "FAIL", []
        self.figure = None
        self.figure_error = None

    @property
    def anchor(self):
        return "frame-%s-%s-%s" % (self.night, self.expid, self.camera)

    @property
    def state(self):
        """The fleet's state where known, else what the file says."""
        if self.fleet and self.fleet.get("state"):
            return self.fleet["state"]
        return "done" if self.rec and not self.rec.get("error") else "missing or unreadable"

    @property
    def readable(self):
        return self.rec is not None and not self.rec.get("error")


def _worker(job):
    path, detail = job
    rec = frame_stats(path, detail=detail)
    if detail and rec.get("detail") is not None:
        from .render import frame_figure
        try:
            rec["figure"] = frame_figure(rec)
        except Exception as e:  # a figure that fails must not lose the report
            rec["figure_error"] = "%s: %s" % (type(e).__name__, e)
        del rec["detail"]
    return rec


def _pool_map(jobs, processes):
    if processes <= 1 or len(jobs) <= 1:
        return [_worker(j) for j in jobs]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes) as pool:
        return pool.map(_worker, jobs, chunksize=max(1, min(8, len(jobs) // (4 * processes))))


class Report:
    def __init__(self, inputs, cameras=None, campaign="nightly", fleet=None, detail=30,
                 processes=None, timelines=True):
        self.inputs = list(inputs)
        self.cameras = cameras
        self.campaign = campaign
        self.fleet = fleet or Fleet()
        self.detail = detail
        self.processes = processes or min(os.cpu_count() or 1, 4)
        self.timelines = timelines
        self.nights = {}     # night -> expid -> camera -> Frame
        self.timing = {}     # (night, expid) -> {...}
        self.seconds = {}

    # Pass 1: every frame's numbers; the fleet's state; the flags; pass 2: figures.
    def build(self):
        t0 = time.time()
        found = find_frames(self.inputs)
        frames = []
        for path, night in found:
            m = FRAME_RE.match(os.path.basename(path))
            camera, expid = (m.group(1), m.group(2)) if m else ("?", "?")
            frames.append(Frame(path, camera, expid, night))
        # Where every frame is drawn anyway (an exposure), the figures come with the first
        # read; otherwise the chosen frames are read again once the flags are known.
        direct = self.detail is None or len(frames) <= self.detail
        recs = _pool_map([(f.path, direct) for f in frames], self.processes)
        for f, rec in zip(frames, recs):
            f.figure = rec.pop("figure", None)
            f.figure_error = rec.pop("figure_error", None)
            f.rec = rec
            if rec.get("night") and not f.night:
                f.night = rec["night"]
            if rec.get("expid") and f.expid == "?":
                f.expid = rec["expid"]
            if rec.get("camera") and f.camera == "?":
                f.camera = rec["camera"]
            self._place(f)
        self.seconds["read"] = time.time() - t0
        t1 = time.time()
        self._add_expected()
        self._add_fleet()
        self.seconds["fleet"] = time.time() - t1
        for f in self.all_frames():
            f.flag, f.reasons = self._judge(f)
        t2 = time.time()
        chosen = [f for f in self._choose_details() if f.figure is None]
        recs = _pool_map([(f.path, True) for f in chosen], self.processes)
        for f, rec in zip(chosen, recs):
            f.figure = rec.get("figure")
            f.figure_error = rec.get("figure_error") or rec.get("error")
        if self.timelines:
            self._timelines()
        self.seconds["figures"] = time.time() - t2
        return self

    def _place(self, f):
        night = f.night or "unknown"
        f.night = night
        cams = self.nights.setdefault(night, {}).setdefault(f.expid, {})
        if f.camera in cams:  # the same frame under two names (.fits and .fits.gz)
            f.camera = "%s (%s)" % (f.camera, os.path.basename(f.path))
        cams[f.camera] = f

    def _add_expected(self):
        if not self.cameras:
            return
        for night, exposures in self.nights.items():
            for expid, cams in exposures.items():
                folder = os.path.dirname(next(iter(cams.values())).path)
                ext = ".fits.gz" if any(c.path.endswith(".gz") for c in cams.values()) else ".fits"
                for cam in self.cameras:
                    if cam not in cams:
                        path = os.path.join(folder, "frame-%s-%s%s" % (cam, expid, ext))
                        f = Frame(path, cam, expid, night)
                        f.rec = {"path": path, "error": "%s: no such file" % path}
                        cams[cam] = f

    def _add_fleet(self):
        campaigns = {}
        for night in sorted(self.nights):
            if night == "unknown":
                continue
            for row in self.fleet.night(night):
                campaigns[row.get("expid", "")] = row.get("campaign", self.campaign)
        for night, exposures in sorted(self.nights.items()):
            for expid, cams in sorted(exposures.items()):
                answer = self.fleet.exposure(expid, campaigns.get(expid, self.campaign))
                info = {"available": answer is not None, "campaign":
                        campaigns.get(expid, self.campaign)}
                self.timing[(night, expid)] = info
                if answer is None:
                    info["why"] = self.fleet.unavailable or \
                        "the fleet's Redis does not know exposure %s" % expid
                    continue
                info["exposure"] = answer["exposure"]
                folder = os.path.dirname(next(iter(cams.values())).path)
                for cam, fh in answer["frames"].items():
                    f = cams.get(cam)
                    if f is None:
                        path = fh.get("output") or os.path.join(folder, "frame-%s-%s.fits.gz" % (
                            cam, expid))
                        f = Frame(path, cam, expid, night)
                        # No record for a frame not written yet: one without the numbers
                        # would count as readable and be judged and summed.
                        f.rec = frame_stats(path) if fh.get("state") == "done" else None
                        cams[cam] = f
                    f.fleet = fh

    def _judge(self, f):
        state = f.fleet.get("state") if f.fleet else None
        if state in ("failed", "dead"):
            return "FAIL", ["the fleet's state is %s: %s" % (state, f.fleet.get("error", ""))]
        if state and state != "done":
            # A frame in flight keeps its last error (a writer's output storage failing).
            last = ["last error: %s" % f.fleet["error"]] if f.fleet.get("error") else []
            if f.readable:
                flag, reasons = checks.judge(f.rec)
                return (checks.worst([flag, "WARN"]),
                        ["the fleet's state is %s" % state] + last + reasons)
            return "WARN", ["not written yet: the fleet's state is %s" % state] + last
        if f.rec is None or f.rec.get("error") is not None or not f.readable:
            return "FAIL", [f.rec.get("error") if f.rec and f.rec.get("error")
                            else "%s: no such file" % f.path]
        return checks.judge(f.rec)

    def _choose_details(self):
        frames = [f for f in self.all_frames() if f.readable]
        if self.detail is None or len(frames) <= self.detail:
            return frames
        bad = sorted((f for f in frames if f.flag != "PASS"),
                     key=lambda f: (-checks.ORDER[f.flag], f.night, f.expid, f.camera))
        # Then the latest exposures' frames, in camera order (sorting is stable).
        rest = sorted((f for f in frames if f.flag == "PASS"), key=lambda f: f.camera)
        rest.sort(key=lambda f: (f.night, f.expid), reverse=True)
        return (bad + rest)[:self.detail]

    def _timelines(self):
        from .render import timeline_figure
        for (night, expid), info in self.timing.items():
            if not info.get("available"):
                continue
            cams = self.nights[night][expid]
            rows = [(cam, frame_timing(f.fleet), f.fleet.get("worker", ""))
                    for cam, f in sorted(cams.items()) if f.fleet]
            info["figure"] = timeline_figure(rows, "exposure %s: each frame's steps" % expid)

    def all_frames(self):
        for exposures in self.nights.values():
            for cams in exposures.values():
                yield from cams.values()

    def write(self, path, title=None):
        from .page import render_page
        text = render_page(self, title)
        tmp = "%s.tmp-%d" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
        return path
