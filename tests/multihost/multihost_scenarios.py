"""The partitions of multihost_faults.py: what each scenario does to which host, when, and what
it expects beyond the counts every scenario asserts. play() runs inside the tool's --during
hook (root namespace, EX2D_MH_WORKDIR and EX2D_MH_PREFIX set): it waits for the moment the
fault is about (a worker holding a frame, a frame or a result on the wire, a writer's
temporary file), applies it, holds it, heals it, and records both times in WORKDIR/marks.json."""
import glob
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, List, Tuple

LEASE_S = 6.0
# The fleet's timings for these runs (every process; docs/configuration.md): a short lease so
# that "past the lease" takes seconds, Redis commands that time out in 1 s, quick discovery.
FLEET_ENV = {
    "EX2D_QUEUE_LEASE_S": str(LEASE_S),
    "EX2D_QUEUE_REAPER_INTERVAL_S": "0.5",
    "EX2D_QUEUE_MAX_DELIVERIES": "5",
    "EX2D_REDIS_TIMEOUT_MS": "1000",
    "EX2D_SERVICE_HEARTBEAT_INTERVAL_S": "0.5",
    "EX2D_SERVICE_HEARTBEAT_TTL_S": "3",
    "EX2D_ZMQ_DISCOVERY_INTERVAL_S": "0.3",
    "EX2D_ZMQ_PEER_TIMEOUT_S": "3",
    "EX2D_WRITER_SWEEP_INTERVAL_S": "0.5",
    "EX2D_READER_CREDIT_HOLD_MS": "200",
}
# A frame (about 0.3 MB) or a result (0.4 MB) crosses a link limited to this rate in seconds,
# so that a cut lands in the middle of it.
SLOW_RATE = "800kbit"


def workdir():
    return os.environ["EX2D_MH_WORKDIR"]


def prefix():
    return os.environ.get("EX2D_MH_PREFIX", "ex2d-mh-")


def address(host):
    with open(os.path.join(workdir(), "pids")) as f:
        for line in f:
            name, _pid, addr = line.split()
            if name == host:
                return addr
    raise KeyError(f"no host {host} in {workdir()}/pids")


def sh(*cmd):
    subprocess.run(cmd, check=True)


def in_host(host, *cmd):
    sh("ip", "netns", "exec", prefix() + host, *cmd)


def cut(host, peer, way="both"):
    """Drops what HOST receives from PEER (in), sends to it (out), or both."""
    peer_addr = address(peer)
    if way in ("both", "in"):
        in_host(host, "iptables", "-w", "-I", "INPUT", "-s", peer_addr, "-j", "DROP")
    if way in ("both", "out"):
        in_host(host, "iptables", "-w", "-I", "OUTPUT", "-d", peer_addr, "-j", "DROP")


def isolate(host):
    in_host(host, "iptables", "-w", "-I", "INPUT", "-i", "eth0", "-j", "DROP")
    in_host(host, "iptables", "-w", "-I", "OUTPUT", "-o", "eth0", "-j", "DROP")


def heal(host):
    in_host(host, "iptables", "-w", "-F", "INPUT")
    in_host(host, "iptables", "-w", "-F", "OUTPUT")


def mark(key, value=None):
    path = os.path.join(workdir(), "marks.json")
    marks = read_marks(workdir())
    marks[key] = time.time() if value is None else value
    with open(path + ".new", "w") as f:
        json.dump(marks, f)
    os.replace(path + ".new", path)
    print(f"{time.strftime('%H:%M:%S')} {key} {marks[key]}", flush=True)


def read_marks(folder):
    try:
        with open(os.path.join(folder, "marks.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def log_records(folder, pattern):
    """(process name, record) of each JSON line in FOLDER/logs/PATTERN; a line still being
    written is skipped."""
    for path in sorted(glob.glob(os.path.join(folder, "logs", pattern))):
        with open(path) as f:
            lines = f.readlines()
        for line in lines:
            try:
                yield os.path.basename(path)[:-4], json.loads(line)
            except ValueError:
                pass


def records(name):
    return (r for _, r in log_records(workdir(), name + ".log"))


def wait_for(what, predicate, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        found = predicate()
        if found:
            return found
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not seen in {timeout} s")


def wait_log(name, pattern, timeout=60):
    """The first record of NAME's log whose message matches PATTERN."""
    def seen():
        return next((r for r in records(name) if re.search(pattern, r.get("msg", ""))), None)
    return wait_for(f"{name}: '{pattern}'", seen, timeout)


def backlog_bytes(host, dev):
    """Bytes queued in DEV's root qdisc (tc -s), in HOST's namespace or the root one."""
    cmd = ["tc", "-s", "qdisc", "show", "dev", dev]
    if host:
        cmd = ["ip", "netns", "exec", prefix() + host] + cmd
    text = subprocess.run(cmd, check=True, text=True, capture_output=True).stdout
    m = re.search(r"backlog (\d+)b", text)
    return int(m.group(1)) if m else 0


def ready():
    """Lets the tool submit the exposure (what must be in place before it is)."""
    open(os.environ["EX2D_MH_READY"], "w").close()


def hold_frame_then(victim, fault, undo, seconds):
    """Waits until VICTIM (a worker) holds a frame, applies FAULT for SECONDS, then UNDO."""
    ready()
    rec = wait_log(victim, r"^extraction started")
    mark("camera", rec["camera"])
    fault()
    mark("fault")
    time.sleep(seconds)
    undo()
    mark("heal")


# ---- the faults -----------------------------------------------------------------------------
def worker_cut_from_redis(way, seconds):
    def play():
        hold_frame_then("worker-1", lambda: cut("worker-1", "redis", way),
                        lambda: heal("worker-1"), seconds)
    return play


def redis_cut_from_everyone():
    hold_frame_then("worker-1", lambda: isolate("redis"), lambda: heal("redis"), 1.5 * LEASE_S)


def worker_cut_from_reader_mid_frame():
    # Frames to worker-1 cross its bridge port slowly; the cut comes while one is queued there.
    link = prefix() + "wk1"
    sh("tc", "qdisc", "add", "dev", link, "root", "tbf", "rate", SLOW_RATE, "burst", "16kb",
       "latency", "10s")
    ready()
    wait_for("a frame on its way to worker-1", lambda: backlog_bytes(None, link) > 30_000)
    cut("worker-1", "reader-1")
    mark("fault")
    time.sleep(LEASE_S + 4)
    sh("tc", "qdisc", "del", "dev", link, "root")
    heal("worker-1")
    mark("heal")


def worker_cut_from_writer_mid_result():
    sh("ip", "netns", "exec", prefix() + "worker-1", "tc", "qdisc", "add", "dev", "eth0", "root",
       "tbf", "rate", SLOW_RATE, "burst", "16kb", "latency", "10s")
    ready()
    wait_for("a result leaving worker-1", lambda: backlog_bytes("worker-1", "eth0") > 30_000)
    cut("worker-1", "writer-1")
    mark("fault")
    time.sleep(LEASE_S + 4)
    in_host("worker-1", "tc", "qdisc", "del", "dev", "eth0", "root")
    heal("worker-1")
    mark("heal")


def writer_isolated_with_temporary():
    ready()
    out = os.path.join(workdir(), "out")
    pattern = os.path.join(out, "exposures", "*", "*", f"*.tmp-{prefix()}writer-1-*")
    tmp = wait_for("writer-1's temporary file", lambda: glob.glob(pattern))[0]
    mark("camera", re.search(r"frame-(\w\d)-", os.path.basename(tmp)).group(1))
    isolate("writer-1")
    mark("fault")
    time.sleep(LEASE_S + 5)
    heal("writer-1")
    mark("heal")


# ---- what each scenario expects beyond the counts ------------------------------------------
def writes_of(folder, camera):
    """(writer, attempt, worker) of each 'frame written' of CAMERA."""
    found = []
    for _, r in log_records(folder, "writer-*.log"):
        if r.get("camera") == camera and r.get("msg", "").startswith("frame written"):
            worker = re.search(r"worker=(\S+)", r["msg"]).group(1)
            found.append((r["name"], r.get("attempt"), worker))
    return found


def log_has(folder, name, pattern):
    try:
        with open(os.path.join(folder, "logs", name + ".log")) as f:
            return any(re.search(pattern, line) for line in f)
    except FileNotFoundError:
        return False


def held_frame_kept(folder, marks):
    w = writes_of(folder, marks.get("camera"))
    if w and w[0][1] == 1 and w[0][2] == "worker-1":
        return []
    return [f"the frame worker-1 held ({marks.get('camera')}) should have been finished by it "
            f"at attempt 1 (a cut shorter than the lease): writes {w}"]


def held_frame_redelivered(folder, marks):
    w = writes_of(folder, marks.get("camera"))
    if w and w[0][1] and w[0][1] >= 2:
        return []
    return [f"the frame worker-1 held ({marks.get('camera')}) should have been re-delivered "
            f"(attempt >= 2) after the lease: writes {w}"]


def nothing_more(_folder, _marks):
    return []


def late_rename_refused(folder, marks):
    problems = []
    w = writes_of(folder, marks.get("camera"))
    if not w or w[0][0] != "writer-2":
        problems.append(f"{marks.get('camera')} should have been written by writer-2: {w}")
    if not log_has(folder, "writer-1", r"lease lost|not renamed|write abandoned"):
        problems.append("writer-1 does not say its late rename was refused")
    return problems


@dataclass
class Scenario:
    name: str
    what: str
    fault: Callable[[], None] = None
    check: Callable = nothing_more
    writers: int = 1
    env: dict = field(default_factory=dict)
    env_of: List[Tuple[str, str]] = field(default_factory=list)


# Every worker takes 3 s a frame, so that each holds frames for a while (two at most: its
# credit) and worker-1 is sure to get some of the four.
SLOW_WORKERS = {"EX2D_TEST_DELAY_EXTRACT_MS": "3000"}
ALL = [
    Scenario("baseline", "no fault: 4 frames over tcp:// with CURVE between 5 hosts"),
    Scenario("worker-redis-short", "worker-1 cut from Redis for half its lease while it holds "
             "a frame", worker_cut_from_redis("both", LEASE_S / 2), held_frame_kept,
             env=SLOW_WORKERS),
    Scenario("worker-redis-long", "worker-1 cut from Redis for twice its lease while it holds "
             "a frame", worker_cut_from_redis("both", 2 * LEASE_S), held_frame_redelivered,
             env=SLOW_WORKERS),
    Scenario("worker-redis-one-way", "worker-1 hears nothing from Redis (its requests still "
             "arrive) for twice its lease while it holds a frame",
             worker_cut_from_redis("in", 2 * LEASE_S), held_frame_redelivered,
             env=SLOW_WORKERS),
    Scenario("worker-reader-mid-frame", "worker-1 cut from the reader while a frame is on the "
             "wire to it, past the lease", worker_cut_from_reader_mid_frame, env=SLOW_WORKERS),
    Scenario("worker-writer-mid-result", "worker-1 cut from the writer while its result is on "
             "the wire, past the lease", worker_cut_from_writer_mid_result, env=SLOW_WORKERS),
    Scenario("writer-isolated-temporary", "writer-1 isolated past its lease holding a complete "
             "temporary file before its rename", writer_isolated_with_temporary,
             late_rename_refused, writers=2,
             env_of=[("writer-1", f"EX2D_TEST_DELAY_WRITE_MS={int((LEASE_S + 8) * 1000)}")]),
    Scenario("redis-cut", "Redis cut from every host for 1.5 leases while worker-1 holds a "
             "frame", redis_cut_from_everyone, env=SLOW_WORKERS),
]


def play(name):
    scenario = next(s for s in ALL if s.name == name)
    scenario.fault()
    return 0
