#!/usr/bin/env bash
# ctest fidelity_smoke: run.sh --smoke must complete, its one scenario must record and replay
# (both exit 0) every call in order with its recorded result (tabulate.py --check: seq-match
# 100%, no result mismatch, a comparison made), and its fragment must hold a table row with
# measured figures (a seq-match percentage and a verdict). The verdict itself (timing) is not
# judged: this shared machine makes it noisy.
# Skips (77) without root or BPF unless IOTWIN_REQUIRE_BPF=1, like the runtime tests.
set -euo pipefail
build="$1" fragment="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $(id -u) -ne 0 || ! -e /sys/kernel/btf/vmlinux ]]; then
  [[ "${IOTWIN_REQUIRE_BPF:-0}" == 1 ]] && { echo "fidelity_smoke: needs root and BPF" >&2; exit 1; }
  echo "fidelity_smoke: skipped (needs root and BPF)"; exit 77
fi
parent="$(mktemp -d "${IOTWIN_FIDELITY_WORK:-/var/tmp}/iotwin-fidelity-smoke.XXXXXX")"
trap 'rm -rf -- "$parent"' EXIT
rm -f "$fragment"
IOTWIN_BUILD_DIR="$build" IOTWIN_FIDELITY_WORK="$parent" \
  "$here/run.sh" --smoke --keep --out "$fragment"
cat "$fragment"
# A row: | kv-buffered | gaps | <seconds> | <orig>/<replay> | <seq-match>% | ... | pass|fail ... |
if ! grep -Eq '^\| kv-buffered \| gaps \| [0-9.]+ \| [0-9]+/[0-9]+ \| [0-9.]+% \|.*\| (pass|fail)' "$fragment"; then
  echo "fidelity_smoke: no measured kv-buffered/gaps row in $fragment" >&2
  exit 1
fi
# The row is there even when the replay exited non-zero (it may still have recorded): the
# record's and the replay's exit status and the call-for-call match are checked here.
results=("$parent"/iotwin-fidelity.*/results)
[[ -d "${results[0]}" ]] || { echo "fidelity_smoke: run.sh left no results" >&2; exit 1; }
if ! python3 "$here/tabulate.py" --results "${results[0]}" --out /dev/null --paces gaps --check; then
  echo "fidelity_smoke: the replay failed (above)" >&2
  exit 1
fi
echo "fidelity_smoke: ok"
