#!/usr/bin/env bash
# Ground truth: iotwin's figures against sources iotwin does not compute (/proc/diskstats of a
# loop device the workload has to itself, /proc/PID/io, fio's JSON, strace -c, fincore, the ELF
# headers of execve's own reads), one table figure | program | iotwin | source | difference |
# tolerance | verdict. See truth.py for what each figure is compared with.
#
#   bench/truth/run.sh                 # full set (about a minute); rewrites the "Figures against
#                                      # ground truth" section of docs/validation.md
#   bench/truth/run.sh --size ci       # the reduced set ctest -L truth runs; writes no doc
#   options: --out FILE (the table as markdown), --keep (keep the work dir)
# Environment: IOTWIN_BUILD_DIR (default <repo>/build), IOTWIN_TRUTH_WORK (parent of the work
# dir; default /var/tmp). Needs root (eBPF capture, loop device, mount). Exit 0 when every
# figure is within tolerance or listed in truth.py's EXPECTED_TO_FAIL, 1 when one is out of it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${IOTWIN_BUILD_DIR:-$repo/build}"
size=full out="" keep=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) size="$2"; shift ;;
    --out) out="$2"; shift ;;
    --keep) keep=(--keep) ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
case "$size" in full|ci) ;; *) echo "run.sh: --size full|ci" >&2; exit 2 ;; esac
[[ -x "$build/src/cli/iotwin" ]] || { echo "run.sh: $build/src/cli/iotwin missing: build first" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "run.sh: needs root (eBPF capture, loop device)" >&2; exit 2; }
args=(--iotwin "$build/src/cli/iotwin" --size "$size" "${keep[@]}")
[[ -n "$out" ]] && args+=(--out "$out")
# Only the full set rewrites the document (and the fidelity template it is generated from, so
# that bench/fidelity/run.sh keeps the section).
if [[ "$size" == full ]]; then
  args+=(--doc "$repo/docs/validation.md" --doc "$repo/bench/fidelity/validation.md.in")
fi
exec /usr/bin/python3 "$here/truth.py" "${args[@]}"
