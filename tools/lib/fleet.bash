# What the fleet launchers (tools/ex2d-local-fleet, tools/ex2d-multihost) share: waiting for
# the services to be ready, submitting, and waiting for every submitted exposure. Source it,
# then set
#   fleet_tool   the launcher's name, for messages
#   fleet_ctl    an array: the ex2dctl command (with whatever environment it needs)
# Each function reads and writes files in the work folder it is given.
# shellcheck shell=bash disable=SC2154  # fleet_tool and fleet_ctl are the launcher's

# Every service of PIDS (lines "name pid ...", redis skipped) has logged "<role> ready" in
# LOGS/name.log; a service that exits meanwhile, or 300 s without it, ends the launcher (exit 1).
fleet_wait_ready() {  # pids-file logs-folder
  local pids=$1 logs=$2 name pid _rest deadline=$((SECONDS + 300))
  while read -r name pid _rest; do
    [ "$name" = redis ] && continue
    until grep -q "\"msg\":\"${name%-*} ready" "$logs/$name.log" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
        echo "$fleet_tool: $name did not become ready; its log:" >&2
        tail -5 "$logs/$name.log" >&2
        exit 1
      fi
      sleep 0.1
    done
  done <"$pids"
}

# ex2dctl submit SUBMIT-ARGS, its JSON answer in WORKDIR/submitted.json; prints the count.
fleet_submit() {  # workdir submit-args...
  local workdir=$1
  shift
  "${fleet_ctl[@]}" --json submit "$@" >"$workdir/submitted.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("submitted: %d frame(s) queued, %d skipped" % (d["queued"], d["skipped"]))' "$workdir/submitted.json"
}

# ex2dctl wait for every exposure of WORKDIR/submitted.json; returns 0 when each ended with
# all its frames done, else the last failing wait's status.
fleet_wait_submitted() {  # workdir timeout
  local workdir=$1 timeout=$2 expid campaign status=0
  for expid in $(python3 -c 'import json,sys; print(" ".join(sorted({j["job"].split("/")[1] for j in json.load(open(sys.argv[1]))["jobs"]})))' "$workdir/submitted.json"); do
    campaign=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["job"].split("/")[0])' "$workdir/submitted.json")
    "${fleet_ctl[@]}" wait --exposure "$expid" --campaign "$campaign" --timeout "$timeout" || status=$?
  done
  return $status
}

# CPU seconds (utime + stime) of every process of PIDS (lines "name pid ..."), as "name pid
# seconds" lines; fields after the ")" that ends the command name, so a name with spaces
# cannot shift them.
fleet_cpu_seconds() {  # pids-file
  local tck name pid _rest
  tck=$(getconf CLK_TCK)
  while read -r name pid _rest; do
    echo "$name $pid $(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk -v t="$tck" '{printf "%.2f", ($12 + $13) / t}')"
  done <"$1"
}

# WORKDIR/cpu.tsv (name, pid, CPU seconds before, after) from WORKDIR/cpu-before and
# cpu-after, WORKDIR/wall_s and WORKDIR/submitted_at: what the benchmarks read.
fleet_cpu_report() {  # workdir t0 t1
  join <(sort "$1/cpu-before") <(sort "$1/cpu-after") | awk '{print $1 "\t" $2 "\t" $3 "\t" $5}' >"$1/cpu.tsv"
  python3 -c "print('%.3f' % ($3 - $2))" >"$1/wall_s"
  echo "$2" >"$1/submitted_at"
}

# The number of frames WORKDIR/submitted.json queued.
fleet_queued() {  # workdir
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["queued"])' "$1/submitted.json"
}
