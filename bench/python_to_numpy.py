#!/usr/bin/python3
"""Speed of the Python module's to_numpy("syscalls") (docs/python.md, "Speed").

    bench/python_to_numpy.py [--build build] [--events 10000000] [--rounds 3] [TRACE]

Without TRACE, writes a synthetic trace of EVENTS events with the build's bench/synth_trace
(the mix of docs/benchmarks.md, "Analysis") into a temporary directory. Each round reads the
whole table and prints rows per wall second and per CPU second, and how the time splits
between the reader (the trace, the model, the rows into typed columns: C++, one thread) and
the structured array built from its columns.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import iotwin
    from iotwin import _native

    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace
        if not trace:
            trace = os.path.join(tmp, "synth.iotwin")
            subprocess.run([os.path.join(args.build, "bench", "synth_trace"), trace,
                            str(args.events)], check=True, stdout=subprocess.DEVNULL)
        print("uptime:", os.popen("uptime").read().strip())
        t = iotwin.open(trace)
        for i in range(args.rounds):
            w0, c0 = time.perf_counter(), time.process_time()
            reader = _native.Reader(trace, ["syscalls"], [], [], 0, 2**64 - 1, "", False)
            reader.read(0)
            read_wall = time.perf_counter() - w0
            del reader
            w1, c1 = time.perf_counter(), time.process_time()
            a = t.to_numpy("syscalls")
            wall, cpu = time.perf_counter() - w1, time.process_time() - c1
            print("round %d: %d rows  to_numpy wall %.2f s cpu %.2f s  %.2f M rows/s wall  "
                  "%.2f M rows/cpu-s  (reader alone %.2f s, %.2f M rows/s)" %
                  (i + 1, len(a), wall, cpu, len(a) / wall / 1e6, len(a) / cpu / 1e6,
                   read_wall, len(a) / read_wall / 1e6))
            del a


if __name__ == "__main__":
    main()
