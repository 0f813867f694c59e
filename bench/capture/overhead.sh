#!/bin/sh
# Capture overhead benchmark (see overhead.py for what it measures). Usage:
#   sudo bench/capture/overhead.sh [--smoke] [--build DIR] [--reps N] [--tracers iotwin,strace,...]
exec python3 "$(dirname "$0")/overhead.py" "$@"
