#!/bin/sh
# All iotwin benchmarks in one command; writes docs/benchmarks.md (see bench/run.py --help).
#
#   sudo bench/run.sh                 full run (about 20 minutes), rewrites docs/benchmarks.md
#   sudo bench/run.sh --smoke         every piece with tiny sizes (about a minute), writes to a
#                                     temp dir (or --out FILE)
#   sudo bench/run.sh --only export --out FILE   some sections (capture, replay, analysis,
#                                     export, inprocess), markdown to FILE
#
# It expects a finished build in build/ (or --build DIR): `ninja -C build`.
# `./tools/bootstrap.sh bench [ARGS]` installs every package, builds everything and runs it.
exec python3 "$(dirname "$0")/run.py" "$@"
