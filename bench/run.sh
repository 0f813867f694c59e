#!/bin/sh
# All iotwin benchmarks in one command; writes docs/benchmarks.md (see bench/run.py --help).
#
#   sudo bench/run.sh                 full run (about 10-15 minutes), rewrites docs/benchmarks.md
#   sudo bench/run.sh --smoke         every piece with tiny sizes (< 60 s), writes to a temp dir
#   sudo bench/run.sh --bootstrap     first ./tools/bootstrap.sh build (install packages, build)
#
# Without --bootstrap it expects a finished build in build/ (or --build DIR): `ninja -C build`.
exec python3 "$(dirname "$0")/run.py" "$@"
