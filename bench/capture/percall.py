#!/usr/bin/env python3
"""The CPU a capture adds to each call, measured so that a noisy shared machine cannot fool it.

Workload: tests/progs/pread_loop, 1 thread, cached 4 KiB preads at pseudo-random 4 KiB offsets
of a page-cached file (as bench/capture/breakdown.py, whose run and read-out helpers this uses).

Configurations, all in every repetition (untraced first, the others in an order rotated by one
per repetition, so that no configuration always follows the untraced run):
  untraced        the loop alone
  bpftrace-count  a bpftrace tracepoint counting the loop's system calls in a map: the floor of
                  any program on every system call (when bpftrace is installed)
  syscall         iotwin record --no-memory --no-block --no-nvme --no-sched
  default         iotwin record with every default layer
  base syscall,   the same with --baseline IOTWIN (another build, e.g. before a change)
  base default

Each repetition runs every configuration twice: once with `kernel.bpf_stats_enabled=0` (wall
clock, the loop's CPU, the consumer's CPU) and once with it set to 1 (the BPF programs' own run
time; the setting is restored at the end). Per configuration, over the repetitions, the median
and the spread [min, max] of:
  wall ratio       untraced calls/s / traced calls/s, pairing each run with the untraced run of
                   its repetition
  loop CPU +ns     the loop's CPU time per call (user + system, its own getrusage) minus the
                   median of the untraced runs': what the BPF programs, which run in the loop's
                   context, add to each call
  consumer ns      CPU time of the tracer process per call (its threads' schedstat, ns) while
                   the loop runs: iotwin's ring consumer, or bpftrace
  BPF ns/call      run_time_ns of the tracer's own BPF programs per call (bpftool, stats runs);
                   it includes bpf_stats' own clock reads, about 60 ns per program run here
                   (an empty bpftrace tracepoint program measures that floor)
  BPF ns/run       the same per program run, for the programs that run about once per call

Floors, once per repetition with the stats on: bpftrace programs on every system call that do
nothing, store a constant in a map, and store a clock read (bpf_ktime_get_ns) in a map; their
ns per run say what any program pays here and what one clock read costs (--no-floors skips).

With --fio, cached fio 4 KiB random reads (psync, --invalidate=0, 256 MiB file read into the page
cache first) untraced and under iotwin's default layers, alternated, --reps times: the IOPS ratio
traced / untraced, median and spread.

Needs root. Prints markdown on stdout; --json writes the raw numbers. --smoke: 1 repetition of
20000 calls, untraced and syscall only (seconds; checks that the script and its parsing work).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import breakdown  # noqa: E402  (run_one, bpf_prog_stats: one way of reading a run)

SYSCALL_FLAGS = ["--no-memory", "--no-block", "--no-nvme", "--no-sched"]
# What a program on every system call costs before it does anything, and what one clock read
# costs (bpf_ktime_get_ns; iotwin reads it at enter and at exit), in bpf_stats' ns per run.
FLOORS = [("empty", "tracepoint:raw_syscalls:sys_enter { }"),
          ("store", "tracepoint:raw_syscalls:sys_enter { @[cpu] = 1; }"),
          ("clock", "tracepoint:raw_syscalls:sys_enter { @[cpu] = nsecs; }")]
FIO_JOB = ["--name=cached", "--size=256M", "--rw=randread", "--bs=4k", "--ioengine=psync",
           "--invalidate=0", "--time_based", "--output-format=json"]


def stats(values):
    """(median, min, max) of the values that exist, or None."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def fmt(st, form="%.0f", suffix=""):
    if st is None:
        return "-"
    return (form + suffix + " [" + form + ", " + form + "]") % st


def set_bpf_stats(value):
    with open(breakdown.STATS_SYSCTL, "w") as f:
        f.write(value)


def bpf_per_call(rec):
    """Total BPF ns per call and, per program, (ns/call, runs/call) of one stats run."""
    progs = {}
    for key, (ns, cnt) in rec.get("bpf", {}).items():
        name = key.split("#")[0]
        t = progs.setdefault(name, [0, 0])
        t[0] += ns
        t[1] += cnt
    calls = rec["calls"]
    per = {name: (ns / calls, cnt / calls) for name, (ns, cnt) in progs.items()}
    return sum(v[0] for v in per.values()), per


def floor_run(program, loop_cmd):
    """ns per run of a bpftrace `program` on sys_enter while the loop runs (stats on)."""
    b = subprocess.Popen(["bpftrace", "-e", program], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        b.stdout.readline()  # "Attaching 1 probe...": attached
        s0 = breakdown.bpf_prog_stats(b.pid)
        subprocess.run(loop_cmd, stdout=subprocess.DEVNULL)
        s1 = breakdown.bpf_prog_stats(b.pid)
    finally:
        b.terminate()
        b.wait()
    ns = sum(v[0] for v in s1.values()) - sum(v[0] for v in s0.values())
    cnt = sum(v[1] for v in s1.values()) - sum(v[1] for v in s0.values())
    return ns / cnt if cnt else None


def fio_iops(prefix, path, runtime):
    cmd = prefix + ["/usr/bin/fio", "--filename=" + path, "--runtime=%d" % runtime] + FIO_JOB
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout
    start = out.find("{")  # iotwin record prints nothing on stdout; fio's json follows
    if p.returncode != 0 or start < 0:
        print("percall: fio failed (rc %d): %s" % (p.returncode, p.stderr.strip()[-300:]),
              file=sys.stderr)
        return None
    return json.loads(out[start:])["jobs"][0]["read"]["iops"]


def run_fio(args, iotwin, tmp):
    path = os.path.join(args.dir, "iotwin-percall-fio.dat")
    if not os.path.exists(path) or os.path.getsize(path) != 256 << 20:
        with open(path, "wb") as f:
            for _ in range(256):
                f.write(os.urandom(1 << 20))
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    trace = os.path.join(tmp, "fio.iotwin")
    ratios, base, traced = [], [], []
    for rep in range(args.reps):
        u = fio_iops([], path, args.fio_runtime)
        t = fio_iops([iotwin, "record", "-o", trace, "--no-status", "--"], path,
                     args.fio_runtime)
        if os.path.exists(trace):
            os.unlink(trace)
        if u and t:
            base.append(u)
            traced.append(t)
            ratios.append(t / u)
            print("  fio rep %d untraced %.0f IOPS default %.0f IOPS (%.2fx)" %
                  (rep, u, t, t / u), file=sys.stderr)
    return {"untraced_iops": base, "default_iops": traced, "ratio": ratios}


def measure(args, configs, loop_cmd, tmp):
    trace = os.path.join(tmp, "t.iotwin")
    runs = {name: {"plain": [], "stats": []} for name, _, _ in configs}
    old = open(breakdown.STATS_SYSCTL).read().strip()
    try:
        for rep in range(args.reps):
            traced = configs[1:]
            shift = rep % len(traced) if traced else 0
            order = configs[:1] + traced[shift:] + traced[:shift]
            for mode in ("plain", "stats"):
                set_bpf_stats("1" if mode == "stats" else "0")
                for name, binary, flags in order:
                    if mode == "stats" and flags is None:
                        continue  # nothing of the tracer's to count
                    r = breakdown.run_one(binary, loop_cmd, flags, trace, mode == "stats")
                    runs[name][mode].append(r)
                    if r:
                        bpf = " bpf %.0f ns/call" % bpf_per_call(r)[0] if mode == "stats" else ""
                        print("  rep %d %-5s %-15s %8.0f calls/s loop %5.0f ns/call consumer %s%s"
                              % (rep, mode, name, r["calls_per_s"], r["loop_cpu_ns"],
                                 "%.0f ns/call" % r["consumer_ns"]
                                 if r.get("consumer_ns") is not None else "-", bpf),
                              file=sys.stderr)
            if args.floors:
                set_bpf_stats("1")
                for name, program in FLOORS:
                    runs.setdefault("floors", {}).setdefault(name, []).append(
                        floor_run(program, loop_cmd))
    finally:
        set_bpf_stats(old)
    return runs


def report(args, configs, runs, fio, load):
    p = print
    p("Cached 4 KiB preads at random offsets, 1 thread, %d calls per run over a %d MiB file; "
      "%d repetitions, each running every configuration without and then with "
      "`kernel.bpf_stats_enabled=1`, untraced first and the others rotated; load average "
      "before %s, after %s (2 cores, shared). Median [min, max] over the repetitions." %
      (args.calls, args.file_mb, args.reps, load[0], load[1]))
    p("")
    p("| configuration | wall ratio | loop CPU ns/call | loop CPU +ns/call | "
      "consumer CPU ns/call | BPF ns/call | BPF ns/run (programs) |")
    p("|---|---|---|---|---|---|---|")
    plain_base = runs["untraced"]["plain"]
    base_cpu = statistics.median([r["loop_cpu_ns"] for r in plain_base if r] or [0])
    for name, _, flags in configs:
        plain = runs[name]["plain"]
        ratios = [b["calls_per_s"] / t["calls_per_s"]
                  for b, t in zip(plain_base, plain) if b and t]
        cpu = [r["loop_cpu_ns"] for r in plain if r]
        added = [c - base_cpu for c in cpu]
        cons = [r.get("consumer_ns") for r in plain if r]
        srs = [r for r in runs[name]["stats"] if r]
        bpf_total = [bpf_per_call(r)[0] for r in srs]
        per_prog = {}
        for r in srs:
            for prog, (ns, cnt) in bpf_per_call(r)[1].items():
                if cnt >= 0.5:
                    per_prog.setdefault(prog, []).append(ns / cnt)
        runs_col = ", ".join("`%s` %s" % (prog, fmt(stats(v)))
                             for prog, v in sorted(per_prog.items())) or "-"
        p("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, fmt(stats(ratios), "%.2f", "x") if flags is not None else "1.00x",
            fmt(stats(cpu)), fmt(stats(added), "%+.0f") if flags is not None else "-",
            fmt(stats(cons)) if flags is not None else "-",
            fmt(stats(bpf_total)) if flags is not None else "-",
            runs_col if flags is not None else "-"))
    floors = runs.get("floors")
    if floors:
        st = {name: stats(v) for name, v in floors.items()}
        clock = [c - t for c, t in zip(floors["clock"], floors["store"])
                 if c is not None and t is not None]
        p("")
        p("Floors, in the stats runs (bpftrace programs on every system call, ns per run): an "
          "empty program %s (bpf_stats' own clock reads and the tracepoint's dispatch, in every "
          "ns/run above); one storing a constant in a map %s, and the same storing "
          "`bpf_ktime_get_ns()` %s, so one clock read costs %s ns here. iotwin runs two "
          "programs per call (enter and exit), each with one clock read." % (
              fmt(st["empty"]), fmt(st["store"]), fmt(st["clock"]), fmt(stats(clock))))
    if fio:
        p("")
        p("fio 4 KiB random reads, page cache (psync, --invalidate=0, 256 MiB, %d s per run), "
          "untraced and iotwin's default layers alternated, %d repetitions: untraced %s IOPS, "
          "default %s IOPS, ratio traced / untraced %s." % (
              args.fio_runtime, args.reps, fmt(stats(fio["untraced_iops"])),
              fmt(stats(fio["default_iops"])), fmt(stats(fio["ratio"]), "%.2f", "x")))
    p("")
    p("Command: `sudo bench/capture/percall.py --calls %d --reps %d%s%s`" %
      (args.calls, args.reps, " --baseline BASE_IOTWIN" if args.baseline else "",
       " --fio" if args.fio else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iotwin", help="the iotwin binary (default: BUILD/src/cli/iotwin)")
    ap.add_argument("--baseline", metavar="IOTWIN", help="another iotwin binary, measured "
                    "alongside as 'base syscall' and 'base default'")
    ap.add_argument("--calls", type=int, default=300000, help="preads per run (300000)")
    ap.add_argument("--reps", type=int, default=11, help="repetitions (11)")
    ap.add_argument("--file-mb", type=int, default=64, help="file size in MiB (64)")
    ap.add_argument("--dir", default="/var/tmp", help="where the files go")
    ap.add_argument("--fio", action="store_true", help="also the cached fio ratio")
    ap.add_argument("--fio-runtime", type=int, default=3, help="seconds per fio run (3)")
    ap.add_argument("--no-floors", dest="floors", action="store_false",
                    help="skip the bpftrace floor programs (empty, map store, clock read)")
    ap.add_argument("--smoke", action="store_true", help="1 short repetition (a check)")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("percall: needs root")
    if args.smoke:
        args.reps, args.calls, args.fio, args.floors = 1, 20000, False, False
    args.floors = args.floors and shutil.which("bpftrace") is not None
    iotwin = args.iotwin or os.path.join(args.build, "src/cli/iotwin")
    loop = os.path.join(args.build, "tests/progs/pread_loop")
    path = breakdown.cached_data_file(args.dir, args.file_mb)
    loop_cmd = [loop, path, str(args.calls), "1"]
    configs = [("untraced", None, None)]
    if shutil.which("bpftrace") and not args.smoke:
        configs.append(("bpftrace-count", None, breakdown.BPFTRACE))
    configs.append(("syscall", iotwin, SYSCALL_FLAGS))
    if not args.smoke:
        configs.append(("default", iotwin, []))
    if args.baseline:
        configs += [("base syscall", args.baseline, SYSCALL_FLAGS),
                    ("base default", args.baseline, [])]
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    with tempfile.TemporaryDirectory(prefix="iotwin-percall-", dir=args.dir) as tmp:
        subprocess.run(loop_cmd, stdout=subprocess.DEVNULL)  # warm-up
        runs = measure(args, configs, loop_cmd, tmp)
        fio = run_fio(args, iotwin, tmp) if args.fio else None
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])
    report(args, configs, runs, fio, (load_before, load_after))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "fio": fio}, f, indent=1)
    if any(r is None for name, c in runs.items() if name != "floors"
           for mode in c.values() for r in mode):
        sys.exit(1)


if __name__ == "__main__":
    main()
