#!/bin/bash
# Export throughput of two iotwin binaries side by side (before/after a change to the CSV/JSONL
# writer), on one trace, tables to /dev/null as bench/run.py measures them, alternating the order
# each round so that drift in the machine's load hits both alike. Prints rows/s per wall second
# and per CPU second (user + system) for each run.
#
#   build/bench/synth_trace T.iotwin 10000000
#   bench/export_ab.sh T.iotwin OLD/iotwin build/src/cli/iotwin 3
#
# The export formats rows on a second thread: its wall time needs a second idle core. On a
# machine others keep busy, `chrt -f 1 bench/export_ab.sh ...` (root) gives both binaries the
# cores for the few seconds each run takes; rows per CPU-second are the load-independent figure.
set -euo pipefail
trace=$1 old=$2 new=$3 rounds=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tables="syscalls proc fd_snapshots map_snapshots page_faults page_cache writeback block nvme async_io intents lost clocks cache_state subpage sched iovecs"
run() {  # label binary format
  local d=$work/$1-$3
  rm -rf "$d"
  mkdir -p "$d"
  for t in $tables; do ln -s /dev/null "$d/$t.$3"; done
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$2" export "$trace" "--$3" "$d" >/dev/null 2>&1
  python3 - "$d/trace_info.json" "$work/time" "$1" "$3" <<'PY'
import json, sys
tables = json.load(open(sys.argv[1]))["tables"]
rows = sum(v for k, v in tables.items() if k != "files")  # the files table is not a record table
wall, user, sys_s, rss = open(sys.argv[2]).read().split()
wall, cpu = float(wall), float(user) + float(sys_s)
print("%-4s %-5s rows %d wall %.2f s cpu %.2f s  %.2f M rows/s wall  %.2f M rows/cpu-s" %
      (sys.argv[3], sys.argv[4], rows, wall, cpu, rows / wall / 1e6, rows / cpu / 1e6))
PY
}
uptime
for i in $(seq 1 "$rounds"); do
  for fmt in csv jsonl; do
    if [ $((i % 2)) = 1 ]; then run old "$old" $fmt; run new "$new" $fmt; else run new "$new" $fmt; run old "$old" $fmt; fi
  done
done
uptime
