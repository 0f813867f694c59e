#!/usr/bin/env bash
# The distributed-checkpoint scenario (iotwin-workload checkpoint and an mpi4py program) recorded
# on 1, 2 and 4 ranks as that many nodes, merged, replayed with `iotwin replay --mpi` and
# compared. See checkpoint.py.
#
#   bench/multihost/run.sh               # rewrites the "Distributed checkpoint" section of
#                                        # docs/validation.md
#   options: --shard-mb N (default 16), --ranks LIST (default 1,2,4), --out FILE, --keep
# Environment: IOTWIN_BUILD_DIR (default <repo>/build). Needs root and mpirun (openmpi-bin); the
# mpi4py program needs python3-mpi4py and python3-numpy.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${IOTWIN_BUILD_DIR:-$repo/build}"
args=() docs=(--doc "$repo/docs/validation.md" --doc "$repo/bench/fidelity/validation.md.in")
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shard-mb|--ranks) args+=("$1" "$2"); shift ;;
    --out) args+=("$1" "$2"); docs=(); shift ;;
    --keep) args+=(--keep) ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$build/src/cli/iotwin" ]] || { echo "run.sh: $build/src/cli/iotwin missing: build first" >&2; exit 2; }
exec /usr/bin/python3 "$here/checkpoint.py" --iotwin "$build/src/cli/iotwin" \
  --workload "$build/workloads/iotwin-workload" "${args[@]}" "${docs[@]}"
