#!/usr/bin/env bash
# ctest fidelity_real (label fidelity): the real programs of bench/fidelity/programs and the
# database servers that replay call for call (run.sh's ci_servers), at their reduced size
# (run.sh --set ci --size ci), each recorded and replayed once (--pace gaps),
# must replay every call in order with its recorded result: compare's seq-match 100% and no
# result mismatch, record and replay exit 0 (tabulate.py --check). Timing is not judged: this
# shared machine makes it noisy. Skips (77) without root or BPF, or when a program is not
# installed (tools/debian-packages.txt), unless IOTWIN_REQUIRE_BPF=1, like the runtime tests.
#   real_test.sh BUILD_DIR FRAGMENT [SET]   SET: run.sh's --set (default ci; `programs` is every
#                                           real program and server, `servers` the servers alone)
set -euo pipefail
build="$1" fragment="$2" set="${3:-ci}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
require=${IOTWIN_REQUIRE_BPF:-0}
if [[ $(id -u) -ne 0 || ! -e /sys/kernel/btf/vmlinux ]]; then
  [[ "$require" == 1 ]] && { echo "fidelity_real: needs root and BPF" >&2; exit 1; }
  echo "fidelity_real: skipped (needs root and BPF)"; exit 77
fi
parent="$(mktemp -d "${IOTWIN_FIDELITY_WORK:-/var/tmp}/iotwin-fidelity-real.XXXXXX")"
trap 'rm -rf -- "$parent"' EXIT
rm -f "$fragment"
IOTWIN_BUILD_DIR="$build" IOTWIN_FIDELITY_WORK="$parent" \
  "$here/run.sh" --set "$set" --size ci --paces gaps --keep --out "$fragment"
cat "$fragment"
results=("$parent"/iotwin-fidelity.*/results)
[[ -d "${results[0]}" ]] || { echo "fidelity_real: run.sh left no results" >&2; exit 1; }
rc=0
python3 "$here/tabulate.py" --results "${results[0]}" --out /dev/null --paces gaps --check || rc=$?
case $rc in
  0) echo "fidelity_real: ok" ;;
  77)
    if [[ "$require" == 1 ]]; then
      echo "fidelity_real: a program is missing (IOTWIN_REQUIRE_BPF=1)" >&2; exit 1
    fi
    echo "fidelity_real: skipped (a program is missing)" ;;
  *) echo "fidelity_real: failed" >&2 ;;
esac
exit $rc
