# SPDX-License-Identifier: BSD-3-Clause
"""The fleet's view of the frames, through ``ex2dctl --json status`` (docs/fleet.md): each
frame's state, error, worker and the times of its state changes (docs/redis-schema.md). Where
ex2dctl or Redis does not answer, every call says why and the report shows "not available"."""

import json
import subprocess


class Fleet:
    def __init__(self, ex2dctl=None, ctl_args=(), timeout_s=30):
        self.ex2dctl = ex2dctl
        self.ctl_args = list(ctl_args)
        self.timeout_s = timeout_s
        self.unavailable = None if ex2dctl else "no ex2dctl given (--no-fleet or run directly)"

    def _status(self, *args):
        if self.unavailable:
            return None
        command = [self.ex2dctl] + self.ctl_args + ["--json", "status"] + list(args)
        try:
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.unavailable = "ex2dctl status: %s" % e
            return None
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            self.unavailable = lines[-1] if lines else "ex2dctl exited %d" % done.returncode
            return None
        try:
            return json.loads(done.stdout)
        except ValueError as e:
            self.unavailable = "ex2dctl status: unreadable answer (%s)" % e
            return None

    def night(self, night):
        """The exposures of a night known to the fleet: [{campaign, expid, state, ...}]."""
        answer = self._status("--night", str(night))
        return answer.get("exposures", []) if answer else []

    def exposure(self, expid, campaign="nightly"):
        """{"exposure": summary, "frames": {camera: frame hash}} or None when the fleet does
        not know the exposure (or does not answer)."""
        answer = self._status("--exposure", str(expid), "--campaign", campaign)
        if not answer:
            return None
        frames = {f.get("camera", ""): f for f in answer.get("frames", []) if f.get("camera")}
        if not frames and not answer.get("exposure", {}).get("state"):
            return None
        return {"exposure": answer.get("exposure", {}), "frames": frames}


def _ms(frame, field):
    try:
        return float(frame[field]) / 1000.0
    except (KeyError, TypeError, ValueError):
        return None


def frame_timing(frame):
    """Seconds of each step of a frame from its hash: queue wait (queued -> a reader takes it),
    read (a reader takes it -> a worker starts: loading and waiting for a worker), extract
    (-> a writer takes it), write (-> done); None for a step not reached."""
    t = {k: _ms(frame, k + "_at") for k in ("queued", "reading", "extracting", "writing", "done")}

    def span(a, b):
        return t[b] - t[a] if t[a] is not None and t[b] is not None and t[b] >= t[a] else None

    return {"queue_wait": span("queued", "reading"), "read": span("reading", "extracting"),
            "extract": span("extracting", "writing"), "write": span("writing", "done"),
            "start": t["reading"], "done": t["done"] if frame.get("state") == "done" else None}
