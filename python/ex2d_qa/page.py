# SPDX-License-Identifier: BSD-3-Clause
"""The report's HTML: one file, inline CSS, figures as data: URIs, and the numbers again as
JSON (<script type="application/json" id="qa-data">) for scripts and tests."""

import datetime
import html
import json
import math
import socket

import numpy as np

from . import checks
from .fleet import frame_timing
from .stats import SUMMARY_BITS

CSS = """
body{font-family:sans-serif;font-size:13px;margin:1em 2em;color:#222}
h1{font-size:20px} h2{font-size:17px;border-bottom:2px solid #444;margin-top:2em}
h3{font-size:15px;border-bottom:1px solid #999;margin-top:1.6em} h4{font-size:13px}
table{border-collapse:collapse;margin:0.5em 0} th,td{border:1px solid #bbb;padding:2px 6px;
text-align:right} th{background:#eee} td.l,th.l{text-align:left}
.PASS{background:#c8f0c8} .WARN{background:#ffe08a} .FAIL{background:#f4a0a0;font-weight:bold}
.na{color:#888;font-style:italic} .crumbs{font-size:12px;color:#555} a{color:#0645ad}
.grid td{text-align:center;padding:1px 3px} .grid a{text-decoration:none;color:#222}
img{max-width:100%;border:1px solid #ddd} ul.reasons{margin:0.2em 0 0.6em 1em;padding:0}
.small{font-size:11px;color:#555}
"""


def esc(text):
    return html.escape(str(text), quote=True)


def pct(count, total):
    """A percentage of bins for people (count in the tooltip)."""
    if not total:
        return '<span class="na">-</span>'
    v = 100.0 * count / total
    text = "0" if not count else ("&lt;0.001 %" if v < 0.001 else "%.3f %%" % v)
    return '<span title="%d of %d bins">%s</span>' % (count, total, text)


def num(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return '<span class="na">-</span>'
    return ("%%.%dg" % digits) % v


def seconds(v):
    return '<span class="na">-</span>' if v is None else "%.2f" % v


def flag_cell(flag, href=None, text=None):
    inner = esc(text or flag)
    if href:
        inner = '<a href="#%s">%s</a>' % (esc(href), inner)
    return '<td class="%s">%s</td>' % (flag, inner)


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


SUMMARY_HEAD = ("<tr><th class=l>camera</th><th>frames</th><th>done</th><th>failed</th>"
                "<th>dead</th><th>median CHI2PIX</th><th>CHI2PIX &gt; 5x median</th>" +
                "".join("<th>%s</th>" % b for b in SUMMARY_BITS) +
                "<th>IVAR = 0</th><th>NaN/Inf bins</th><th>SCORES median SNR</th>"
                "<th>SCORES median counts/A</th><th>flag</th></tr>")


def summary_row(label, row, href=None):
    cells = ['<td class=l>%s</td>' % (('<a href="#%s">%s</a>' % (esc(href), esc(label)))
                                      if href else esc(label)),
             "<td>%d</td><td>%d</td><td>%d</td><td>%d</td>" % (
                 row["frames"], row["done"], row["failed"], row["dead"]),
             "<td>%s</td>" % num(row["chi2_median"]),
             "<td>%s</td>" % pct(row["chi2_above5"], row["bins"])]
    cells += ["<td>%s</td>" % pct(row["mask"][b], row["bins"]) for b in SUMMARY_BITS]
    cells += ["<td>%s</td>" % pct(row["ivar0"], row["bins"]),
              '<td class="%s">%d</td>' % ("FAIL" if row["nan"] else "", row["nan"]),
              "<td>%s</td>" % num(row["snr"]), "<td>%s</td>" % num(row["counts"]),
              flag_cell(row["flag"])]
    return "<tr>%s</tr>" % "".join(cells)


def thresholds_html():
    rows = "".join("<tr><td class=l>%s</td><td>%s</td><td>%s</td></tr>" % (
        esc(what), "&gt; %s" % checks.fmt(warn) if warn is not None else "-",
        "any" if fail == 0 else "&gt; %s" % checks.fmt(fail))
        for key, what, warn, fail in checks.THRESHOLDS)
    return ('<h2 id="thresholds">Flags and thresholds</h2><p>A frame is <b class=FAIL>FAIL</b> '
            "when its file is missing or unreadable, when the fleet failed or dead-lettered "
            "it, or when a number below passes its FAIL threshold; <b class=WARN>WARN</b> when "
            "a number passes its WARN threshold, the fleet has not finished it, or its "
            "trace-shift step failed (the frame was then extracted with the input PSF); "
            "<b class=PASS>PASS</b> otherwise. A camera or exposure takes its worst frame's "
            "flag. Fractions are of the frame's flux bins (fibres x wavelengths); mask bits "
            "are desispec's specmask.</p><table><tr><th class=l>number</th><th>WARN</th>"
            "<th>FAIL</th></tr>%s</table>" % rows)


def frames_per_hour(timings):
    done = [t for t in timings if t["done"] is not None and t["start"] is not None]
    if not done:
        return None
    span = max(t["done"] for t in done) - min(t["start"] for t in done)
    return 3600.0 * len(done) / span if span > 0 else None


def exposure_section(report, night, expid, cams):
    out = []
    anchor = "exp-%s-%s" % (night, expid)
    frames = [cams[c] for c in sorted(cams)]
    flag = checks.worst(f.flag for f in frames)
    out.append('<h3 id="%s">Exposure %s <span class="%s">%s</span></h3>' % (
        anchor, esc(expid), flag, flag))
    out.append('<p class=crumbs><a href="#night-%s">night %s</a> &middot; '
               '<a href="#top">top</a></p>' % (esc(night), esc(night)))
    out.append("<table>" + SUMMARY_HEAD)
    for f in frames:
        out.append(summary_row(f.camera, summarise([f]), f.anchor if f.figure else None))
    out.append("</table>")
    problems = [f for f in frames if f.flag != "PASS"]
    if problems:
        out.append("<ul class=reasons>")
        for f in problems:
            out.append('<li><span class="%s">%s</span> %s (<code>%s</code>): %s</li>' % (
                f.flag, f.flag, esc(f.camera), esc(f.path), esc("; ".join(f.reasons))))
        out.append("</ul>")
    out.append(trace_shift_table(frames))
    info = report.timing.get((night, expid), {})
    out.append("<h4>Timing (from the fleet's Redis)</h4>")
    if not info.get("available"):
        out.append('<p class=na>not available: %s</p>' % esc(info.get("why", "no fleet data")))
    else:
        rows, timings = [], []
        for f in frames:
            if not f.fleet:
                rows.append("<tr><td class=l>%s</td><td class=na colspan=8>not known to the "
                            "fleet</td></tr>" % esc(f.camera))
                continue
            t = frame_timing(f.fleet)
            timings.append(t)
            worker = f.fleet.get("worker")
            rows.append("<tr><td class=l>%s</td><td class=l>%s</td><td class=l>%s</td>"
                        "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                        "<td>%s</td></tr>" % (
                            esc(f.camera), esc(f.fleet.get("state", "")),
                            esc(worker) + (" @ " + esc(f.fleet.get("worker_host"))
                                           if f.fleet.get("worker_host") else "")
                            if worker else '<span class="na">not available</span>',
                            seconds(t["queue_wait"]), seconds(t["read"]), seconds(t["extract"]),
                            seconds(t["write"]), esc(f.fleet.get("tries", "")),
                            esc(f.fleet.get("process", ""))))
        fph = frames_per_hour(timings)
        exp = info.get("exposure", {})
        out.append("<p>campaign %s, state %s; frames per hour: %s (written frames over the "
                   "span from the first read to the last write)</p>" % (
                       esc(info.get("campaign", "")), esc(exp.get("state", "")),
                       "%.0f" % fph if fph else '<span class="na">not available</span>'))
        out.append("<table><tr><th class=l>camera</th><th class=l>state</th>"
                   "<th class=l>extracted by</th><th>queue wait s</th><th>read s</th>"
                   "<th>extract s</th><th>write s</th><th>extractions</th>"
                   "<th class=l>last holder</th></tr>%s</table>" % "".join(rows))
        out.append("<p class=small>queue wait: queued until a reader takes the frame; read: "
                   "until a worker starts it (loading, and waiting for a worker); extract: "
                   "until a writer takes the result; write: until the file is renamed.</p>")
        if info.get("figure"):
            out.append('<img alt="timeline of exposure %s" src="data:image/png;base64,%s">' % (
                esc(expid), info["figure"]))
    for f in frames:
        if f.figure:
            out.append('<h4 id="%s">%s, exposure %s <span class="%s">%s</span></h4>' % (
                esc(f.anchor), esc(f.camera), esc(expid), f.flag, f.flag))
            out.append('<p class=crumbs><a href="#%s">exposure %s</a> &middot; '
                       '<a href="#night-%s">night %s</a> &middot; <code>%s</code></p>' % (
                           anchor, esc(expid), esc(night), esc(night), esc(f.path)))
            if f.reasons:
                out.append("<ul class=reasons>%s</ul>" % "".join(
                    "<li>%s</li>" % esc(r) for r in f.reasons))
            out.append('<img alt="frame %s %s" src="data:image/png;base64,%s">' % (
                esc(f.camera), esc(expid), f.figure))
    for f in frames:
        if f.readable and not f.figure and f.figure_error:
            out.append('<p class=WARN>The figure of %s was not drawn: %s</p>' % (
                esc(f.camera), esc(f.figure_error)))
    undetailed = [f.camera for f in frames if f.readable and not f.figure]
    if undetailed:
        out.append('<p class=small>Not shown in detail (the report shows at most --detail '
                   'frames, flagged ones first): %s. <code>ex2dctl qa %s</code> shows them.</p>'
                   % (esc(" ".join(undetailed)),
                      esc(report_dir(frames))))
    return "\n".join(out)


def _shift_range(shifts, axis):
    mean, lo, hi = (shifts.get(k + axis) for k in ("mean", "min", "max"))
    if mean is None:
        return '<span class="na">not measured</span>'
    return "%+.3f [%+.3f, %+.3f]" % (mean, lo, hi)


def trace_shift_table(frames):
    """Each frame's trace shifts (its header's TRSHIFT, MEANDX..MAXDY) across fibres, and its
    brightest fibres' median CHI2PIX, where a PSF mismatch shows first."""
    rows = []
    for f in frames:
        if not f.readable:
            continue
        shifts = f.rec.get("trace_shifts")
        if shifts is None:
            method = '<span class="na">no step (frame made without it)</span>'
            dx = dy = ""
        else:
            failed = shifts["method"].upper() == "FAILED"
            method = ('<span class="WARN">FAILED</span>: ' + esc(shifts["reason"])
                      if failed else esc(shifts["method"]))
            dx, dy = _shift_range(shifts, "dx"), _shift_range(shifts, "dy")
        rows.append("<tr><td class=l>%s</td><td class=l>%s</td><td>%s</td><td>%s</td>"
                    "<td>%s</td></tr>" % (esc(f.camera), method, dx, dy,
                                          num(f.rec.get("bright_chi2_median"))))
    if not rows:
        return ""
    return ("<h4>Trace shifts</h4><table><tr><th class=l>camera</th><th class=l>method</th>"
            "<th>dx px: mean [min, max] over fibres</th><th>dy px: mean [min, max]</th>"
            "<th>bright fibres' median CHI2PIX</th></tr>%s</table>"
            "<p class=small>Output minus input traces of every fibre at five wavelengths, as "
            "the trace-shift step records them in the frame's header. Thresholds below.</p>"
            % "".join(rows))


def report_dir(frames):
    import os
    return os.path.dirname(frames[0].path) if frames else ""


def night_section(report, night, exposures):
    out = ['<h2 id="night-%s">Night %s</h2>' % (esc(night), esc(night)),
           '<p class=crumbs><a href="#top">top</a></p>']
    by_camera = {}
    for cams in exposures.values():
        for cam, f in cams.items():
            by_camera.setdefault(cam, []).append(f)
    out.append("<h4>Per camera, over the night's %d exposure(s)</h4><table>%s" % (
        len(exposures), SUMMARY_HEAD))
    rows = {}
    for cam in sorted(by_camera):
        rows[cam] = summarise(by_camera[cam])
        out.append(summary_row(cam, rows[cam]))
    out.append("</table>")
    cameras = sorted(by_camera)
    out.append("<h4>Exposures x cameras (click a cell)</h4><table class=grid><tr>"
               "<th class=l>exposure</th>%s<th>exposure</th><th>frames per hour</th></tr>" %
               "".join("<th>%s</th>" % esc(c) for c in cameras))
    for expid in sorted(exposures):
        cams = exposures[expid]
        cells = []
        for c in cameras:
            f = cams.get(c)
            if f is None:
                cells.append("<td class=na>-</td>")
            else:
                target = f.anchor if f.figure else "exp-%s-%s" % (night, expid)
                cells.append(flag_cell(f.flag, target, f.flag[0]))
        flag = checks.worst(f.flag for f in cams.values())
        info = report.timing.get((night, expid), {})
        fph = None
        if info.get("available"):
            fph = frames_per_hour([frame_timing(f.fleet) for f in cams.values() if f.fleet])
        out.append('<tr><td class=l><a href="#exp-%s-%s">%s</a></td>%s%s<td>%s</td></tr>' % (
            esc(night), esc(expid), esc(expid), "".join(cells), flag_cell(flag),
            "%.0f" % fph if fph else '<span class="na">n/a</span>'))
    out.append("</table>")
    for expid in sorted(exposures):
        out.append(exposure_section(report, night, expid, exposures[expid]))
    return "\n".join(out), rows


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
    body = ['<h1 id="top">%s <span class="%s">%s</span></h1>' % (esc(title), flag, flag),
            "<p>%d frame(s) of %d exposure(s) in %d night(s); written %s on %s from %s. "
            "Reading took %.1f s, the fleet's state %.1f s, the figures %.1f s.</p>" % (
                len(frames), nexp, len(nights), esc(now), esc(socket.gethostname()),
                esc(" ".join(report.inputs)), report.seconds.get("read", 0),
                report.seconds.get("fleet", 0), report.seconds.get("figures", 0))]
    if report.fleet.unavailable:
        body.append('<p class=na>The fleet\'s state (Redis): not available: %s</p>' %
                    esc(report.fleet.unavailable))
    if not frames:
        body.append('<p class=FAIL>No frame file found under the inputs.</p>')
    body.append("<p>Contents: " + " &middot; ".join(
        '<a href="#night-%s">night %s</a> (%s)' % (esc(n), esc(n), ", ".join(
            '<a href="#exp-%s-%s">%s</a>' % (esc(n), esc(e), esc(e)) for e in sorted(nights[n])))
        for n in sorted(nights)) + ' &middot; <a href="#thresholds">thresholds</a></p>')
    if len(nights) > 1:
        body.append('<h2 id="campaign">Nights</h2><table><tr><th class=l>night</th>'
                    "<th>exposures</th><th>frames</th><th>PASS</th><th>WARN</th><th>FAIL</th>"
                    "<th>flag</th></tr>")
        for n in sorted(nights):
            fl = [f.flag for cams in nights[n].values() for f in cams.values()]
            body.append('<tr><td class=l><a href="#night-%s">%s</a></td><td>%d</td><td>%d</td>'
                        '<td>%d</td><td>%d</td><td>%d</td>%s</tr>' % (
                            esc(n), esc(n), len(nights[n]), len(fl), fl.count("PASS"),
                            fl.count("WARN"), fl.count("FAIL"), flag_cell(checks.worst(fl))))
        body.append("</table>")
    camera_rows = {}
    for n in sorted(nights):
        text, rows = night_section(report, n, nights[n])
        camera_rows[n] = rows
        body.append(text)
    body.append(thresholds_html())
    data = {"title": title, "flag": flag, "generated": now, "inputs": report.inputs,
            "fleet_unavailable": report.fleet.unavailable,
            "thresholds": [{"key": k, "what": w, "warn": a, "fail": b}
                           for k, w, a, b in checks.THRESHOLDS],
            "cameras": camera_rows, "frames": [frame_json(f) for f in frames],
            "seconds": report.seconds}
    blob = json.dumps(_clean(data), sort_keys=True).replace("</", "<\\/")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>%s</title>"
            "<style>%s</style></head><body>\n%s\n<script type=\"application/json\" "
            "id=\"qa-data\">%s</script>\n</body></html>\n" % (
                esc(title), CSS, "\n".join(body), blob))
