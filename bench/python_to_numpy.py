#!/usr/bin/python3
"""Speed of the Python module's to_numpy("syscalls") (docs/python.md, "Speed").

    bench/python_to_numpy.py [--build build] [--events 10000000] [--rounds 3]
                             [--module DIR]... [TRACE]

Without TRACE, writes a synthetic trace of EVENTS events with the build's bench/synth_trace
(the mix of docs/benchmarks.md, "Analysis") into a temporary directory. Each round reads the
whole table and prints rows per wall second and per CPU second,
with the floors under it: one pass over the records (t.tables(): reading and decompressing the
chunks) and the reader (the model and the rows into typed columns a batch at a time: C++, one
thread) without the structured array; also the array's release (del). `--module DIR`
(repeatable) compares builds side by side: DIR holds an `iotwin` package (default:
BUILD/python); each round runs every module once, in turn, each in a fresh process, so that a
busy moment of the machine hits all of them.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def one_round(trace):
    """Runs in a child process whose sys.path starts with the module's directory."""
    import iotwin
    from iotwin import _native
    t = iotwin.open(trace)
    w0 = time.perf_counter()
    t.tables()  # one pass over the records: reading and decompressing the chunks, no rows
    pass_wall = time.perf_counter() - w0
    # The reader, model and row functions, the rows kept in typed columns a batch at a time
    # (the columns' memory reused: what to_numpy's reader does).
    w0 = time.perf_counter()
    reader = _native.Reader(trace, ["syscalls"], [], [], 0, 2**64 - 1, "", False)
    while reader.read(1 << 17):
        reader.clear()
    read_wall = time.perf_counter() - w0
    del reader
    w1, c1 = time.perf_counter(), time.process_time()
    a = t.to_numpy("syscalls")
    wall, cpu = time.perf_counter() - w1, time.process_time() - c1
    rows = len(a)
    w2 = time.perf_counter()
    del a
    free_wall = time.perf_counter() - w2
    print("%d rows  to_numpy wall %.2f s cpu %.2f s  %.2f M rows/s wall  %.2f M rows/cpu-s  "
          "(records pass %.2f s, reader in batches %.2f s = %.2f M rows/s, del %.2f s)" %
          (rows, wall, cpu, rows / wall / 1e6, rows / cpu / 1e6, pass_wall, read_wall,
           rows / read_wall / 1e6, free_wall))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?")
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--module", action="append", help="directory holding an iotwin package")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, args.child)
        one_round(args.trace)
        return
    modules = args.module or [os.path.join(args.build, "python")]
    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace
        if not trace:
            trace = os.path.join(tmp, "synth.iotwin")
            subprocess.run([os.path.join(args.build, "bench", "synth_trace"), trace,
                            str(args.events)], check=True, stdout=subprocess.DEVNULL)
        for i in range(args.rounds):
            for module in modules:
                load = os.getloadavg()[0]
                out = subprocess.run([sys.executable, __file__, "--child", module, trace],
                                     check=True, stdout=subprocess.PIPE, text=True).stdout
                print("round %d %s (load %.2f): %s" % (i + 1, module, load, out.strip()),
                      flush=True)


if __name__ == "__main__":
    main()
