#!/usr/bin/env python3
"""The report of bench/fleet-gpu-speed (standard library only).

  fleet_gpu_speed.py run --run DIR --night DIR --delay S --workers M --readers N
                         --writers K --compression C --frames F
                         [--trace-shifts auto|none --trace-shifts-in reader|worker]
                         >> results.jsonl
      Checks one run's outputs and prints its figures as one JSON line; exits 1 when a
      check fails (the figures are still printed, with the failures).
  fleet_gpu_speed.py table --results FILE --workers M
      The Markdown table of every run in FILE and the cores a node of M GPUs needs.

A run's folder holds what tools/ex2d-local-fleet leaves in fleet/ (logs, pids, cpu.tsv,
submitted_at, submitted.json) and the frames under out/."""
import argparse
import datetime
import glob
import gzip
import json
import os
import re
import struct
import sys

BLOCK = 2880
WIDTHS = {"L": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 8, "M": 16, "P": 8, "Q": 16}


def card_value(text):
    text = text.split("/")[0].strip() if not text.strip().startswith("'") else text.strip()
    if text.startswith("'"):
        return text[1:text.index("'", 1)].rstrip()
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def read_header(f):
    cards = {}
    while True:
        block = f.read(BLOCK)
        if not block:
            return None
        if len(block) < BLOCK:
            raise ValueError("truncated header")
        for i in range(0, BLOCK, 80):
            card = block[i:i + 80].decode("ascii", "replace")
            key = card[:8].strip()
            if key == "END":
                return cards
            if card[8:10] == "= ":
                cards[key] = card_value(card[10:])


def data_bytes(h):
    n = 1 if h.get("NAXIS", 0) > 0 else 0
    for i in range(1, h.get("NAXIS", 0) + 1):
        n *= h["NAXIS%d" % i]
    n = abs(h["BITPIX"]) // 8 * h.get("GCOUNT", 1) * (h.get("PCOUNT", 0) + n)
    return n, (n + BLOCK - 1) // BLOCK * BLOCK


def column(h, data, name):
    """The values of binary-table column `name` (scalar integer columns only)."""
    offset = 0
    for i in range(1, h["TFIELDS"] + 1):
        m = re.match(r"(\d*)([A-Z])", h["TFORM%d" % i])
        repeat, code = int(m.group(1) or 1), m.group(2)
        width = (repeat + 7) // 8 if code == "X" else repeat * WIDTHS[code]
        if h["TTYPE%d" % i] == name:
            fmt = {"I": ">h", "J": ">i", "K": ">q"}[code]
            return [struct.unpack_from(fmt, data, row * h["NAXIS1"] + offset)[0]
                    for row in range(h["NAXIS2"])]
        offset += width
    raise KeyError(name)


def identity(path):
    """(first HDU header, FIBERMAP FIBER column) of a FITS file, gzip or not."""
    opener = gzip.open if path.endswith(".gz") else open
    first, fibers = None, None
    with opener(path, "rb") as f:
        while True:
            h = read_header(f)
            if h is None:
                break
            first = first or h
            size, padded = data_bytes(h)
            if h.get("EXTNAME") == "FIBERMAP":
                fibers = column(h, f.read(padded)[:size], "FIBER")
                break
            f.seek(padded, 1)
    return first, fibers


def ts(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def log_events(logs):
    """Every JSON log line of the fleet's services that names a job."""
    for path in glob.glob(os.path.join(logs, "*.log")):
        if os.path.basename(path).startswith("redis"):
            continue
        for line in open(path, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("job"):
                yield r


def trace_shift_figures(logs):
    """The trace-shift steps of a run from its services' logs: each step's CPU seconds and the
    role of the process that ran it ("trace-shifts method=... cpu_s=" or "trace-shifts failed"),
    and from workers that ran it, each step's wall time ("trace-shift step done on the worker
    wall_s=") and how long the extraction thread waited for it ("extraction started
    trace_shift_wait_s=")."""
    cpu, failed, wall, waits = {}, 0, [], []
    for path in glob.glob(os.path.join(logs, "*.log")):
        role = os.path.basename(path).rsplit("-", 1)[0]
        for line in open(path, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            msg = r.get("msg", "")
            m = re.match(r"trace-shifts method=\S+ .*cpu_s=([\d.]+)", msg)
            if m:
                cpu.setdefault(role, []).append(float(m.group(1)))
            elif msg.startswith("trace-shifts failed"):
                failed += 1
            m = re.match(r"trace-shift step done on the worker wall_s=([\d.]+)", msg)
            if m:
                wall.append(float(m.group(1)))
            m = re.match(r"extraction started trace_shift_wait_s=([\d.]+)", msg)
            if m:
                waits.append(float(m.group(1)))
    mean = lambda v: round(sum(v) / len(v), 3) if v else 0
    return {
        "steps": {k: len(v) for k, v in cpu.items()}, "steps_failed": failed,
        "step_cpu_s_mean": {k: mean(v) for k, v in cpu.items()},
        "step_wall_s_mean": mean(wall),
        "frames_waiting_for_step": sum(1 for w in waits if w > 0.0005),
        "frames_step_overlapped": sum(1 for w in waits if w <= 0.0005),
        "step_wait_s_mean": mean(waits), "step_wait_s_max": max(waits) if waits else 0,
    }


def run(a):
    fleet = os.path.join(a.run, "fleet")
    failures = []
    submitted = json.load(open(os.path.join(fleet, "submitted.json")))
    outputs = {j["job"]: j["output"] for j in submitted["jobs"]}
    if len(outputs) != a.frames:
        failures.append("%d frames submitted, expected %d" % (len(outputs), a.frames))

    written, read_at, reading = {}, {}, {}
    extract_s = []
    for r in log_events(os.path.join(fleet, "logs")):
        msg, job = r["msg"], r["job"]
        if msg.startswith("reading preproc="):
            reading.setdefault(job, ts(r["ts"]))
        elif msg.startswith("extracted "):
            m = re.search(r"extract_s=([\d.]+)", msg)
            if m:
                extract_s.append(float(m.group(1)))
        elif msg.startswith("frame written") or msg.startswith("frame already written"):
            m = re.search(r"write_s=([\d.]+) read_s=([\d.]+)", msg)
            written.setdefault(job, []).append((ts(r["ts"]), float(m.group(1)), float(m.group(2)), msg))
    twice = [j for j, w in written.items() if len(w) > 1]
    if twice:
        failures.append("written more than once: " + ", ".join(sorted(twice)))
    missing = sorted(set(outputs) - set(written))
    if missing:
        failures.append("never written: " + ", ".join(missing))

    # The tree holds exactly the submitted outputs: nothing twice, no temporary left.
    found = sorted(os.path.join(d, f) for d, _, files in os.walk(os.path.join(a.run, "out")) for f in files)
    extra = sorted(set(found) - set(outputs.values()))
    if extra:
        failures.append("files besides the frames: " + ", ".join(os.path.relpath(p, a.run) for p in extra))
    absent = sorted(set(outputs.values()) - set(found))
    if absent:
        failures.append("frames missing on disk: " + ", ".join(os.path.basename(p) for p in absent))

    checked = 0
    for job, path in sorted(outputs.items()):
        if path in absent:
            continue
        camera = re.search(r"frame-([brz]\d)-(\d{8})\.fits", os.path.basename(path))
        preproc = os.path.join(a.night, camera.group(2), "preproc-%s-%s.fits" % (camera.group(1), camera.group(2)))
        out_header, out_fibers = identity(path)
        in_header, in_fibers = identity(preproc)
        for key in ("CAMERA", "EXPID"):
            if out_header.get(key) != in_header.get(key):
                failures.append("%s: %s %r, its input has %r" % (os.path.basename(path), key,
                                                                 out_header.get(key), in_header.get(key)))
        if out_fibers is None or out_fibers != in_fibers:
            failures.append("%s: FIBERMAP FIBER differs from its input's" % os.path.basename(path))
        checked += 1

    start = float(open(os.path.join(fleet, "submitted_at")).read())
    last = max(w[0][0] for w in written.values()) if written else start
    wall = last - start
    first_job = min(reading, key=reading.get) if reading else None
    last_job = max(written, key=lambda j: written[j][0][0]) if written else None
    first_read = written[first_job][0][2] if first_job in written else 0.0
    last_write = written[last_job][0][1] if last_job else 0.0
    ideal = a.frames * a.delay / a.workers + first_read + last_write

    cpu = {}
    for line in open(os.path.join(fleet, "cpu.tsv")):
        name, _pid, before, after = line.split()
        role = "redis" if name == "redis" else name.rsplit("-", 1)[0]
        cpu[role] = cpu.get(role, 0.0) + float(after) - float(before)
    record = {
        "compression": a.compression, "delay_s": a.delay, "readers": a.readers, "workers": a.workers,
        "writers": a.writers, "frames": a.frames, "wall_s": round(wall, 2), "ideal_s": round(ideal, 2),
        "first_read_s": first_read, "last_write_s": last_write,
        "frames_per_hour": round(3600 * a.frames / wall, 0) if wall > 0 else 0,
        "extract_s_mean": round(sum(extract_s) / len(extract_s), 3) if extract_s else 0,
        "cpu_s_per_frame": {k: round(v / a.frames, 3) for k, v in sorted(cpu.items())},
        "frames_checked": checked, "failures": failures,
        "trace_shifts": a.trace_shifts, "trace_shifts_in": a.trace_shifts_in,
        "trace_shift": trace_shift_figures(os.path.join(fleet, "logs")),
    }
    print(json.dumps(record))
    for f in failures:
        print("fleet-gpu-speed: check failed: " + f, file=sys.stderr)
    print("  wall %.2f s (ideal %.2f s: %d x %.2f / %d + first read %.2f + last write %.2f), %.0f frames/h; "
          "CPU-s per frame %s; %d frames checked, %d failure(s)"
          % (wall, ideal, a.frames, a.delay, a.workers, first_read, last_write, record["frames_per_hour"],
             " ".join("%s %.3f" % kv for kv in record["cpu_s_per_frame"].items()), checked, len(failures)),
          file=sys.stderr)
    t = record["trace_shift"]
    if t["steps"] or t["steps_failed"]:
        print("  trace shifts (%s, in the %ss): %s step(s) measured, %d failed; CPU-s per step %s%s"
              % (a.trace_shifts, a.trace_shifts_in, t["steps"], t["steps_failed"], t["step_cpu_s_mean"],
                 "; on the workers: wall %.3f s a step, %d of %d frames found their step done "
                 "(mean wait %.3f s, max %.3f s)"
                 % (t["step_wall_s_mean"], t["frames_step_overlapped"],
                    t["frames_step_overlapped"] + t["frames_waiting_for_step"], t["step_wait_s_mean"],
                    t["step_wait_s_max"]) if a.trace_shifts_in == "worker" else ""),
              file=sys.stderr)
    return 1 if failures else 0


def table(a):
    rows = [json.loads(line) for line in open(a.results) if line.strip()]
    roles = ("reader", "worker", "writer", "redis")
    print("| compression | delay (s) | trace shifts | readers/workers/writers | wall (s) | ideal (s) "
          "| wall / ideal | frames/h | mean extract_s | CPU-s per frame: reader | worker | writer | redis "
          "| step CPU-s | step overlapped | checks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["cpu_s_per_frame"]
        t = r.get("trace_shift", {})
        shifts = r.get("trace_shifts", "auto")
        where = r.get("trace_shifts_in", "reader")
        waited = t.get("frames_step_overlapped", 0) + t.get("frames_waiting_for_step", 0)
        print("| %s | %.1f | %s | %d/%d/%d | %.2f | %.2f | %.2f | %.0f | %.3f | %s | %s | %s | %s |"
              % (r["compression"], r["delay_s"], shifts if shifts == "none" else "%s in %s" % (shifts, where),
                 r["readers"], r["workers"], r["writers"], r["wall_s"],
                 r["ideal_s"], r["wall_s"] / r["ideal_s"], r["frames_per_hour"], r["extract_s_mean"],
                 " | ".join("%.3f" % c.get(k, 0.0) for k in roles),
                 ", ".join("%s %.3f" % kv for kv in t.get("step_cpu_s_mean", {}).items()) or "-",
                 "%d of %d (mean wait %.3f s)" % (t["frames_step_overlapped"], waited, t["step_wait_s_mean"])
                 if waited else "-",
                 "%d frames OK" % r["frames_checked"] if not r["failures"] else "%d failure(s)" % len(r["failures"])))
    print()
    print("Cores a node of %d GPUs needs (%d / delay frames per second x CPU-s per frame):" % (a.workers, a.workers))
    for r in rows:
        rate = a.workers / r["delay_s"]
        c = r["cpu_s_per_frame"]
        print("- %s, %.1f s per frame (%.1f frames/s), trace shifts %s: %s"
              % (r["compression"], r["delay_s"], rate,
                 r.get("trace_shifts", "auto") if r.get("trace_shifts") == "none"
                 else "%s in %s" % (r.get("trace_shifts", "auto"), r.get("trace_shifts_in", "reader")),
                 ", ".join("%s %.2f" % (k + "s" if k != "redis" else k, rate * c.get(k, 0.0)) for k in roles)
                 + "; in all %.2f" % (rate * sum(c.get(k, 0.0) for k in roles))))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--run", required=True)
    r.add_argument("--night", required=True)
    r.add_argument("--delay", type=float, required=True)
    r.add_argument("--workers", type=int, required=True)
    r.add_argument("--readers", type=int, required=True)
    r.add_argument("--writers", type=int, required=True)
    r.add_argument("--compression", required=True)
    r.add_argument("--frames", type=int, required=True)
    r.add_argument("--trace-shifts", default="auto")
    r.add_argument("--trace-shifts-in", default="reader")
    t = sub.add_parser("table")
    t.add_argument("--results", required=True)
    t.add_argument("--workers", type=int, required=True)
    a = p.parse_args()
    return run(a) if a.command == "run" else table(a)


if __name__ == "__main__":
    sys.exit(main())
