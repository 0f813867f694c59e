#!/usr/bin/env bash
# ctest fidelity_smoke: run.sh --smoke must complete and its fragment must hold a table row with
# measured figures (a seq-match percentage and a verdict) for the one scenario it replays.
# Skips (77) without root or BPF unless IOTWIN_REQUIRE_BPF=1, like the runtime tests.
set -euo pipefail
build="$1" fragment="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $(id -u) -ne 0 || ! -e /sys/kernel/btf/vmlinux ]]; then
  [[ "${IOTWIN_REQUIRE_BPF:-0}" == 1 ]] && { echo "fidelity_smoke: needs root and BPF" >&2; exit 1; }
  echo "fidelity_smoke: skipped (needs root and BPF)"; exit 77
fi
rm -f "$fragment"
IOTWIN_BUILD_DIR="$build" "$here/run.sh" --smoke --out "$fragment"
cat "$fragment"
# A row: | kv-buffered | gaps | <seconds> | <orig>/<replay> | <seq-match>% | ... | pass|fail ... |
if ! grep -Eq '^\| kv-buffered \| gaps \| [0-9.]+ \| [0-9]+/[0-9]+ \| [0-9.]+% \|.*\| (pass|fail)' "$fragment"; then
  echo "fidelity_smoke: no measured kv-buffered/gaps row in $fragment" >&2
  exit 1
fi
echo "fidelity_smoke: ok"
