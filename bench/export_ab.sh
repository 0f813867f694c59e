#!/bin/sh
# Export throughput of two iotwin binaries side by side (before/after a change to the CSV/JSONL
# writer), on one trace, tables to /dev/null as bench/run.sh measures them, the order reversed
# every round so that drift in the machine's load hits both alike. Prints each run's rows/s per
# wall second and per CPU second (user + system) on stderr and a markdown table of the medians
# (bench/export_speed.py does the work).
#
#   build/bench/synth_trace T.iotwin 10000000
#   bench/export_ab.sh T.iotwin OLD/iotwin build/src/cli/iotwin 3
#
# The export formats rows on a second thread: its wall time needs a second idle core. On a
# machine others keep busy, `chrt -f 1 bench/export_ab.sh ...` (root) gives both binaries the
# cores for the few seconds each run takes; rows per CPU-second are the load-independent figure.
set -eu
if [ $# -lt 3 ]; then
  echo "usage: bench/export_ab.sh TRACE OLD_IOTWIN NEW_IOTWIN [ROUNDS]" >&2
  exit 2
fi
exec python3 "$(dirname "$0")/export_speed.py" --trace "$1" --baseline "$2" --iotwin "$3" \
  --rounds "${4:-3}" --no-python --dir "${TMPDIR:-/tmp}"
