#!/bin/bash
# Memory-layer overhead of `iotwin record` on the mmap model load (docs/memory-layer.md).
#
# Runs `iotwin-workload model-load --mode mmap` (safetensors shards read through a shared
# mapping, one touch per page) three ways, alternating within each repetition so that background
# noise hits all three alike:
#   untraced | iotwin record --no-memory (syscall layer only) | iotwin record (syscall + memory)
# for a cold page cache (--drop-cache: every page is read from the device, faults are major) and
# a warm one (every fault is minor: the tracer's per-fault cost is most visible). Reports the
# median load time the workload measured itself (iotwin's start-up is not in it) and the ratios to
# untraced, plus the memory records per run. A benchmark, not a test: on a shared 2-core machine
# the numbers are noisy; compare ratios from the same run only.
#
#   sudo bench/capture/memory_overhead.sh [--build DIR] [--reps N] [--shards N] [--shard-mb MB]
#                                         [--threads N] [--smoke]
set -euo pipefail

BUILD=build
REPS=5
SHARDS=2
SHARD_MB=64
THREADS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --shards) SHARDS=$2; shift 2 ;;
    --shard-mb) SHARD_MB=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --smoke) REPS=1; SHARD_MB=8; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

IOTWIN=$BUILD/src/cli/iotwin
WORKLOAD=$BUILD/workloads/iotwin-workload
for b in "$IOTWIN" "$WORKLOAD"; do
  [ -x "$b" ] || { echo "missing $b (build first, or --build DIR)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (eBPF)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/iotwin-membench-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
MODEL=(model-load --dir "$WORK/model" --shards "$SHARDS" --threads "$THREADS" --mode mmap)
"$WORKLOAD" "${MODEL[@]}" --prepare-only --shard-mb "$SHARD_MB" --quiet

RESULTS=$WORK/results.jsonl
run() {  # cache variant rep
  local cache=$1 variant=$2 rep=$3 extra=()
  [ "$cache" = cold ] && extra=(--drop-cache)
  local out=$WORK/out.json trace=$WORK/t.iotwin
  case "$variant" in
    untraced) "$WORKLOAD" "${MODEL[@]}" "${extra[@]}" > "$out" ;;
    syscall) "$IOTWIN" record -o "$trace" --no-status --no-memory -- \
               "$WORKLOAD" "${MODEL[@]}" "${extra[@]}" > "$out" ;;
    memory) "$IOTWIN" record -o "$trace" --no-status -- \
              "$WORKLOAD" "${MODEL[@]}" "${extra[@]}" > "$out" ;;
  esac
  local events='{}' trace_bytes=0
  if [ "$variant" != untraced ]; then
    events=$("$IOTWIN" dump "$trace" | sed -n 's/^summary //p')
    trace_bytes=$(stat -c %s "$trace")
  fi
  python3 - "$cache" "$variant" "$rep" "$out" "$trace_bytes" "$events" >> "$RESULTS" <<'PY'
import json, sys
cache, variant, rep, out, trace_bytes, summary = sys.argv[1:7]
w = json.loads(open(out).read().strip().splitlines()[-1])
s = json.loads(summary) if summary.strip() else {}
ev = s.get("events", {})
print(json.dumps({"cache": cache, "variant": variant, "rep": int(rep), "seconds": w["seconds"],
                  "pages": w.get("pages_touched", 0), "trace_bytes": int(trace_bytes),
                  "faults": ev.get("page_fault", 0), "page_cache": ev.get("page_cache", 0),
                  "writeback": ev.get("writeback", 0), "cache_state": ev.get("cache_state", 0),
                  "lost": sum(s.get("lost", {}).values())}))
PY
}

# The order of the three variants rotates from one repetition to the next: run in a fixed order,
# whatever the machine does at a fixed position (the first cold read after the warm runs, a
# neighbour's periodic job) lands on one variant and shows up as its overhead (or as a speed-up).
VARIANTS=(untraced syscall memory)
for rep in $(seq 1 "$REPS"); do
  for cache in warm cold; do
    [ "$cache" = warm ] && "$WORKLOAD" "${MODEL[@]}" --quiet  # make it warm
    for i in 0 1 2; do run "$cache" "${VARIANTS[$(( (i + rep - 1) % 3 ))]}" "$rep"; done
  done
done

python3 - "$RESULTS" "$SHARDS" "$SHARD_MB" "$THREADS" "$REPS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shards, shard_mb, threads, reps = sys.argv[2:6]
print(f"mmap model load: {shards} shards x {shard_mb} MiB, {threads} threads, {reps} reps "
      f"(median seconds as the workload measured them; noisy shared machine)")
print()
print("| cache | variant | median s | ratio to untraced | every run (s, in rep order) | faults | page_cache | trace KiB | lost |")
print("|---|---|---:|---:|---|---:|---:|---:|---:|")
for cache in ("warm", "cold"):
    base = None
    for variant in ("untraced", "syscall", "memory"):
        r = [x for x in rows if x["cache"] == cache and x["variant"] == variant]
        med = statistics.median(x["seconds"] for x in r)
        base = med if variant == "untraced" else base
        last = r[-1]
        runs = " ".join(f"{x['seconds']:.4f}" for x in sorted(r, key=lambda x: x["rep"]))
        lost = sum(x["lost"] for x in r)
        print(f"| {cache} | {variant} | {med:.4f} | {med / base:.2f} | {runs} | {last['faults']} | "
              f"{last['page_cache']} | {last['trace_bytes'] // 1024} | {lost} (all runs) |")
pages = rows[0]["pages"]
print()
print(f"pages touched per run: {pages}")
PY
