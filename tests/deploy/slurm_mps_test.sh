#!/usr/bin/env bash
# The Slurm launch scripts (deploy/slurm/) on a real one-node Slurm cluster on loopback.
#
#   slurm_mps_test.sh --bin DIR --ex2d FILE --source-dir DIR [--keep]
#
#   --bin DIR         ex2d-reader, ex2d-worker, ex2d-writer and ex2dctl (flat, or a build
#                     tree's services/ with ROLE/ex2d-ROLE)
#   --ex2d FILE       the ex2d tool (make-psf, simulate, extract)
#   --source-dir DIR  the repository (deploy/slurm/ is taken from it)
#   --keep            keep the temporary folder (it is always kept when a check fails)
#
# It starts munged and slurmctld + slurmd (Debian's munge and slurm-wlm) in a temporary
# folder with their own key, socket, ports, state and logs; puts stub nvidia-smi (two fake
# GPUs) and nvidia-cuda-mps-control (logs start, pipe creation after a delay, quit) first in
# PATH; then
#   1. checks ex2d-mps-wrapper through srun: exit statuses pass through, the pipe timeout fails
#      with a clear message and --stop quits a daemon left behind;
#   2. checks what ex2d-container would run for podman, podman-hpc and shifter (--dry-run);
#   3. submits deploy/slurm/ex2d-night.sbatch with CPU workers under (stub) MPS on a simulated
#      night of 3 exposures, over tcp as between nodes (Redis with a password on every
#      interface, CURVE keys made for the job), and checks: exit 0, every frame done (ex2dctl
#      status --json), frames equal to `ex2d extract` of the same inputs, the daemon started
#      once before any worker, each worker pinned to its GPU's UUID, one worker drained with
#      `ex2dctl drain` exits 0 while the other finishes the night, the daemon stopped once
#      after both;
#   4. runs it (ipc transport) on a night whose only frame is truncated: the job must fail
#      (exit 1);
#   5. stops everything and checks that no process it started is left.
# Exit 0 when every check passes, 1 when one fails, 77 (ctest SKIP) when slurm-wlm, munge,
# redis-server or python3 with astropy and numpy are missing.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bin="" ex2d="" src="" keep=0
while (($#)); do
  case $1 in
    --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
    --ex2d) ex2d=${2:?--ex2d needs a file}; shift 2 ;;
    --source-dir) src=${2:?--source-dir needs a folder}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "slurm_mps_test: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n $bin && -n $ex2d && -n $src ]] || { echo "slurm_mps_test: --bin, --ex2d and --source-dir are required" >&2; exit 2; }
bin=$(cd "$bin" && pwd) src=$(cd "$src" && pwd)
[[ -x $ex2d ]] || { echo "slurm_mps_test: --ex2d $ex2d is not an executable" >&2; exit 2; }
ctl=$bin/ex2dctl
[[ -x $ctl ]] || ctl=$bin/ctl/ex2dctl
[[ -x $ctl ]] || { echo "slurm_mps_test: no ex2dctl in $bin" >&2; exit 2; }

skip() { echo "SKIP: $*"; exit 77; }
for tool in slurmctld slurmd munged mungekey sbatch srun sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null || skip "$tool not installed (apt-get install slurm-wlm munge; .ci/install-deps --tests does)"
done
command -v redis-server >/dev/null || skip "redis-server not installed"
py=""
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import astropy, numpy' 2>/dev/null; then py=$candidate; break; fi
done
[[ -n $py ]] || skip "python3 with astropy and numpy not found (apt-get install python3-astropy python3-numpy)"

prog=slurm_mps_test
# shellcheck source=slurm_test_lib.bash
source "$(dirname "$0")/slurm_test_lib.bash"

# munged needs every folder above its socket searchable by all.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ex2d-slurm-test.XXXXXX")
chmod 755 "$tmp"
mkdir -p "$tmp"/{munge,slurm/state,slurm/spool,slurm/log,stub,data,work,nodetmp}
chmod 755 "$tmp/munge"
stub_log=$tmp/stub/calls.log
stub_pids=$tmp/stub/pids
: >"$stub_log"
: >"$stub_pids"  # the stub MPS daemons' pids, for the record only
# Every process started for the jobs carries this variable: how leftovers are found.
mark="EX2D_SLURM_TEST_MARK=$tmp"

daemon_pids=()
teardown() {
  local rc=$?
  set +e
  phase "teardown"
  if [[ -n ${SLURM_CONF:-} && -f $SLURM_CONF ]]; then
    for id in $(squeue -h -o %i 2>/dev/null); do scancel "$id" 2>/dev/null; done
  fi
  for pidfile in "$tmp/slurm/slurmd.pid" "$tmp/slurm/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [[ -s $pidfile ]] && daemon_pids+=("$(<"$pidfile")")
  done
  end_processes "${daemon_pids[@]}"
  # Anything of the jobs that outlived them (ours: it carries the mark).
  for p in $(marked_pids); do kill -KILL "$p" 2>/dev/null; done
  sleep 0.2
  local left=""
  for p in "${daemon_pids[@]}" $(marked_pids); do running "$p" && left+=" $p"; done
  if [[ -n $left ]]; then
    echo "FAIL processes left running after the teardown:$left"
    ((rc == 0)) && rc=1
  else
    echo "ok   teardown: munged, slurmctld, slurmd and every process of the jobs are gone"
  fi
  end_teardown "$rc" "slurm logs in slurm/log, stub calls in stub/calls.log, fleet logs in work/logs"
}
trap teardown EXIT

# ---- munge and Slurm ----------------------------------------------------------------------
phase "starting munged, slurmctld and slurmd in $tmp"
start_munged

host=$(hostname -s)
user=$(id -un)
export SLURM_CONF=$tmp/slurm/slurm.conf
{
  slurm_conf_head ex2dtest "$host" 127.0.0.1 "$user" ""
  cat <<EOF
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
} >"$SLURM_CONF"
slurmctld -i
slurmd
node_idle() { [[ $(sinfo -h -N -o %T 2>/dev/null) == idle ]]; }
if ! wait_for 60 "the node idle in sinfo" node_idle; then
  sinfo -N -l || true
  tail -20 "$tmp/slurm/log/slurmctld.log" "$tmp/slurm/log/slurmd.log" || true
  exit 1
fi
ok "one-node Slurm up: $(sinfo -h -N -o '%N %T %c CPUs') [$(elapsed) s]"

# ---- stubs --------------------------------------------------------------------------------
gpu0=GPU-11111111-2222-3333-4444-555555555555
gpu1=GPU-66666666-7777-8888-9999-000000000000
cat >"$tmp/stub/nvidia-smi" <<EOF
#!/usr/bin/env bash
# Stub nvidia-smi: two fake GPUs.
echo "\$(date +%s.%N) nvidia-smi \$* host=\$(hostname -s)" >>"\$EX2D_STUB_LOG"
case "\$*" in
  *--query-gpu=uuid*--format=csv,noheader*) printf '%s\n' $gpu0 $gpu1 ;;
  *) echo "stub nvidia-smi: unsupported arguments: \$*" >&2; exit 1 ;;
esac
EOF
cat >"$tmp/stub/nvidia-cuda-mps-control" <<'EOF'
#!/usr/bin/env bash
# Stub MPS control: -d starts a "daemon" that creates $CUDA_MPS_PIPE_DIRECTORY/control after
# EX2D_STUB_MPS_DELAY seconds and lives until `quit` removes it; every call is logged.
dir=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
now() { date +%s.%N; }
if [[ ${1:-} == -d ]]; then
  [[ -e $dir/control ]] && { echo "An instance of this daemon is already running" >&2; exit 1; }
  [[ -d ${CUDA_MPS_LOG_DIRECTORY:-/var/log/nvidia-mps} ]] || { echo "no log directory" >&2; exit 1; }
  echo "$(now) mps-start pipe=$dir log=$CUDA_MPS_LOG_DIRECTORY cuda_visible_devices=${CUDA_VISIBLE_DEVICES:-unset}" >>"$EX2D_STUB_LOG"
  nohup bash -c 'sleep "$2"; mkfifo "$1/control"; echo "$(date +%s.%N) mps-pipe-created pipe=$1" >>"$3"
                 while [[ -p $1/control ]]; do sleep 0.1; done
                 echo "$(date +%s.%N) mps-daemon-exit pipe=$1" >>"$3"' \
    _ "$dir" "${EX2D_STUB_MPS_DELAY:-1}" "$EX2D_STUB_LOG" </dev/null >/dev/null 2>&1 &
  echo $! >>"$EX2D_STUB_PIDS"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "stub nvidia-cuda-mps-control: unsupported arguments: $*" >&2; exit 1; }
read -r command
echo "$(now) mps-command $command pipe=$dir" >>"$EX2D_STUB_LOG"
[[ -p $dir/control ]] || { echo "Cannot find MPS control daemon process" >&2; exit 1; }
case $command in
  quit) rm -f "$dir/control" ;;
  *) echo "stub nvidia-cuda-mps-control: unsupported command $command" >&2; exit 1 ;;
esac
EOF
cat >"$tmp/stub/record-worker" <<'EOF'
#!/usr/bin/env bash
# Put before each worker: records the environment it gets, runs it, records its end.
pipe=no
[[ -p ${CUDA_MPS_PIPE_DIRECTORY:-/nonexistent}/control ]] && pipe=yes
echo "$(date +%s.%N) worker-start local=$SLURM_LOCALID cuda_visible_devices=${CUDA_VISIBLE_DEVICES:-unset} mps_pipe_dir=${CUDA_MPS_PIPE_DIRECTORY:-unset} control_exists=$pipe" >>"$EX2D_STUB_LOG"
"$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM
while :; do
  if wait $child; then rc=0; else rc=$?; fi
  kill -0 $child 2>/dev/null || break
done
echo "$(date +%s.%N) worker-exit local=$SLURM_LOCALID status=$rc" >>"$EX2D_STUB_LOG"
exit $rc
EOF
chmod +x "$tmp/stub/nvidia-smi" "$tmp/stub/nvidia-cuda-mps-control" "$tmp/stub/record-worker"
# The jobs' environment (srun and sbatch pass it on); the test's own shell stays unmarked.
job_env=(env "$mark" "PATH=$tmp/stub:$PATH" "EX2D_STUB_LOG=$stub_log" "EX2D_STUB_PIDS=$stub_pids"
         "TMPDIR=$tmp/nodetmp")
wrapper=$src/deploy/slurm/ex2d-mps-wrapper
stub_lines() { grep -c -- "$1" "$stub_log" || true; }

# ---- 1. the wrapper alone -----------------------------------------------------------------
phase "ex2d-mps-wrapper through srun"
cd "$tmp"
set +e
"${job_env[@]}" srun -N1 -n2 -O "$wrapper" bash -c 'exit $((SLURM_LOCALID * 3))' 2>"$tmp/srun-status.err"
rc=$?
"${job_env[@]}" srun -N1 -n1 "$wrapper" false 2>>"$tmp/srun-status.err"
rc_false=$?
"${job_env[@]}" srun -N1 -n1 "$wrapper" true 2>>"$tmp/srun-status.err"
rc_true=$?
set -e
check "a task's exit status passes through the wrapper and srun (rank 1 exits 3: srun $rc)" test "$rc" -eq 3
check "srun ex2d-mps-wrapper false exits non-zero ($rc_false)" test "$rc_false" -eq 1
check "srun ex2d-mps-wrapper true exits 0 ($rc_true)" test "$rc_true" -eq 0
check "three steps: three daemon starts and three quits" \
  test "$(stub_lines ' mps-start ')/$(stub_lines ' mps-command quit ')" = 3/3
# A command that exits 8 (a worker whose device failed) is started again, at most
# EX2D_DEVICE_RESTARTS times; here it fails twice, then exits 0.
set +e
"${job_env[@]}" EX2D_DEVICE_RESTARTS=3 srun -N1 -n1 "$wrapper" bash -c \
  'echo run >>"$0"; [ "$(wc -l <"$0")" -ge 3 ] || exit 8' "$tmp/device-runs" 2>"$tmp/srun-device.err"
rc_device=$?
"${job_env[@]}" EX2D_DEVICE_RESTARTS=2 srun -N1 -n1 "$wrapper" bash -c \
  'echo run >>"$0"; exit 8' "$tmp/device-always" 2>>"$tmp/srun-device.err"
rc_device_always=$?
set -e
check "exit 8 twice, then 0: three runs, status 0 ($(wc -l <"$tmp/device-runs") runs, status $rc_device)" \
  test "$(wc -l <"$tmp/device-runs")/$rc_device" = 3/0
check "exit 8 every time: 1 + EX2D_DEVICE_RESTARTS (2) runs, status 8 ($(wc -l <"$tmp/device-always") runs, status $rc_device_always)" \
  test "$(wc -l <"$tmp/device-always")/$rc_device_always" = 3/8
check "each restart is logged" \
  test "$(grep -c 'exited 8 (its device failed): starting it again' "$tmp/srun-device.err")" = 4
# The pipe never comes in time: a clear error, and --stop quits the daemon rank 0 left behind.
set +e
"${job_env[@]}" EX2D_STUB_MPS_DELAY=3 EX2D_MPS_START_TIMEOUT=1 EX2D_MPS_DIR="$tmp/nodetmp/mps-timeout" \
  srun -N1 -n1 "$wrapper" true 2>"$tmp/srun-timeout.err"
rc_timeout=$?
set -e
check "pipe timeout: non-zero exit ($rc_timeout)" test "$rc_timeout" -ne 0
check "pipe timeout: the message names the pipe and the limit" \
  grep -q "mps-timeout/control did not happen within 1 s" "$tmp/srun-timeout.err"
wait_for 10 "the late pipe" test -p "$tmp/nodetmp/mps-timeout/control"
"${job_env[@]}" EX2D_MPS_DIR="$tmp/nodetmp/mps-timeout" srun -N1 -n1 "$wrapper" --stop
check "--stop quits the daemon left running and removes its folder" \
  test "$(grep -c "mps-command quit pipe=$tmp/nodetmp/mps-timeout" "$stub_log")" = 1 -a ! -e "$tmp/nodetmp/mps-timeout"
ok "wrapper checks done [$(elapsed) s]"

# ---- 2. container command lines -----------------------------------------------------------
phase "ex2d-container --dry-run"
mkdir -p "$tmp/nodetmp/mps-dry"
dry() { env CUDA_MPS_PIPE_DIRECTORY="$tmp/nodetmp/mps-dry" CUDA_VISIBLE_DEVICES=$gpu1 EX2D_REDIS_PORT=7000 \
  "$src/deploy/slurm/ex2d-container" --dry-run "$@" --volume "$tmp/data" -- ex2d-worker --worker.backend cuda | paste -sd' '; }
podman_hpc=$(dry --runtime podman-hpc --image localhost/ex2d-worker:dev --gpu)
podman=$(dry --runtime podman --image localhost/ex2d-worker:dev --gpu)
shifter=$(dry --runtime shifter --image docker:registry.example/ex2d-worker:dev --gpu)
has() { [[ " $1 " == *" $2 "* ]]; }
check "podman-hpc: --gpu, host network and IPC, the MPS pipe folder mounted, env passed, worker entrypoint" \
  eval 'has "$podman_hpc" "podman-hpc run --gpu" && has "$podman_hpc" "--network host --ipc host" &&
        has "$podman_hpc" "-v $tmp/nodetmp/mps-dry:$tmp/nodetmp/mps-dry" && has "$podman_hpc" "-v $tmp/data:$tmp/data" &&
        has "$podman_hpc" "-e CUDA_MPS_PIPE_DIRECTORY" && has "$podman_hpc" "-e CUDA_VISIBLE_DEVICES" &&
        has "$podman_hpc" "-e EX2D_REDIS_PORT" &&
        has "$podman_hpc" "--entrypoint ex2d-worker localhost/ex2d-worker:dev --worker.backend cuda"'
check "podman: --runtime runc --network host, CDI GPUs, the MPS pipe folder mounted" \
  eval 'has "$podman" "podman run --runtime runc" && has "$podman" "--device nvidia.com/gpu=all" &&
        has "$podman" "--network host" && has "$podman" "-v $tmp/nodetmp/mps-dry:$tmp/nodetmp/mps-dry"'
check "shifter: --image, --volume for the MPS pipe folder, the GPU module, the program" \
  eval 'has "$shifter" "shifter --image=docker:registry.example/ex2d-worker:dev --module=gpu" &&
        has "$shifter" "--volume=$tmp/nodetmp/mps-dry:$tmp/nodetmp/mps-dry" &&
        has "$shifter" "-- ex2d-worker --worker.backend cuda"'
set +e
"$src/deploy/slurm/ex2d-container" --runtime docker --image x -- ex2d-worker 2>"$tmp/container-bad.err"
rc_bad=$?
set -e
check "ex2d-container refuses an unknown runtime with a message ($rc_bad)" \
  eval '[[ $rc_bad == 2 ]] && grep -q "runtime .docker.: expected podman, podman-hpc or shifter" "$tmp/container-bad.err"'

# ---- 3. a night through ex2d-night.sbatch -------------------------------------------------
simulate_night

phase "sbatch deploy/slurm/ex2d-night.sbatch (CPU workers, 2 stub GPUs x 1 worker, MPS, tcp); one worker drained"
# As an operator would: once worker-HOST-1 has registered, `ex2dctl drain` it; the other worker
# must do the night, the drained one exit 0, and MPS stay up until both are gone.
drain_worker() {
  local address="" start=$SECONDS
  until [[ -n $address ]]; do
    ((SECONDS - start < 200)) || return 1
    sleep 0.2
    address=$(sed -n 's/.*Redis ready at \([^ ]*:[0-9]*\).*/\1/p' "$tmp/night.out" 2>/dev/null || true)
  done
  export EX2D_REDIS_HOST=${address%:*} EX2D_REDIS_PORT=${address##*:} EX2D_REDIS_PASSWORD_FILE=$tmp/work/redis.password
  until "$ctl" --json workers 2>/dev/null | grep -q "\"name\":\"worker-$host-1\""; do
    ((SECONDS - start < 200)) || return 1
    sleep 0.2
  done
  "$ctl" drain "worker-$host-1" >"$tmp/drain.out" 2>&1
  echo "$(date +%s.%N) drain-requested worker-$host-1" >>"$stub_log"
}
drain_worker &
drainer=$!
t_job=$(date +%s.%N)
job=$("${job_env[@]}" EX2D_SLURM_BACKEND=cpu EX2D_SLURM_MPS=1 EX2D_SLURM_WORKERS_PER_GPU=1 \
  EX2D_SLURM_BIN="$bin" EX2D_SLURM_WORKDIR="$tmp/work" EX2D_SLURM_TIMEOUT=240 \
  EX2D_SLURM_WORKER_PREFIX="$tmp/stub/record-worker" EX2D_SLURM_TRANSPORT=tcp \
  sbatch --parsable -N1 -o "$tmp/night.out" "$src/deploy/slurm/ex2d-night.sbatch" \
  --night-dir "$tmp/data/preproc/$night" --psf "$tmp/data/calib/psf-{camera}.fits" \
  --output-root "$tmp/data/out" -- -w 6000,6100,0.8 -n 25 --psferr 0.01 --compression none)
wait_job_and_show "$t_job" "$tmp/night.out"
kill "$drainer" 2>/dev/null || true  # when it is still looking, the job ended without it
wait "$drainer" && drained=1 || drained=0
check "ex2dctl drain worker-$host-1 was accepted while the night ran" \
  eval '((drained)) && grep -q "asked worker-$host-1 to drain" "$tmp/drain.out"'
check "job $job COMPLETED with exit code 0:0 ($(job_state JobState) $(job_state ExitCode), $job_s s)" \
  test "$(job_state JobState) $(job_state ExitCode)" = "COMPLETED 0:0"

check_night_done

compare_night_with_extract

# MPS: started once before any worker, each worker pinned, stopped once after the workers.
phase "MPS and pinning from the stub calls"
mps_dir=$tmp/nodetmp/ex2d-mps-$job
echo "--- stub calls for the night ---"
grep -e "pipe=$mps_dir" -e "mps_pipe_dir=$mps_dir" "$stub_log" || true
echo "---"
check "the MPS daemon started exactly once for the job, in its own pipe folder" \
  test "$(grep -c "mps-start pipe=$mps_dir " "$stub_log")" = 1
check "timeline: daemon start < pipe created < every worker start; workers see the pipe" \
  "$py" - "$stub_log" "$mps_dir" "$gpu0" "$gpu1" <<'PY'
import sys
log, d, gpu0, gpu1 = sys.argv[1:]
ev = []
for line in open(log):
    t, kind, *rest = line.split()
    kv = dict(x.split("=", 1) for x in rest if "=" in x)
    if kv.get("pipe") == d or kv.get("mps_pipe_dir") == d:
        ev.append((float(t), kind, kv))
start = [t for t, k, _ in ev if k == "mps-start"]
pipe = [t for t, k, _ in ev if k == "mps-pipe-created"]
workers = [(t, kv) for t, k, kv in ev if k == "worker-start"]
ok = len(start) == 1 and len(pipe) == 1 and len(workers) == 2 and start[0] < pipe[0]
ok = ok and all(t > pipe[0] and kv["control_exists"] == "yes" for t, kv in workers)
# worker i -> GPU (i mod 2)
pins = {kv["local"]: kv["cuda_visible_devices"] for _, kv in workers}
print("  daemon start %.2f, pipe %.2f, workers %s; pins %s" % (
    start[0] if start else -1, pipe[0] if pipe else -1, [round(t, 2) for t, _ in workers], pins))
ok = ok and pins == {"0": gpu0, "1": gpu1}
sys.exit(0 if ok else 1)
PY
check "each worker pinned to its GPU UUID (local 0 -> $gpu0, local 1 -> $gpu1)" \
  eval 'grep -q "worker-start local=0 cuda_visible_devices=$gpu0 mps_pipe_dir=$mps_dir" "$stub_log" &&
        grep -q "worker-start local=1 cuda_visible_devices=$gpu1 mps_pipe_dir=$mps_dir" "$stub_log"'
check "drained worker 1 exited 0 after the drain; the daemon stopped once (quit), after both workers, and ended" \
  "$py" - "$stub_log" "$mps_dir" <<'PY'
import sys
log, d = sys.argv[1:]
ev = []
for line in open(log):
    t, kind, *rest = line.split()
    kv = dict(x.split("=", 1) for x in rest if "=" in x)
    ev.append((float(t), kind, kv))
quits = [t for t, k, kv in ev if k == "mps-command" and kv.get("pipe") == d]
commands = [line for line in open(log) if "mps-command" in line and "pipe=" + d in line]
exits = [(t, kv) for t, k, kv in ev if k == "worker-exit"]
gone = [t for t, k, kv in ev if k == "mps-daemon-exit" and kv.get("pipe") == d]
worker_exits = [t for t, kv in exits if kv["status"] == "0"]
drains = [t for t, k, kv in ev if k == "drain-requested"]
drained_exit = [t for t, kv in exits if kv["local"] == "1" and kv["status"] == "0"]
ok = len(quits) == 1 and all("quit" in c for c in commands) and len(gone) == 1
ok = ok and len(worker_exits) == 2 and quits[0] > max(worker_exits)
# The drained worker (local 1) left after the drain request and MPS outlived it. Which worker
# exits first is not asserted: a short night can end, and stop the other, right after the drain.
ok = ok and len(drains) == 1 and len(drained_exit) == 1 and drains[0] < drained_exit[0] < min(quits)
print("  drain requested %s, drained worker exit %s" % ([round(t, 2) for t in drains], [round(t, 2) for t in drained_exit]))
print("  quit at %s, worker exits %s, daemon exit %s" % ([round(t, 2) for t in quits],
      [round(t, 2) for t in worker_exits], [round(t, 2) for t in gone]))
sys.exit(0 if ok else 1)
PY
check "the job's MPS and socket folders are removed" test ! -e "$mps_dir" -a ! -e "$tmp/nodetmp/ex2d-$job"
# tcp as between nodes: Redis on every interface with a password, ZeroMQ over TCP, with CURVE
# keys made for the job when ex2dctl can make them.
check "tcp transport: Redis at the host name, workers connected over tcp://" \
  eval 'grep -q "Redis ready at $(hostname):" "$tmp/night.out" &&
        grep -q "connected to reader reader-$host-0 tcp://" "$tmp/work/logs/worker-$host-0.log"'
if "$ctl" keygen --secret-file "$tmp/probe.secret" --public-file "$tmp/probe.public" >/dev/null 2>&1; then
  check "tcp transport: the job's CURVE keys (secret mode 600) and workers connected with them" \
    eval '[[ $(stat -c %a "$tmp/work/curve.secret") == 600 ]] &&
          grep -q "connected to reader reader-$host-0 tcp://.* curve_key=" "$tmp/work/logs/worker-$host-0.log"'
else
  echo "note: this ex2dctl has no keygen: the tcp night ran without CURVE"
fi
check "every service drained and exited 0 (job log)" \
  eval '! grep -q "step exited with status" "$tmp/night.out" && grep -q "all 3 frame(s) done" "$tmp/night.out"'

# ---- 4. a night with a broken frame: the job must fail ------------------------------------
phase "sbatch ex2d-night.sbatch on a night whose only frame is truncated (1 worker)"
bad_night=20261123 bad_expid=00000201
mkdir -p "$tmp/data/preproc/$bad_night/$bad_expid"
head -c 20000 "$tmp/data/preproc/$night/${expids[0]}/preproc-r0-${expids[0]}.fits" \
  >"$tmp/data/preproc/$bad_night/$bad_expid/preproc-r0-$bad_expid.fits"
# This job's first Redis finds its port taken when it binds (as when another process holds it
# between the job's probe and the bind); the job must try another port, not fail.
mkdir -p "$tmp/stub-port-taken"
real_redis=$(command -v redis-server)
cat >"$tmp/stub-port-taken/redis-server" <<EOF
#!/bin/bash
if [[ ! -e $tmp/stub-port-taken/tried ]]; then
  touch $tmp/stub-port-taken/tried
  log=\$(awk '\$1 == "logfile" { print \$2 }' "\$1")
  echo "# Warning: Could not create server TCP listening socket *:1: bind: Address already in use" >>"\$log"
  echo "# Failed listening on port 1 (TCP), aborting." >>"\$log"
  exit 1
fi
exec $real_redis "\$@"
EOF
chmod +x "$tmp/stub-port-taken/redis-server"
t_job=$(date +%s.%N)
job=$("${job_env[@]}" "PATH=$tmp/stub-port-taken:$tmp/stub:$PATH" \
  EX2D_SLURM_BACKEND=cpu EX2D_SLURM_MPS=1 EX2D_SLURM_WORKERS_PER_NODE=1 \
  EX2D_SLURM_BIN="$bin" EX2D_SLURM_WORKDIR="$tmp/work-bad" EX2D_SLURM_TIMEOUT=240 \
  sbatch --parsable -N1 -o "$tmp/night-bad.out" "$src/deploy/slurm/ex2d-night.sbatch" \
  --night-dir "$tmp/data/preproc/$bad_night" --psf "$tmp/data/calib/psf-{camera}.fits" \
  --output-root "$tmp/data/out" -- -w 6000,6100,0.8 -n 25 --psferr 0.01 --compression none)
wait_job_and_show "$t_job" "$tmp/night-bad.out"
bad_s=$job_s
check "job $job with a failed frame ends FAILED with exit code 1:0 ($(job_state JobState) $(job_state ExitCode), $bad_s s)" \
  test "$(job_state JobState) $(job_state ExitCode)" = "FAILED 1:0"
check "a Redis port taken at bind time was retried on another port" \
  grep -q "was taken when Redis bound it (attempt 1); trying another" "$tmp/night-bad.out"
check "the job names the failed frame count" grep -q "night $bad_night: 0 frame(s) done, 1 failed" "$tmp/night-bad.out"
check "its services, stopped after they had started, still exited 0" \
  eval '! grep -q "step exited with status" "$tmp/night-bad.out" && grep -q "stopping the services" "$tmp/night-bad.out"'
check "its MPS daemon was started and stopped once too" \
  test "$(grep -c "mps-start pipe=$tmp/nodetmp/ex2d-mps-$job " "$stub_log")/$(grep -c "mps-command quit pipe=$tmp/nodetmp/ex2d-mps-$job$" "$stub_log")" = 1/1

# ---- 5. nothing left ----------------------------------------------------------------------
phase "leftovers"
# Processes of a finished job may still be exiting: wait for them with a deadline.
for _ in $(seq 100); do
  [[ -z "$(marked_pids)" ]] && break
  sleep 0.1
done
left=$(marked_pids | tr '\n' ' ')
check "no process of the jobs left after the job (${left:-none})" test -z "$left"

if ((failures)); then
  echo "slurm_mps_test: $failures check(s) failed"
  exit 1
fi
echo "slurm_mps_test: all checks passed (night job $job_s s)"
