# What the Slurm deployment tests (slurm_mps_test.sh, slurm_multinode_test.sh) share: the
# check helpers, the simulated night, the job's state, and the checks of the night's outcome
# (ex2dctl status --json, every frame against `ex2d extract`). Source it after setting `prog`
# (for messages); the night's functions use `tmp`, `ex2d`, `py`, `job` and `mark` as the
# scripts set them.
# shellcheck shell=bash disable=SC2154  # prog, tmp, ex2d, py, job, mark and keep are the script's

t_start=$(date +%s.%N)
failures=0
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() {  # description command... : passes when the command succeeds
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
phase() { echo "== [$(elapsed) s] $*"; }
wait_for() {  # seconds description command...
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    ((SECONDS - start < limit)) || { echo "$prog: $what not within $limit s" >&2; return 1; }
    sleep 0.1
  done
}
# PID runs (a zombie does not).
running() {
  local stat
  stat=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $stat && ${stat%% *} != Z ]]
}
# ctest ends a test past its TIMEOUT with SIGKILL, so no teardown runs and what the test made
# stays. start_deadline S (S below the TIMEOUT less the teardown's time) sends the test SIGTERM,
# whose trap exits through the teardown, S s from now; the teardown calls stop_deadline first.
start_deadline() {  # seconds
  local main=$$ end=$(($(date +%s) + $1))
  (
    while (($(date +%s) < end)); do sleep 1; done
    echo "$prog: its deadline of $1 s passed: stopping it" >&2
    kill -TERM "$main"
  ) </dev/null >/dev/null &
  deadline_watchdog=$!
}
stop_deadline() {
  [[ -z ${deadline_watchdog:-} ]] || kill "$deadline_watchdog" 2>/dev/null || true
}
# Ends the processes PIDS: SIGTERM, up to 10 s for them to exit, then SIGKILL.
end_processes() {  # pid...
  local p
  (($#)) || return 0
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do
    local alive=0
    for p in "$@"; do running "$p" && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for p in "$@"; do running "$p" && kill -KILL "$p" 2>/dev/null; done
  sleep 0.2
}
# Processes whose environment holds the mark (started by the jobs of this test).
marked_pids() {
  { grep -lzxF "$mark" /proc/[0-9]*/environ 2>/dev/null || true; } | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'
}

# The end of a teardown: $tmp is kept when the run failed or --keep asked (HOLDS says what it
# holds), else removed; the time taken; exit RC.
end_teardown() {  # rc holds
  if (($1 != 0 || keep)); then
    echo "kept $tmp ($2)"
  else
    rm -rf "$tmp"
  fi
  echo "$prog: $(elapsed) s in all"
  exit "$1"
}

# A port for a daemon started later: from below the ephemeral range, which outgoing
# connections draw from (test_ports.py). Free on every address, so that it serves loopback and
# the emulated nodes' bridge alike.
free_port() { "$py" "$(dirname "${BASH_SOURCE[0]}")/test_ports.py" 0.0.0.0; }

# munged with a key, socket, pid, log and seed of its own under $tmp/munge.
start_munged() {
  mungekey -c -k "$tmp/munge/munge.key"
  munged --socket="$tmp/munge/munge.socket" --key-file="$tmp/munge/munge.key" \
    --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed"
  wait_for 10 "munged's socket" test -S "$tmp/munge/munge.socket"
}

# The slurm.conf of a test cluster up to its nodes: its daemons' own free ports, state and
# logs under $tmp/slurm (SUFFIX "-%n" gives each slurmd of the host its own), munge's socket,
# no cgroup, accounting or job completion plugin.
slurm_conf_head() {  # cluster controller-host controller-address user suffix
  cat <<EOF
ClusterName=$1
SlurmctldHost=$2($3)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$4
SlurmdUser=$4
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/slurm/state
SlurmdSpoolDir=$tmp/slurm/spool$5
SlurmctldPidFile=$tmp/slurm/slurmctld.pid
SlurmdPidFile=$tmp/slurm/slurmd$5.pid
SlurmctldLogFile=$tmp/slurm/log/slurmctld.log
SlurmdLogFile=$tmp/slurm/log/slurmd$5.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=10
MinJobAge=600
EOF
}

# A night of 3 exposures of camera r0 (25 fibres, 6000-6100 A) under $tmp/data: sets `night`
# and `expids`.
simulate_night() {
  phase "simulating a night: 3 exposures of camera r0, 25 fibres, 6000-6100 A"
  night=20261122
  mkdir -p "$tmp/data/calib" "$tmp/data/out"
  "$ex2d" make-psf --camera r0 -o "$tmp/data/calib/psf-full.fits" 2>>"$tmp/data/make.log"
  "$ex2d" make-psf --from "$tmp/data/calib/psf-full.fits" --fibers 25 --wave-range 6000,6100 \
    -o "$tmp/data/calib/psf-r0.fits" 2>>"$tmp/data/make.log"
  expids=(00000101 00000102 00000103)
  local seed=0 e
  for e in "${expids[@]}"; do
    seed=$((seed + 1))
    mkdir -p "$tmp/data/preproc/$night/$e"
    "$ex2d" simulate -p "$tmp/data/calib/psf-r0.fits" -o "$tmp/data/preproc/$night/$e/preproc-r0-$e.fits" \
      --truth "$tmp/data/truth-r0-$e.fits" --camera r0 --expid "$((10#$e))" --night "$night" \
      -n 25 -w 6000,6100,0.8 --seed "$seed" 2>>"$tmp/data/make.log"
  done
  ok "simulated ${#expids[@]} preproc frames [$(elapsed) s]"
}

job_state() { scontrol show job -o "$job" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"; }
job_over() { [[ $(job_state JobState) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }
# Whether every node's slurmd still runs: a script with slurmds of its own redefines it.
slurmds_alive() { true; }
job_over_or_slurmd_lost() { job_over || ! slurmds_alive; }
# Waits up to 400 s for `job` (submitted at T0) to end or a slurmd to die (else cancels it),
# prints its output file and sets `job_s`, the seconds from T0 to its end.
wait_job_and_show() {  # t0 output-file
  if ! wait_for 400 "job $job's end" job_over_or_slurmd_lost || ! job_over; then
    scancel "$job" || true
  fi
  job_s=$(awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "--- job output ($2) ---"
  cat "$2" || true
  echo "---"
}

# Every frame of the night done, from ex2dctl status --night --json as the job saved it.
check_night_done() {
  check "ex2dctl status --json: 3 exposures done, 3 frames done, none failed, dead or open" \
    "$py" - "$tmp/work/status.json" "${expids[@]}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rows = {r["expid"]: r for r in s["exposures"]}
want = sys.argv[2:]
ok = sorted(rows) == sorted(want) and all(
    r["state"] == "done" and r["nframes"] == 1 and r["done"] == 1 and r["failed"] == 0 and r["dead"] == 0
    for r in rows.values())
t = s["totals"]
ok = ok and t["done"] == 3 and sum(t[k] for k in ("failed", "dead", "cancelled", "queued", "reading", "extracting", "writing")) == 0
if not ok:
    print(json.dumps(s, indent=1)[:3000])
sys.exit(0 if ok else 1)
PY
}

# The night's frames against ex2d extract on the same inputs and options, on the workers'
# backend (cpu): auto would take a device where one is found.
compare_night_with_extract() {
  phase "comparing the frames with ex2d extract"
  local compare_args=() e frame
  for e in "${expids[@]}"; do
    frame=$tmp/data/out/exposures/$night/$e/frame-r0-$e.fits
    check "frame $e written" test -s "$frame"
    check "ex2d extract of exposure $e (the reference) succeeds" \
      "$ex2d" extract -i "$tmp/data/preproc/$night/$e/preproc-r0-$e.fits" -p "$tmp/data/calib/psf-r0.fits" \
      -o "$tmp/data/ref-r0-$e.fits" -w 6000,6100,0.8 -n 25 --backend cpu --psferr 0.01 \
      2>>"$tmp/data/extract.log"
    compare_args+=("$frame" "$tmp/data/ref-r0-$e.fits")
  done
  check "FLUX and IVAR of the fleet's frames equal ex2d extract's" "$py" - "${compare_args[@]}" <<'PY'
import sys
import numpy as np
from astropy.io import fits
ok = True
args = sys.argv[1:]
for fleet, ref in zip(args[::2], args[1::2]):
    with fits.open(fleet) as a, fits.open(ref) as b:
        for hdu in ("FLUX", "IVAR"):
            x, y = np.asarray(a[hdu].data, float), np.asarray(b[hdu].data, float)
            same_shape = x.shape == y.shape
            diff = float(np.max(np.abs(x - y))) if same_shape else float("inf")
            scale = float(np.max(np.abs(y))) or 1.0
            good = same_shape and np.all(np.isfinite(x)) and diff <= 1e-9 * scale and x.size > 0
            print("  %s %s shape %s max|fleet - extract| = %.3g (max|extract| %.3g)" % (fleet.rsplit("/", 1)[1], hdu, x.shape, diff, scale))
            ok = ok and good
sys.exit(0 if ok else 1)
PY
}
