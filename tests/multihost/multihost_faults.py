#!/usr/bin/env python3
"""The fleet across emulated hosts under network partitions (ctest label multihost;
docs/multihost.md). Each scenario runs tools/ex2d-multihost (Redis, readers, workers and
writers each on a host of its own, tcp:// with CURVE, the Redis ACL users) on one small
exposure, with a fault played by this script's --fault mode through the tool's --during hook:
iptables rules inside a host's namespace cut it from a peer (both ways or one), then are
removed (the heal). Afterwards every scenario asserts lost 0, written twice 0, partial 0,
every frame identical to `ex2d extract` (FIBERMAP and identifying keys included,
docker/compare-fits), every process exited 0 on SIGTERM (none stuck), nothing of the emulation
left, and the time from the heal to the last frame written within the lease plus 10 s.

usage: multihost_faults.py --build BUILD --source SOURCE --work DIR [--scenario NAME]...
       multihost_faults.py --source SOURCE --cleanup
       multihost_faults.py --fault NAME        (run by the tool's --during)

Needs root; exits 77 (ctest's skip code) with a message when a requirement is missing."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import multihost_scenarios as scenarios

NIGHT, EXPID = "20261122", "00000042"
CAMERAS = ("r0", "r1", "r2", "r3")
WAVE = "6000,6100,0.8"
NFIBERS = "25"
SKIP = 77


def log(msg):
    print(msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def requirements_missing():
    if os.geteuid() != 0:
        return "needs root (network namespaces, a bridge, iptables inside the hosts)"
    for tool in ("ip", "iptables", "tc", "unshare", "setsid", "redis-server"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    probe = "ex2d-mh-probe"
    try:
        run(["ip", "netns", "add", probe])
        run(["ip", "netns", "exec", probe, "iptables", "-A", "OUTPUT", "-o", "lo", "-j", "ACCEPT"])
    except subprocess.CalledProcessError as e:
        return f"iptables inside a network namespace does not work here: {e.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def make_exposure(ex2d, data):
    """Four 25-fibre cameras (synthetic PSFs), their preproc frames and ex2d extract's frames."""
    pre = os.path.join(data, "preproc", NIGHT, EXPID)
    os.makedirs(pre, exist_ok=True)
    os.makedirs(os.path.join(data, "reference"), exist_ok=True)
    for seed, cam in enumerate(CAMERAS, start=1):
        full, psf = f"{data}/psf-full-{cam}.fits", f"{data}/psf-{cam}.fits"
        preproc = f"{pre}/preproc-{cam}-{EXPID}.fits"
        if not os.path.exists(full):
            run([ex2d, "make-psf", "--camera", cam, "-o", full])
        if not os.path.exists(psf):
            run([ex2d, "make-psf", "--from", full, "--fibers", NFIBERS, "--wave-range", "6000,6100",
                 "-o", psf])
        if not os.path.exists(preproc):
            run([ex2d, "simulate", "-p", psf, "-o", preproc, "--truth", f"{data}/truth-{cam}.fits",
                 "--camera", cam, "--expid",
                 str(int(EXPID)), "--night", NIGHT, "-n", NFIBERS, "-w", WAVE, "--seed", str(seed)])
        ref = f"{data}/reference/frame-{cam}.fits"
        if not os.path.exists(ref):
            # The workers' backend: auto would take a device where one is found.
            run([ex2d, "extract", "-i", preproc, "-p", psf, "-o", ref, "-w", WAVE, "-n", NFIBERS,
                 "--threads", "1", "--backend", "cpu", "--psferr", "0.01"])


def epoch(ts):
    """A log line's ts (2026-11-28T15:26:38.143Z) in seconds since the epoch."""
    secs = time.mktime(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return secs + float("0" + ts[19:-1])


def outcome(workdir, out, data, compare):
    """Counts as the fleet tests' Outcome: lost, written twice, partial; and the frames that
    differ from ex2d extract's."""
    written = {}
    for _, rec in scenarios.log_records(workdir, "writer-*.log"):
        m = re.match(r"frame written output=(\S+)", rec.get("msg", ""))
        if m:
            written.setdefault(m.group(1), []).append(epoch(rec["ts"]))
    folder = os.path.join(out, "exposures", NIGHT, EXPID)
    expected = {os.path.join(folder, f"frame-{c}-{EXPID}.fits"): c for c in CAMERAS}
    found = sorted(os.path.join(d, f) for d, _, files in os.walk(out) for f in files)
    result = {"lost": 0, "twice": 0, "partial": 0, "differ": [], "written": written}
    for path, cam in expected.items():
        if path not in found:
            result["lost"] += 1
            continue
        cmp = subprocess.run([sys.executable, compare, path, f"{data}/reference/frame-{cam}.fits"],
                             text=True, capture_output=True)
        if cmp.returncode != 0:
            result["differ"].append(f"{cam}: {cmp.stdout.strip()} {cmp.stderr.strip()}")
    result["partial"] = len([p for p in found if p not in expected])
    result["leftovers"] = [p for p in found if p not in expected]
    result["twice"] = sum(len(t) - 1 for t in written.values() if len(t) > 1)
    return result


def run_scenario(sc, args, data):
    workdir = os.path.join(args.work, sc.name)
    shutil.rmtree(workdir, ignore_errors=True)
    out = os.path.join(workdir, "out")
    env = dict(os.environ, **scenarios.FLEET_ENV, **sc.env)
    cmd = [os.path.join(args.source, "tools", "ex2d-multihost"), "--bin",
           os.path.join(args.build, "services"), "--workdir", workdir, "--readers", "1",
           "--workers", "2", "--writers", str(sc.writers), "--worker-threads", "1",
           "--timeout", "150"]
    for name, assignment in sc.env_of:
        cmd += ["--env-of", name, assignment]
    if sc.fault:
        cmd += ["--during", f"{sys.executable} {os.path.abspath(__file__)} --fault {sc.name}"]
    cmd += ["--", "--exposure-dir", os.path.join(data, "preproc", NIGHT, EXPID), "--psf",
            os.path.join(data, "psf-{camera}.fits"), "--output-root", out, "-w", WAVE, "-n",
            NFIBERS, "--compression", "none", "--badcolumns", "none"]
    log(f"--- {sc.name}: {sc.what}")
    t0 = time.time()
    tool = subprocess.run(cmd, env=env, text=True, capture_output=True)
    took = time.time() - t0
    with open(os.path.join(workdir, "tool.log"), "w") as f:
        f.write(tool.stdout + tool.stderr)
    failures = []
    if tool.returncode != 0:
        failures.append(f"ex2d-multihost exited {tool.returncode}: "
                        + " | ".join(tool.stderr.strip().splitlines()[-6:]))
    if "teardown: no namespace" not in tool.stdout:
        failures.append("the tool did not report a clean teardown")
    o = outcome(workdir, out, data, os.path.join(args.source, "docker", "compare-fits"))
    log(f"{sc.name}: frames {len(CAMERAS)} lost={o['lost']} written_twice={o['twice']} "
        f"partial={o['partial']} differ={len(o['differ'])} ({took:.1f} s in all)")
    for key in ("lost", "twice", "partial"):
        if o[key]:
            failures.append(f"{key} = {o[key]} {o['leftovers'] if key == 'partial' else ''}")
    failures += [f"differs from ex2d extract: {d}" for d in o["differ"]]
    marks = scenarios.read_marks(workdir)
    if sc.fault:
        failures += sc.check(workdir, marks)
        if "heal" in marks and o["written"]:
            last = max(t for ts in o["written"].values() for t in ts)
            recovery = max(0.0, last - marks["heal"])
            bound = scenarios.LEASE_S + 10
            log(f"{sc.name}: fault at +{marks['fault'] - t0:.1f} s, healed {marks['heal'] - marks['fault']:.1f} s "
                f"later; last frame written {recovery:.1f} s after the heal (bound {bound:.0f} s)")
            if recovery > bound:
                failures.append(f"recovery {recovery:.1f} s > lease + 10 s = {bound:.0f} s")
        elif "heal" not in marks:
            failures.append("the fault never healed (see logs/during.log)")
    for f in failures:
        log(f"{sc.name}: FAILED: {f}")
    if failures:
        log(f"{sc.name}: logs in {workdir}/logs; the tool's output in {workdir}/tool.log")
    return not failures


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build")
    p.add_argument("--source")
    p.add_argument("--work")
    p.add_argument("--scenario", action="append")
    p.add_argument("--fault")
    p.add_argument("--cleanup", action="store_true",
                   help="remove what a killed run left (tools/ex2d-multihost --cleanup)")
    args = p.parse_args()
    if args.fault:
        return scenarios.play(args.fault)
    missing = requirements_missing()
    if missing:
        log(f"skipped: {missing}")
        return SKIP
    if args.cleanup:
        return subprocess.run([os.path.join(args.source, "tools", "ex2d-multihost"),
                               "--cleanup"]).returncode
    chosen = [s for s in scenarios.ALL if not args.scenario or s.name in args.scenario]
    if not chosen:
        p.error(f"no such scenario; known: {', '.join(s.name for s in scenarios.ALL)}")
    os.makedirs(args.work, exist_ok=True)
    data = os.path.join(args.work, "data")
    make_exposure(os.path.join(args.build, "services", "ex2d", "ex2d"), data)
    failed = [s.name for s in chosen if not run_scenario(s, args, data)]
    log(f"scenarios: {len(chosen)}, failed: {len(failed)} {' '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
