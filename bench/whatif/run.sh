#!/usr/bin/env bash
# Replay on another device: each workload recorded on the machine's disk, run untraced on each
# device B (the truth) and replayed from the disk's recordings onto B in each pacing (the
# prediction). See whatif.py for the devices, workloads and what is measured.
#
#   bench/whatif/run.sh                # full set (a few minutes); rewrites the "Replay on another
#                                      # device" section of docs/validation.md
#   bench/whatif/run.sh --size ci      # reduced workloads; writes no doc
#   options: --runs N (default 5), --out FILE (the table as markdown), --keep (keep the work dir),
#            --devices LIST, --workloads LIST (comma-separated; see whatif.py)
# Environment: IOTWIN_BUILD_DIR (default <repo>/build). Needs root (eBPF capture, zram, loop
# devices, mounts, cgroup v1 blkio).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${IOTWIN_BUILD_DIR:-$repo/build}"
size=full args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) size="$2"; shift ;;
    --runs|--out|--devices|--workloads) args+=("$1" "$2"); shift ;;
    --keep) args+=(--keep) ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$size" in full|ci) ;; *) echo "run.sh: --size full|ci" >&2; exit 2 ;; esac
[[ -x "$build/src/cli/iotwin" ]] || { echo "run.sh: $build/src/cli/iotwin missing: build first" >&2; exit 2; }
docs=()
[[ "$size" == full ]] && docs=(--doc "$repo/docs/validation.md" --doc "$repo/bench/fidelity/validation.md.in")
exec /usr/bin/python3 "$here/whatif.py" --iotwin "$build/src/cli/iotwin" --size "$size" "${args[@]}" "${docs[@]}"
