#!/usr/bin/env bash
# deploy/slurm/ex2d-night.sbatch on a three-node Slurm cluster emulated on one machine.
#
#   slurm_multinode_test.sh --bin DIR --ex2d FILE --source-dir DIR [--keep]
#   slurm_multinode_test.sh --cleanup
#
#   --bin DIR         ex2d-reader, ex2d-worker, ex2d-writer and ex2dctl (flat, or a build
#                     tree's services/ with ROLE/ex2d-ROLE)
#   --ex2d FILE       the ex2d tool (make-psf, simulate, extract)
#   --source-dir DIR  the repository (deploy/slurm/ is taken from it)
#   --keep            keep the temporary folder (it is always kept when a check fails)
#   --deadline S      stop through the teardown S s after the start (default 240: ctest's
#                     TIMEOUT is 300, and past it ctest kills with SIGKILL, leaving all behind)
#   --cleanup         remove what a killed run left (namespaces, links, /etc/netns files, the
#                     iptables rule, the processes in the namespaces, its munged and slurmctld)
#                     and exit; a run does so itself when no other run is live
#
# Several slurmd on one host (slurmd -N NAME, which Debian's slurm-wlm 22.05 allows) would
# share its host name, address and /dev/shm: the job's service names (ROLE-HOST-LOCALID) would
# collide and the services would share /dev/shm as on one node (docs/multihost.md). So each
# node is an emulated host, as tools/ex2d-multihost makes them: a network namespace ex2d-sn-nI
# with a veth into the bridge ex2d-sn-br (link-local 169.254.78.0/24: bridge .1, node I .1I), and UTS, IPC
# and mount namespaces (host name ex2d-sn-nI, a private /dev/shm, /etc/netns/ex2d-sn-nI/hosts
# as its /etc/hosts). A slurmd runs in each (NodeName = its host name, NodeAddr = its address,
# its own spool, log and pid file through %n); munged and slurmctld run in the root namespace,
# reached over the bridge (munged's socket is a file every mount namespace sees). Then
#   1. checks that srun -N3 runs one task on each node, in its namespace (host name, address);
#   2. simulates a night of 3 exposures and submits ex2d-night.sbatch with -N 3 --io-nodes 1
#      (readers and writers on node 1 with Redis and ex2dctl, one CPU worker on each of nodes 2
#      and 3), tcp transport with CURVE, and checks: the job COMPLETED 0:0, every frame done,
#      frames equal to `ex2d extract` of the same inputs, each service's log on the node it was
#      placed on, its host name in its lines and in Redis (ex2dctl status), the workers
#      connected to node 1's reader and writer over tcp with CURVE and the frames travelled over
#      the sockets (not shared memory);
#   3. stops everything and checks that no process, namespace, link, /etc/netns file or
#      iptables rule named ex2d-sn-* is left.
# Exit 0 when every check passes, 1 when one fails, 77 (ctest SKIP) when not root or when ip,
# unshare, slurm-wlm, munge, redis-server or python3 with astropy and numpy are missing.
set -euo pipefail

prog=slurm_multinode_test
# shellcheck source=slurm_test_lib.bash
source "$(dirname "$0")/slurm_test_lib.bash"
prefix="ex2d-sn-"
bridge=${prefix}br
iptables_comment=${prefix}bridge
subnet=169.254.78
nodes=(n1 n2 n3)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bin="" ex2d="" src="" keep=0 cleanup_only=0 deadline_s=240
while (($#)); do
  case $1 in
    --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
    --ex2d) ex2d=${2:?--ex2d needs a file}; shift 2 ;;
    --source-dir) src=${2:?--source-dir needs a folder}; shift 2 ;;
    --keep) keep=1; shift ;;
    --deadline) deadline_s=${2:?--deadline needs seconds}; shift 2 ;;
    --cleanup) cleanup_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$prog: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root (network namespaces, a bridge, mounts)"
for tool in ip nsenter unshare setsid mount slurmctld slurmd munged mungekey sbatch srun sinfo squeue scontrol scancel; do
  command -v "$tool" >/dev/null || skip "$tool not installed (apt-get install iproute2 util-linux slurm-wlm munge)"
done

# ---- removal of everything named ex2d-sn-* ----------------------------------------------
our_namespaces() { ip netns list 2>/dev/null | awk -v p="$prefix" 'index($1, p) == 1 {print $1}'; }
our_links() { ip -o link show 2>/dev/null | awk -F': ' -v p="$prefix" '{sub(/@.*/, "", $2)} index($2, p) == 1 {print $2}'; }
our_netns_files() { find /etc/netns -mindepth 1 -maxdepth 1 -name "$prefix*" 2>/dev/null || true; }
our_iptables_rules() {
  command -v iptables >/dev/null || return 0
  iptables -S FORWARD 2>/dev/null | grep -F -- "--comment $iptables_comment" || true
}
namespace_pids() {
  local ns
  for ns in $(our_namespaces); do ip netns pids "$ns" 2>/dev/null || true; done
}
# The processes in our namespaces (slurmd, slurmstepd, the jobs): SIGTERM, 10 s, SIGKILL.
end_namespace_processes() {
  # shellcheck disable=SC2046  # one word per PID
  end_processes $(namespace_pids)
}
remove_everything() {
  local ns link rule
  end_namespace_processes
  for ns in $(our_namespaces); do ip netns del "$ns" 2>/dev/null || echo "$prog: cannot remove namespace $ns" >&2; done
  our_netns_files | while IFS= read -r file; do rm -rf "$file"; done
  rmdir /etc/netns 2>/dev/null || true
  # Deleting a namespace deletes its veth end and so the peer; the bridge remains.
  for link in $(our_links); do ip link del "$link" 2>/dev/null || true; done
  while IFS= read -r rule; do
    [[ -n $rule ]] || continue
    # shellcheck disable=SC2086  # the rule's words, as iptables -S printed them
    iptables ${rule/#-A /-D } 2>/dev/null || echo "$prog: cannot remove iptables rule: $rule" >&2
  done < <(our_iptables_rules)
}
# munged and slurmctld of a run killed with SIGKILL run on in the root namespace: they are
# found by their run's folder, named in their command line (munged) or SLURM_CONF (slurmctld).
leftover_daemons() {
  # "[.]" so that grep's own command line does not match.
  { grep -la "/ex2d-slurm-mn[.]" /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null || true; } |
    sed -n 's|^/proc/\([0-9]*\)/.*$|\1|p' | sort -u | grep -vx "$$" || true
}
end_leftover_daemons() {
  # shellcheck disable=SC2046  # one word per PID
  end_processes $(leftover_daemons)
}
# The running test that owns the objects named ex2d-sn-*, if any: its PID is in owner_file
# while it runs, so that a run killed with SIGKILL (a ctest timeout) is told from a live one.
owner_file=/run/${prefix}test.pid
live_owner() {
  local p
  p=$(cat "$owner_file" 2>/dev/null) || return 1
  [[ -n $p && $p != "$$" ]] && running "$p" && grep -qaF "$prog" "/proc/$p/cmdline" 2>/dev/null
}
what_is_left() {
  our_namespaces | sed 's/^/namespace /'
  our_links | sed 's/^/link /'
  our_netns_files | sed 's/^/file /'
  mount | grep -F "$prefix" | sed 's/^/mount /' || true
  our_iptables_rules | sed 's/^/iptables /'
}
if live_owner; then
  echo "$prog: another run (pid $(<"$owner_file")) is using the objects named $prefix*" >&2
  exit 1
fi
if ((cleanup_only)); then
  remove_everything
  end_leftover_daemons
  rm -f "$owner_file"
  left=$(what_is_left)
  [[ -z $left ]] && { echo "$prog: nothing named $prefix* is left"; exit 0; }
  echo "$prog: left behind:"$'\n'"$left" >&2
  exit 1
fi

[[ -n $bin && -n $ex2d && -n $src ]] || { echo "$prog: --bin, --ex2d and --source-dir are required" >&2; exit 2; }
bin=$(cd "$bin" && pwd) src=$(cd "$src" && pwd)
[[ -x $ex2d ]] || { echo "$prog: --ex2d $ex2d is not an executable" >&2; exit 2; }
ctl=$bin/ex2dctl
[[ -x $ctl ]] || ctl=$bin/ctl/ex2dctl
[[ -x $ctl ]] || { echo "$prog: no ex2dctl in $bin" >&2; exit 2; }
command -v redis-server >/dev/null || skip "redis-server not installed"
py=""
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import astropy, numpy' 2>/dev/null; then py=$candidate; break; fi
done
[[ -n $py ]] || skip "python3 with astropy and numpy not found (apt-get install python3-astropy python3-numpy)"
# No run is live (checked above), so what exists is a killed run's: removed, as --cleanup does.
left=$(what_is_left; leftover_daemons | sed 's/^/process /')
if [[ -n $left ]]; then
  echo "$prog: removing what a killed run left:"$'\n'"$left" | sed '2,$s/^/  /'
  remove_everything
  end_leftover_daemons
  left=$(what_is_left; leftover_daemons | sed 's/^/process /')
  [[ -z $left ]] || { echo "$prog: cannot remove what a killed run left:"$'\n'"$left" >&2; exit 1; }
fi
if ip -o -4 addr show | grep -q " $subnet\."; then
  echo "$prog: $subnet.0/24 is already in use on this machine (ip -4 addr)" >&2
  exit 1
fi

echo "$$" >"$owner_file"

# munged needs every folder above its socket searchable by all.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ex2d-slurm-mn.XXXXXX")
chmod 755 "$tmp"
mkdir -p "$tmp"/{munge,slurm/state,slurm/log,data,work,nodetmp}
chmod 755 "$tmp/munge"
# The jobs' processes carry this variable: how those outside the namespaces (none expected) are found.
mark="EX2D_SLURM_TEST_MARK=$tmp"

teardown() {
  local rc=$?
  set +e
  stop_deadline
  phase "teardown"
  if [[ -n ${SLURM_CONF:-} && -f $SLURM_CONF ]]; then
    for id in $(squeue -h -o %i 2>/dev/null); do scancel "$id" 2>/dev/null; done
  fi
  # The nodes first (slurmd and whatever runs under it), then slurmctld and munged.
  remove_everything
  local daemons=() p
  for pidfile in "$tmp/slurm/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [[ -s $pidfile ]] && daemons+=("$(<"$pidfile")")
  done
  end_processes "${daemons[@]}"
  # Anything of the jobs that outlived them (ours: it carries the mark).
  for p in $(marked_pids); do kill -KILL "$p" 2>/dev/null; done
  sleep 0.2
  local left="" objects
  for p in "${daemons[@]}" $(marked_pids); do running "$p" && left+=" $p"; done
  objects=$(what_is_left)
  if [[ -n $left || -n $objects ]]; then
    echo "FAIL left after the teardown: processes${left:- none}; ${objects//$'\n'/, }"
    ((rc == 0)) && rc=1
  else
    echo "ok   teardown: munged, slurmctld, the slurmds, every process of the jobs, the namespaces," \
      "links, /etc/netns files and iptables rule named $prefix* are gone"
  fi
  rm -f "$owner_file"
  end_teardown "$rc" "slurm logs in slurm/log, fleet logs in work/logs"
}
trap teardown EXIT
trap 'echo "$prog: interrupted" >&2; exit 1' INT TERM
start_deadline "$deadline_s"

# ---- the network: a bridge, a namespace and veth pair per node ----------------------------
phase "three emulated nodes on $bridge ($subnet.0/24)"
ip link add "$bridge" type bridge
echo 1 >"/proc/sys/net/ipv6/conf/$bridge/disable_ipv6" 2>/dev/null || true
ip addr add "$subnet.1/24" dev "$bridge"
ip link set "$bridge" up
# Where bridged frames pass iptables (br_netfilter) and FORWARD may drop them (Docker sets
# its policy to DROP), let the nodes talk to each other.
if command -v iptables >/dev/null && [[ $(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null) == 1 ]]; then
  iptables -I FORWARD -i "$bridge" -o "$bridge" -m comment --comment "$iptables_comment" -j ACCEPT
fi
declare -A address_of=()
i=0
for n in "${nodes[@]}"; do
  i=$((i + 1))
  ns=$prefix$n veth=$prefix$n addr=$subnet.$((10 + i))
  ip netns add "$ns"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  echo 1 >"/proc/sys/net/ipv6/conf/$veth/disable_ipv6" 2>/dev/null || true
  ip link set "$veth" master "$bridge" up
  ip netns exec "$ns" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6' 2>/dev/null || true
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  address_of[$n]=$addr
done
# Every node resolves every node's name, as a cluster's DNS would (ex2d-night advertises host
# names: Redis at the first node's, readers and writers at theirs).
for n in "${nodes[@]}"; do
  mkdir -p "/etc/netns/$prefix$n"
  {
    echo "127.0.0.1 localhost"
    for other in "${nodes[@]}"; do echo "${address_of[$other]} $prefix$other"; done
  } >"/etc/netns/$prefix$n/hosts"
done

# ---- munge and Slurm ----------------------------------------------------------------------
phase "starting munged and slurmctld (root namespace, $subnet.1) and a slurmd on each node"
start_munged

host=$(hostname -s)
node_list=${prefix}n[1-${#nodes[@]}]
export SLURM_CONF=$tmp/slurm/slurm.conf
{
  slurm_conf_head ex2dmn "$host" "$subnet.1" root -%n
  for n in "${nodes[@]}"; do echo "NodeName=$prefix$n NodeAddr=${address_of[$n]} CPUs=$(nproc) State=UNKNOWN"; done
  echo "PartitionName=test Nodes=$node_list Default=YES MaxTime=INFINITE State=UP"
} >"$SLURM_CONF"
slurmctld -i
# Each slurmd on its node: its network namespace, then mount, IPC and UTS namespaces of its own
# with the node's host name (slurmd finds its NodeName from it), the node's /etc/hosts and a
# private /dev/shm; in the foreground (-D). nsenter, not `ip netns exec`: that mounts a fresh
# /sys without /sys/fs/cgroup, and slurmd 22.05 loads its cgroup plugin whatever ProctrackType
# and TaskPlugin say ("No filesystem mounted on /sys/fs/cgroup ... slurmd initialization failed").
# Each starts in a folder of its own with core dumps on, so that a slurmd that crashes leaves
# its core there for the backtrace below (nsenter, unshare, sh and setsid exec: $! is slurmd).
declare -A slurmd_pid=()
for n in "${nodes[@]}"; do
  mkdir -p "$tmp/slurm/cwd-$n"
  # shellcheck disable=SC2016  # the inner shell expands them
  (cd "$tmp/slurm/cwd-$n" && ulimit -c unlimited &&
    exec nsenter --net="/run/netns/$prefix$n" unshare --ipc --mount --uts --propagation private -- \
    /bin/sh -c 'hostname "$1" && mount --bind "/etc/netns/$1/hosts" /etc/hosts &&
                mount -t tmpfs -o size=256m,mode=1777 "$1-shm" /dev/shm && shift && exec setsid "$@"' \
    sh "$prefix$n" slurmd -D) >"$tmp/slurm/log/slurmd-$n.stderr" 2>&1 &
  slurmd_pid[$n]=$!
done
slurmds_alive() {
  local n
  for n in "${nodes[@]}"; do running "${slurmd_pid[$n]}" || return 1; done
}
# What is known of a slurmd that ended: its exit status, stderr, log and a backtrace of its core.
show_lost_slurmds() {
  local n status core
  for n in "${nodes[@]}"; do
    running "${slurmd_pid[$n]}" && continue
    status=0
    wait "${slurmd_pid[$n]}" || status=$?
    echo "  slurmd of $prefix$n (pid ${slurmd_pid[$n]}) ended with status $status; its stderr and log:"
    tail -n 20 "$tmp/slurm/log/slurmd-$n.stderr" "$tmp/slurm/log/slurmd-$prefix$n.log" 2>&1 | sed 's/^/    /'
    for core in "$tmp/slurm/cwd-$n"/core*; do
      [[ -f $core ]] || continue
      if command -v gdb >/dev/null; then
        gdb -batch -q -ex 'thread apply all bt' "$(command -v slurmd)" "$core" 2>&1 | sed 's/^/    /' | head -n 80
      else
        echo "    core dump $core (gdb not installed)"
      fi
    done
  done
}
nodes_idle() { [[ $(sinfo -h -N -o %T 2>/dev/null | sort | uniq -c | awk '{print $1, $2}') == "${#nodes[@]} idle" ]]; }
if ! wait_for 60 "the ${#nodes[@]} nodes idle in sinfo" nodes_idle; then
  sinfo -N -l || true
  tail -n 20 "$tmp"/slurm/log/* || true
  exit 1
fi
ok "three-node Slurm up: $(sinfo -h -N -o '%N %T %c' | paste -sd, -) [$(elapsed) s]"

# The jobs' environment (srun and sbatch pass it on); the test's own shell stays unmarked.
job_env=(env "$mark" "TMPDIR=$tmp/nodetmp")
cd "$tmp"

# ---- 1. one task per node ------------------------------------------------------------------
phase "srun -N3: one task on each node"
placed=$(timeout 60 "${job_env[@]}" srun -N3 --ntasks-per-node=1 \
  sh -c 'echo "$SLURMD_NODENAME $(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}")"' 2>"$tmp/srun.err" | sort || true)
echo "$placed" | sed 's/^/  /'
want=""
for n in "${nodes[@]}"; do want+="$prefix$n $prefix$n ${address_of[$n]}/24"$'\n'; done
check "each node's task runs with its node's host name and address" test "$placed"$'\n' = "$want"

# ---- 2. a night across the nodes ---------------------------------------------------------
simulate_night

phase "sbatch -N3 ex2d-night.sbatch --io-nodes 1 (readers and writers on n1, a CPU worker on n2 and on n3, tcp)"
t_job=$(date +%s.%N)
job=$("${job_env[@]}" EX2D_SLURM_BACKEND=cpu EX2D_SLURM_MPS=0 EX2D_SLURM_IO_NODES=1 \
  EX2D_SLURM_WORKERS_PER_NODE=1 EX2D_SLURM_WORKER_THREADS=1 EX2D_SLURM_TRANSPORT=tcp \
  EX2D_SLURM_BIN="$bin" EX2D_SLURM_WORKDIR="$tmp/work" EX2D_SLURM_TIMEOUT=240 \
  sbatch --parsable -N3 -o "$tmp/night.out" "$src/deploy/slurm/ex2d-night.sbatch" \
  --night-dir "$tmp/data/preproc/$night" --psf "$tmp/data/calib/psf-{camera}.fits" \
  --output-root "$tmp/data/out" -- -w 6000,6100,0.8 -n 25 --psferr 0.01 --compression none)
wait_job_and_show "$t_job" "$tmp/night.out"
if ! slurmds_alive; then
  fail "a slurmd ended while job $job ran"
  show_lost_slurmds
  exit 1
fi
check "job $job on $(job_state NodeList) COMPLETED with exit code 0:0 ($(job_state JobState) $(job_state ExitCode), $job_s s)" \
  test "$(job_state JobState) $(job_state ExitCode) $(job_state NodeList)" = "COMPLETED 0:0 $node_list"
check_night_done

compare_night_with_extract

phase "where the services ran"
n1=${prefix}n1 n2=${prefix}n2 n3=${prefix}n3
logs=$(cd "$tmp/work/logs" && ls {reader,writer,worker}-*.log 2>/dev/null | sort | paste -sd' ' -)
echo "  service logs: $logs"
# Logs are ROLE-NODE-RANK (the rank in its step: the worker on n3 is the step's second task).
check "one reader and one writer on $n1, one worker on each of $n2 and $n3, nothing else" \
  test "$logs" = "reader-$n1-0.log worker-$n2-0.log worker-$n3-1.log writer-$n1-0.log"
check "the services' log lines carry their node's host name; each worker that took a frame connected over tcp with CURVE to $n1's reader, and to its writer where it sent a result; the 3 frames and results went over the sockets" \
  "$py" - "$tmp/work/logs" "$n1" <<'PY'
import glob, json, os, re, sys
logs, io_node = sys.argv[1:]
ok = True
sent = {"frames": 0, "results": 0}
for path in sorted(glob.glob(os.path.join(logs, "*-*-*.log"))):
    name = os.path.basename(path)[:-4]
    role, node = name.split("-", 1)[0], name.split("-", 1)[1].rsplit("-", 1)[0]
    hosts, msgs = set(), []
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        hosts.add(rec.get("host"))
        msgs.append(rec.get("msg", ""))
    good = hosts == {node}
    if role == "worker":
        # A worker that got a frame connected to the reader, one that sent a result to the
        # writer (an idle one may end before its discovery finds the writer).
        for peer, used in (("reader", "frame received"), ("writer", "result sent")):
            want = r"connected to %s %s-%s-0 tcp://(%s|169\.254\.78\.11):\d+ curve_key=" % (peer, peer, re.escape(io_node), re.escape(io_node))
            if any(m.startswith(used) for m in msgs):
                good = good and any(re.match(want, m) for m in msgs)
        good = good and not any(m.startswith("result sent via=shm") for m in msgs)
        sent["results"] += sum(m.startswith("result sent via=socket") for m in msgs)
    if role == "reader":
        good = good and not any(m.startswith("frame sent to worker via=shm") for m in msgs)
        sent["frames"] += sum(m.startswith("frame sent to worker via=socket") for m in msgs)
    shown = [m[:90] for m in msgs if m.startswith(("connected to", "extracted"))]
    print("  %s: host %s%s" % (name, sorted(map(str, hosts)), "".join("; " + m for m in shown)))
    ok = ok and good
print("  via=socket: %(frames)d frames (readers), %(results)d results (workers)" % sent)
sys.exit(0 if ok and sent == {"frames": 3, "results": 3} else 1)
PY
# What the fleet registered in Redis: ex2dctl status's process table in the job log (name, role, host).
registered=$(awk '$2 ~ /^(reader|writer|worker)$/ {print $1, $3}' "$tmp/night.out" | sort | paste -sd, -)
check "Redis has each service on its node's host ($registered)" test "$registered" = \
  "reader-$n1-0 $n1,worker-$n2-0 $n2,worker-$n3-0 $n3,writer-$n1-0 $n1"
check "every service drained and exited 0 (job log)" \
  eval '! grep -q "step exited with status" "$tmp/night.out" && grep -q "all 3 frame(s) done" "$tmp/night.out"'

# ---- 3. nothing left of the jobs --------------------------------------------------------
phase "leftovers"
# Processes of a finished job may still be exiting: wait for them with a deadline. What runs in
# the nodes now is the slurmds alone.
slurmd_only() {
  local p comm
  for p in $(namespace_pids) $(marked_pids); do
    comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
    [[ $comm == slurmd ]] || return 1
  done
}
wait_for 20 "the end of the jobs' processes" slurmd_only || true
left=""
for p in $(namespace_pids) $(marked_pids); do
  comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
  [[ $comm == slurmd ]] || left+=" $p($comm)"
done
check "no process of the jobs left after the job, in the nodes or outside (${left:-none})" test -z "$left"

if ((failures)); then
  echo "$prog: $failures check(s) failed"
  exit 1
fi
echo "$prog: all checks passed (night job $job_s s)"
