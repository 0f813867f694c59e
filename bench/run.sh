#!/bin/sh
# All iotwin benchmarks in one command; writes docs/benchmarks.md (see bench/run.py --help).
#
#   sudo bench/run.sh                 full run (about 10-15 minutes), rewrites docs/benchmarks.md
#   sudo bench/run.sh --smoke         every piece with tiny sizes (< 60 s), writes to a temp dir
#
# It expects a finished build in build/ (or --build DIR): `ninja -C build`.
# `./tools/bootstrap.sh bench [ARGS]` installs every package, builds everything and runs it.
exec python3 "$(dirname "$0")/run.py" "$@"
