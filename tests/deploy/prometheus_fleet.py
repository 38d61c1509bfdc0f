#!/usr/bin/env python3
"""A real Prometheus scrapes a small local fleet and evaluates the chart's alert rules.

  prometheus_fleet.py --source-dir DIR --reader BIN --worker BIN --writer BIN --ctl BIN --ex2d BIN
                      [--test-hooks ON|OFF]

Starts redis-server, one reader, worker and writer (fixed free HTTP ports) and Prometheus
(own configuration and TSDB in a temporary folder, 127.0.0.1 on a free port, 1 s scrape and
evaluation) loading charts/ex2d/files/ex2d-alerts.yaml unchanged. Then, through Prometheus's
HTTP API:
  A. one exposure of 3 frames: every target up, the frame counters equal the frames
     submitted, every rule evaluates without error, no alert is active, every query of the
     Grafana dashboard is accepted (and the fleet's ones return data);
  B. a poison frame (EX2D_TEST_POISON_JOB kills each worker that starts it; a supervisor
     restarts workers as Kubernetes would): Ex2dDeadLetters and Ex2dLeaseExpiries fire;
  C. the worker stopped and a frame submitted: Ex2dNoLiveWorker goes pending; a worker
     started again: the frame is done and the alert is gone.
Exit 0 on success, 1 with the failures listed, 77 (ctest SKIP) without prometheus or redis-server,
or with binaries built without test hooks (--test-hooks OFF: their workers ignore the poison).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import test_ports

failures = []
NIGHT = "20261122"
POISON = "nightly/00000002/b1"


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAILED:", what, flush=True)
    return ok


def free_port():
    return test_ports.unused_port()


def eventually(timeout, fn, step=0.25):
    end = time.time() + timeout
    while True:
        value = fn()
        if value or time.time() > end:
            return value
        time.sleep(step)


class Fleet:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.redis_port = free_port()
        self.http = {role: free_port() for role in ("reader", "worker", "writer")}
        self.procs = {}
        self.restarts = 0
        os.makedirs(f"{work}/logs")
        os.makedirs(f"{work}/redis")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EX2D_")}
        self.env.update({
            "EX2D_REDIS_HOST": "127.0.0.1", "EX2D_REDIS_PORT": str(self.redis_port),
            "EX2D_ZMQ_BIND": f"ipc://{work}/{{name}}.sock", "EX2D_SERVICE_HTTP_HOST": "127.0.0.1",
            # Short leases and few deliveries, so a poison frame is dead-lettered in seconds.
            "EX2D_QUEUE_LEASE_S": "4", "EX2D_QUEUE_REAPER_INTERVAL_S": "1", "EX2D_QUEUE_MAX_DELIVERIES": "2",
        })

    def redis(self, *cmd):
        r = subprocess.run(["redis-cli", "-p", str(self.redis_port)] + list(cmd), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=10)
        return r.stdout.strip()

    def start_redis(self):
        subprocess.run(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir",
                        f"{self.work}/redis", "--appendonly", "yes", "--maxmemory-policy", "noeviction",
                        "--save", "", "--daemonize", "yes", "--logfile", f"{self.work}/logs/redis.log"], check=True)
        return eventually(10, lambda: self.redis("ping") == "PONG")

    def start(self, role, name):
        env = dict(self.env, EX2D_SERVICE_NAME=name, EX2D_SERVICE_HTTP_PORT=str(self.http[role]))
        if role == "worker":
            env.update({"EX2D_WORKER_THREADS": "1", "EX2D_TEST_POISON_JOB": POISON})
        log = open(f"{self.work}/logs/{name}.log", "w")
        self.procs[role] = subprocess.Popen([getattr(self.args, role)], env=env, stdout=log, stderr=subprocess.STDOUT)
        return self.procs[role]

    def ctl(self, *args, timeout=120):
        r = subprocess.run([self.args.ctl] + list(args), env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return r.returncode, r.stdout

    def make_exposures(self, cameras_by_expid):
        ex2d = self.args.ex2d
        run = lambda *a: subprocess.run([ex2d] + list(a), check=True, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        run("make-psf", "--camera", "r0", "-o", f"{self.work}/psf-full.fits")
        run("make-psf", "--from", f"{self.work}/psf-full.fits", "--fibers", "25", "--wave-range", "6000,6100",
            "-o", f"{self.work}/psf.fits")
        seed = 0
        for expid, cameras in cameras_by_expid.items():
            folder = f"{self.work}/preproc/{NIGHT}/{expid:08d}"
            os.makedirs(folder)
            for cam in cameras:
                seed += 1
                # the same PSF labelled with each camera: ex2d checks that image and PSF agree
                if not os.path.exists(f"{self.work}/psf-{cam}.fits"):
                    run("make-psf", "--from", f"{self.work}/psf.fits", "--camera", cam, "-o",
                        f"{self.work}/psf-{cam}.fits")
                run("simulate", "-p", f"{self.work}/psf-{cam}.fits", "-o", f"{folder}/preproc-{cam}-{expid:08d}.fits",
                    "--truth", f"{folder}/truth-{cam}.fits", "--camera", cam, "--expid", str(expid),
                    "--night", NIGHT, "-n", "25", "-w", "6000,6100,0.8", "--seed", str(seed))

    def submit(self, expid):
        return self.ctl("submit", "--exposure-dir", f"{self.work}/preproc/{NIGHT}/{expid:08d}", "--psf",
                        f"{self.work}/psf-{{camera}}.fits", "--output-root", f"{self.work}/out", "-w", "6000,6100,0.8",
                        "-n", "25", "--compression", "none")

    def exposure_state(self, expid):
        return self.redis("HGET", f"ex2d:exposure:nightly:{expid:08d}", "state")

    def stop_all(self):
        codes = {}
        for role, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for role, p in self.procs.items():
            try:
                codes[role] = p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[role] = "timeout"
        self.procs = {}
        return codes


class Prometheus:
    def __init__(self, work, targets, rule_file):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [rule_file],
            "scrape_configs": [{"job_name": "ex2d", "static_configs": [{"targets": targets}]}],
        }
        with open(f"{work}/prometheus.yml", "w") as f:
            json.dump(config, f)  # JSON is YAML
        self.log = open(f"{work}/logs/prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/tsdb",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def get(self, path, **params):
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = r.read().decode()
        except urllib.error.HTTPError as e:
            body = e.read().decode()
        except OSError:
            return None
        return json.loads(body) if path.startswith("/api/") else body

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def query(self, expr):
        r = self.get("/api/v1/query", query=expr)
        return r if r else {"status": "error", "error": "no answer"}

    def scalar(self, expr):
        r = self.query(expr)
        if r.get("status") != "success" or not r["data"]["result"]:
            return None
        return float(r["data"]["result"][0]["value"][1])

    def alerts(self):
        r = self.get("/api/v1/alerts")
        return {} if not r else {a["labels"]["alertname"]: a for a in r["data"]["alerts"]}

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def dashboard_queries(path):
    dash = json.load(open(path))
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            expr = (t["expr"].replace("$__rate_interval", "10s").replace("$__range", "10m")
                    .replace('"$namespace"', '".*"'))
            out.append((p["title"], expr))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source-dir", required=True)
    for b in ("reader", "worker", "writer", "ctl", "ex2d"):
        ap.add_argument("--" + b, required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--test-hooks", default="ON", help="whether the binaries have test hooks")
    args = ap.parse_args()
    if args.test_hooks.upper() not in ("ON", "1", "TRUE", "YES"):
        print("SKIP: the binaries were built without test hooks (cmake -DEX2D_TEST_HOOKS=ON)")
        return 77
    for tool in ("prometheus", "redis-server", "redis-cli"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed (.ci/install-deps --tests installs it)")
            return 77
    src = os.path.abspath(args.source_dir)
    rule_file = os.path.join(src, "charts/ex2d/files/ex2d-alerts.yaml")
    rule_names = [line.split(":", 1)[1].strip() for line in open(rule_file) if line.strip().startswith("- alert:")]
    work = tempfile.mkdtemp(prefix="ex2d-prometheus-")
    t0 = time.time()
    fleet = Fleet(args, work)
    prom = None
    try:
        fleet.make_exposures({1: ["b0", "r0", "z0"], 2: ["b1", "r1"], 3: ["z2"]})
        if not check(fleet.start_redis(), "redis-server did not start"):
            return 1
        prom = Prometheus(work, [f"127.0.0.1:{p}" for p in fleet.http.values()], rule_file)
        if not check(eventually(30, prom.ready), "Prometheus not ready within 30 s (see logs/prometheus.log)"):
            return 1
        for role in ("reader", "writer", "worker"):
            fleet.start(role, f"{role}-1")

        def targets_up():
            r = prom.get("/api/v1/targets")
            active = r["data"]["activeTargets"] if r else []
            return len(active) == 3 and all(t["health"] == "up" for t in active)
        # On a loaded machine the first scrapes can lag; wait for all three before counting.
        check(eventually(60, targets_up), "the three services were not all scraped within 60 s")
        print(f"setup (exposures, redis, prometheus, fleet, first scrapes): {time.time() - t0:.1f} s", flush=True)

        # A. One clean exposure.
        t = time.time()
        rc, out = fleet.submit(1)
        check(rc == 0, f"submit 1: {out}")
        rc, out = fleet.ctl("wait", "--exposure", "1", "--timeout", "60")
        check(rc == 0 and fleet.exposure_state(1) == "done", f"exposure 1 not done: {out}")
        written_expr = 'sum(ex2d_frames_total{role="writer",state="written"})'
        written = eventually(20, lambda: prom.scalar(written_expr) == 3)
        check(written, f"Prometheus does not see 3 frames written: {prom.scalar(written_expr)}")
        for expr, want in (('sum(ex2d_frames_total{role="reader",state="read"})', 3),
                           ('sum(ex2d_frames_total{role="reader",state="sent"})', 3),
                           ('sum(ex2d_frames_total{role="worker",state="extracted"})', 3),
                           ('sum(ex2d_stage_seconds_count{role="worker",stage="extract"})', 3),
                           ('sum(ex2d_stage_seconds_count{role="writer",stage="write"})', 3),
                           ('sum(ex2d_up)', 3), ('count(up{job="ex2d"} == 1)', 3)):
            eventually(20, lambda: prom.scalar(expr) == want)
            got = prom.scalar(expr)
            check(got == want, f"{expr} = {got}, expected {want}")
        targets = prom.get("/api/v1/targets")["data"]["activeTargets"]
        check(len(targets) == 3 and all(t["health"] == "up" for t in targets),
              f"targets: {[(t['scrapeUrl'], t['health'], t.get('lastError')) for t in targets]}")
        rules = [r for g in prom.get("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
        check(sorted(r["name"] for r in rules) == sorted(rule_names), f"rules loaded: {[r['name'] for r in rules]}")
        check(all(r["health"] == "ok" for r in rules), f"rules with errors: {[(r['name'], r.get('lastError')) for r in rules if r['health'] != 'ok']}")
        time.sleep(2)
        active = prom.alerts()
        check(not active, f"alerts active on a healthy fleet: {sorted((n, a['state']) for n, a in active.items())}")
        empty = []
        queries = dashboard_queries(os.path.join(src, "charts/ex2d/dashboards/ex2d.json"))
        for title, expr in queries:
            r = prom.query(expr)
            check(r.get("status") == "success", f"dashboard '{title}': query refused: {r.get('error')} ({expr})")
            if r.get("status") == "success" and not r["data"]["result"]:
                empty.append(title)
        # Panels of faults that did not happen (leases expired or lost, drops, reconnect
        # increases of a flat counter still answer) may be empty; the fleet's own may not.
        for title in ("Frames written", "Ready workers", "Ready readers", "Ready writers", "Frames per minute by stage",
                      "Processes ready by role", "Stage duration p50 / p95", "Frames held in memory",
                      "Nightly queue depth", "Versions running", "ZeroMQ traffic"):
            check(title not in empty, f"dashboard '{title}' shows no data for a running fleet")
        frames_stat = prom.scalar(queries[0][1])
        check(frames_stat is not None and round(frames_stat) == 3, f"dashboard 'Frames written' = {frames_stat}, expected 3")
        print(f"A. 3 frames, {len(targets)} targets up, {len(rules)} rules ok, no alert, "
              f"{len(queries)} dashboard queries ({len(empty)} empty: {empty}): {time.time() - t:.1f} s", flush=True)

        # B. A poison frame: its worker dies at each extraction start; a supervisor restarts it.
        t = time.time()
        rc, out = fleet.submit(2)
        check(rc == 0, f"submit 2: {out}")

        def supervise():
            p = fleet.procs["worker"]
            if p.poll() is not None:
                fleet.restarts += 1
                fleet.start("worker", f"worker-r{fleet.restarts}")
            return fleet.exposure_state(2) == "done_with_errors"
        check(eventually(120, supervise), f"exposure 2 is {fleet.exposure_state(2)!r}, not done_with_errors")
        check(fleet.redis("HGET", "ex2d:frame:nightly:00000002:b1", "state") == "dead", "the poison frame is not dead")
        check(fleet.redis("HGET", "ex2d:frame:nightly:00000002:r1", "state") == "done", "the other frame is not done")
        fired = eventually(30, lambda: all(prom.alerts().get(n, {}).get("state") == "firing"
                                          for n in ("Ex2dDeadLetters", "Ex2dLeaseExpiries")))
        alerts = prom.alerts()
        check(fired, f"Ex2dDeadLetters and Ex2dLeaseExpiries not both firing: "
                     f"{sorted((n, a['state']) for n, a in alerts.items())}")
        dead = prom.scalar('sum(ex2d_frames_total{role="reader",state="dead"})')
        expired = prom.scalar('sum(ex2d_leases_total{role="reader",event="expired"})')
        check(dead == 1, f"dead frames seen by Prometheus: {dead}, expected 1")
        check(expired is not None and expired >= 1, f"expired leases seen by Prometheus: {expired}")
        if "Ex2dDeadLetters" in alerts:
            check(alerts["Ex2dDeadLetters"]["annotations"]["description"].startswith("1 frame(s) went to the dead-letter"),
                  f"Ex2dDeadLetters description: {alerts['Ex2dDeadLetters']['annotations']['description']}")
        print(f"B. poison frame dead after {fleet.restarts} worker restart(s); dead={dead} expired={expired}; "
              f"Ex2dDeadLetters and Ex2dLeaseExpiries firing: {time.time() - t:.1f} s", flush=True)

        # C. No worker while a frame waits.
        t = time.time()
        quiet = eventually(30, lambda: "Ex2dNoLiveWorker" not in prom.alerts())
        check(quiet, "Ex2dNoLiveWorker active before the worker was stopped")
        worker = fleet.procs["worker"]
        worker.send_signal(signal.SIGTERM)
        check(worker.wait(timeout=40) == 0, "the worker did not exit 0 after SIGTERM")
        rc, out = fleet.submit(3)
        check(rc == 0, f"submit 3: {out}")
        pending = eventually(30, lambda: prom.alerts().get("Ex2dNoLiveWorker", {}).get("state") == "pending")
        alerts = prom.alerts()
        check(pending, f"Ex2dNoLiveWorker not pending with a frame waiting and no worker: "
                       f"{sorted((n, a['state']) for n, a in alerts.items())}")
        check(prom.query('ex2d_up{role="worker"}')["data"]["result"] == [], "a worker still reported up")
        t_pending = time.time() - t
        fleet.start("worker", "worker-2")
        rc, out = fleet.ctl("wait", "--exposure", "3", "--timeout", "60")
        check(rc == 0 and fleet.exposure_state(3) == "done", f"exposure 3 not done once a worker came: {out}")
        gone = eventually(30, lambda: "Ex2dNoLiveWorker" not in prom.alerts())
        check(gone, "Ex2dNoLiveWorker still active with a worker back and nothing waiting")
        print(f"C. Ex2dNoLiveWorker pending {t_pending:.1f} s after the worker stopped; gone once a worker "
              f"came back: {time.time() - t:.1f} s", flush=True)

        codes = fleet.stop_all()
        check(all(c == 0 for c in codes.values()), f"exit codes after SIGTERM: {codes}")
    finally:
        fleet.stop_all()
        if prom:
            prom.stop()
        fleet.redis("shutdown", "nosave")
    print(f"prometheus fleet test: {time.time() - t0:.1f} s", flush=True)
    if failures:
        print(f"{len(failures)} check(s) failed; logs in {work}/logs")
        for f in failures:
            print("  -", f)
        return 1
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("all Prometheus checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
