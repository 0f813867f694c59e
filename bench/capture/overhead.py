#!/usr/bin/env python3
"""Capture overhead of `iotwin record`, side by side with strace, bpftrace and perf trace.

Workloads (one process each, traced with all its threads and children):
  W1  cached 4 KiB pread loop, 1 thread     (tests/progs/pread_loop; slowdown = untraced/traced calls/s)
  W1b the same with 2 threads
  W2  fio 4 KiB random reads, page-cached   (--invalidate=0 after a pre-read; IOPS ratio traced/untraced)
  W3  fio 4 KiB random reads, O_DIRECT      (IOPS ratio)

Every tracer records every system call of the workload with its arguments and result, to a
file, as iotwin does (strace -f; perf trace; a bpftrace one-liner joining raw_syscalls enter and
exit and printing one line per call). Runs alternate (untraced, tracer 1, tracer 2, ...) and
each figure is the median over the repetitions. Prints a markdown table; --json keeps the raw
numbers. Needs root. The figures are only as quiet as the machine: on a shared 2-core VM expect
+-10 % between runs.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

BPFTRACE_PROG = r"""
tracepoint:raw_syscalls:sys_enter /comm == "%(comm)s"/ {
  @t[tid] = nsecs; @a0[tid] = args->args[0]; @a1[tid] = args->args[1];
  @a2[tid] = args->args[2]; @a3[tid] = args->args[3];
}
tracepoint:raw_syscalls:sys_exit /@t[tid]/ {
  printf("%%d %%d %%d %%d %%d %%d %%d %%d\n", tid, args->id, @a0[tid], @a1[tid], @a2[tid], @a3[tid],
         args->ret, nsecs - @t[tid]);
  delete(@t[tid]); delete(@a0[tid]); delete(@a1[tid]); delete(@a2[tid]); delete(@a3[tid]);
}
"""


def sh(cmd, timeout=900, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def count_lines(path):
    if not os.path.exists(path):
        return 0
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


class Tracer:
    """Wraps a workload command; after the run, reports events, losses and output bytes."""

    def __init__(self, name, iotwin):
        self.name = name
        self.iotwin = iotwin

    def wrap(self, cmd, out, comm):
        if self.name == "none":
            return cmd
        if self.name == "iotwin":
            return [self.iotwin, "record", "-o", out, "--no-status", "--"] + cmd
        if self.name == "strace":
            return ["strace", "-f", "-qq", "-o", out] + cmd
        if self.name == "perf":
            return ["perf", "trace", "-o", out, "--"] + cmd
        if self.name == "bpftrace":
            return ["bpftrace", "-q", "-o", out, "-c", " ".join(cmd), "-e",
                    BPFTRACE_PROG % {"comm": comm}]
        raise ValueError(self.name)

    def stats(self, out, stderr):
        """(events, lost, bytes) of the tracer's output, None where unknown."""
        if self.name == "none":
            return None, None, None
        size = os.path.getsize(out) if os.path.exists(out) else 0
        if self.name == "iotwin":
            rc, text, _, _ = sh([self.iotwin, "dump", out])
            summary = {}
            for line in text.splitlines():
                if line.startswith("summary "):
                    summary = json.loads(line[len("summary "):])
            events = sum(v for k, v in summary.get("events", {}).items()
                         if k in ("syscall", "async_io", "proc", "intent"))
            lost = sum(summary.get("lost", {}).values())
            return events, lost, size
        if self.name == "strace":
            return count_lines(out), 0, size
        if self.name == "perf":
            lines = count_lines(out)
            lost = 0
            with open(out, errors="replace") as f:
                for line in f:
                    m = re.search(r"LOST (\d+) events", line)
                    if m:
                        lost += int(m.group(1))
            return lines, lost, size
        if self.name == "bpftrace":
            lost = sum(int(m) for m in re.findall(r"Lost (\d+) events", stderr))
            return count_lines(out), lost, size
        raise ValueError(self.name)


class Workload:
    def __init__(self, key, title, cmd, metric, higher_is_better=True, prepare=None):
        self.key, self.title, self.cmd, self.metric = key, title, cmd, metric
        self.prepare = prepare

    @staticmethod
    def pread(key, title, prog, path, calls, threads):
        def metric(stdout):
            for line in stdout.splitlines():
                if line.startswith("{"):
                    d = json.loads(line)
                    return d["calls_per_s"]
            return None
        return Workload(key, title, [prog, path, str(calls), str(threads)], metric)

    @staticmethod
    def fio(key, title, path, size_mb, seconds, direct):
        cmd = ["/usr/bin/fio", "--name=" + key, "--filename=" + path, "--size=%dM" % size_mb,
               "--rw=randread", "--bs=4k", "--ioengine=psync", "--invalidate=0",
               "--time_based", "--runtime=%d" % seconds, "--output-format=json"]
        if direct:
            cmd.append("--direct=1")

        def metric(stdout):
            try:
                start = stdout.index("{")
                d = json.loads(stdout[start:])
                return d["jobs"][0]["read"]["iops"]
            except (ValueError, KeyError, IndexError):
                return None

        def prepare():
            if not direct:  # into the page cache
                with open(path, "rb") as f:
                    while f.read(1 << 20):
                        pass
        return Workload(key, title, cmd, metric, prepare=prepare)


def make_file(path, size_mb):
    if os.path.exists(path) and os.path.getsize(path) >= size_mb << 20:
        return
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size_mb):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--smoke", action="store_true", help="a run of a few seconds (figures are rough)")
    ap.add_argument("--reps", type=int, help="repetitions (median); default 3, smoke 1")
    ap.add_argument("--calls", type=int, help="preads per thread; default 1000000, smoke 20000")
    ap.add_argument("--fio-seconds", type=int, help="fio runtime; default 5, smoke 1")
    ap.add_argument("--tracers",
                    help="comma-separated, of iotwin,strace,bpftrace,perf; default all, smoke iotwin")
    ap.add_argument("--workloads", default="W1,W1b,W2,W3", help="comma-separated, of W1,W1b,W2,W3")
    ap.add_argument("--dir", default="/var/tmp", help="where the data files go (O_DIRECT capable)")
    ap.add_argument("--json", help="also write the raw measurements here")
    args = ap.parse_args()

    reps = args.reps or (1 if args.smoke else 3)
    calls = args.calls or (20000 if args.smoke else 1000000)
    fio_s = args.fio_seconds or (1 if args.smoke else 5)
    iotwin = os.path.join(args.build, "src/cli/iotwin")
    pread_loop = os.path.join(args.build, "tests/progs/pread_loop")
    for p in (iotwin, pread_loop):
        if not os.access(p, os.X_OK):
            sys.exit("overhead: %s is missing: build first (ninja -C %s)" % (p, args.build))
    if os.geteuid() != 0:
        sys.exit("overhead: needs root (iotwin record, bpftrace and perf trace load eBPF)")
    if not os.path.ismount("/sys/kernel/tracing") and os.path.isdir("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])

    tracers = [Tracer("none", iotwin)]
    names = args.tracers or ("iotwin" if args.smoke else "iotwin,strace,bpftrace,perf")
    for name in names.split(","):
        if name and (name == "iotwin" or shutil.which(name)):
            tracers.append(Tracer(name, iotwin))
        elif name:
            print("overhead: %s not installed, skipped" % name, file=sys.stderr)

    os.makedirs(args.dir, exist_ok=True)
    cached = os.path.join(args.dir, "iotwin-bench-cached.dat")
    direct = os.path.join(args.dir, "iotwin-bench-direct.dat")
    size_mb = 64 if args.smoke else 256
    make_file(cached, size_mb)
    wanted = set(args.workloads.split(","))
    workloads = []
    if "W1" in wanted:
        workloads.append(Workload.pread("W1", "W1 pread 1 thread", pread_loop, cached, calls, 1))
    if "W1b" in wanted:
        workloads.append(Workload.pread("W1b", "W1 pread 2 threads", pread_loop, cached, calls, 2))
    if "W2" in wanted:
        workloads.append(Workload.fio("W2", "W2 fio cached", cached, size_mb, fio_s, False))
    if "W3" in wanted:
        make_file(direct, size_mb)
        workloads.append(Workload.fio("W3", "W3 fio O_DIRECT", direct, size_mb, fio_s, True))

    results = {}  # (workload, tracer) -> list of dicts
    with tempfile.TemporaryDirectory(prefix="iotwin-bench-") as tmp:
        for w in workloads:
            if w.prepare:
                w.prepare()
            comm = os.path.basename(w.cmd[0])[:15]
            for rep in range(reps):
                for t in tracers:
                    out = os.path.join(tmp, "%s-%s-%d.out" % (w.key, t.name, rep))
                    rc, stdout, stderr, wall = sh(t.wrap(w.cmd, out, comm))
                    value = w.metric(stdout)
                    events, lost, size = t.stats(out, stderr)
                    if rc != 0 or value is None:
                        print("overhead: %s under %s failed (rc %d): %s" %
                              (w.key, t.name, rc, stderr.strip()[-300:]), file=sys.stderr)
                    results.setdefault((w.key, t.name), []).append(
                        {"value": value, "wall_s": wall, "events": events, "lost": lost,
                         "bytes": size, "rc": rc})
                    print("  %-4s %-9s rep %d: %s %s events=%s lost=%s bytes=%s" %
                          (w.key, t.name, rep, "%.0f" % value if value else "-",
                           "calls/s" if w.key.startswith("W1") else "IOPS", events, lost, size),
                          file=sys.stderr)
                    if os.path.exists(out):
                        os.unlink(out)

    def med(key, tracer, field):
        vals = [r[field] for r in results.get((key, tracer), []) if r[field] is not None]
        return statistics.median(vals) if vals else None

    print()
    print("Capture overhead (%s, %d rep%s, medians; %s)" %
          ("smoke" if args.smoke else "full", reps, "" if reps == 1 else "s",
           os.uname().release))
    print()
    head = ["tracer"]
    for w in workloads:
        head.append(w.title + (" slowdown" if w.key.startswith("W1") else " IOPS ratio"))
    head += ["events (W1)", "lost (all)", "bytes/event (W1)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    base = {w.key: med(w.key, "none", "value") for w in workloads}
    row = ["untraced"]
    for w in workloads:
        v = base[w.key]
        row.append(("%.0f calls/s" if w.key.startswith("W1") else "%.0f IOPS") % v if v else "-")
    print("| " + " | ".join(row + ["-", "-", "-"]) + " |")
    for t in tracers[1:]:
        row = [t.name]
        for w in workloads:
            v, b = med(w.key, t.name, "value"), base[w.key]
            if not v or not b:
                row.append("-")
            elif w.key.startswith("W1"):
                row.append("%.2fx" % (b / v))
            else:
                row.append("%.2f" % (v / b))
        ev = med("W1", t.name, "events")
        lost = sum(r["lost"] or 0 for (k, n), rs in results.items() if n == t.name for r in rs)
        size = med("W1", t.name, "bytes")
        row.append("%d" % ev if ev else "-")
        row.append("%d" % lost)
        row.append("%.1f" % (size / ev) if ev and size else "-")
        print("| " + " | ".join(row) + " |")
    if "W1b" in base and base.get("W1b"):
        v = med("W1b", "iotwin", "value")
        if v:
            print()
            print("iotwin captured %.0f calls/s on W1b (2 threads) with %s lost." %
                  (v, sum(r["lost"] or 0 for r in results.get(("W1b", "iotwin"), []))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"%s/%s" % k: v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
