#!/usr/bin/env python3
"""Capture overhead of `iotwin record`, side by side with strace, bpftrace and perf trace.

Workloads (one process each, traced with all its threads and children):
  W1   cached 4 KiB pread loop at random offsets, 1 thread (tests/progs/pread_loop; it times
       itself)
  W1f  the same loop reading one offset (`pread_loop ... fixed`): one page, so the page-cache
       work per read is the least it can be
  W1b  W1 with 2 threads
  W1bf W1f with 2 threads
  W2   fio 4 KiB random reads, page-cached  (--invalidate=0 after a pre-read)
  W3   fio 4 KiB random reads, O_DIRECT on a file in --dir (not tmpfs)
  KV   iotwin-workload kv-offload            (LMCache-style 128 KiB chunk puts and gets)
  ML   iotwin-workload model-load --mode mmap (safetensors shards touched page by page, warm)
  VS   iotwin-workload vector-search --small --phase search --io libaio: DiskANN-style beam
       search, dependent rounds of 4 KiB O_DIRECT node reads batched per hop (the index is built
       beforehand with --phase build in --dir, which must not be tmpfs)

Tracers:
  iotwin          iotwin record (syscall layer + process + async + intent + memory + block +
                  sched, the defaults)
  iotwin-syscall  iotwin record --no-memory --no-block --no-nvme --no-sched: the syscall layer
                  (with process, async and intent records), the job of the other tools here
  strace          strace -f -tt -T (every system call with arguments, to a file)
  perf            perf trace (every system call with arguments, to a file)
  bpftrace        a one-liner printing one line per system call of the workload (enter and exit
                  joined, like the others: what a hand-rolled bpftrace capture costs)
  bpftrace-count  a one-liner counting the workload's syscalls in a map: the tracepoint floor,
                  no event leaves the kernel

The slowdown is traced time / untraced time of the same repetition (the workload's own timing,
not the tracer's start-up; for fio, untraced IOPS / traced IOPS), and each figure is the median
over the repetitions. Runs alternate (untraced, tracer 1, tracer 2, ...), so background noise hits
all alike. Lost events come from each tool's own report: iotwin's footer summary (`lost`), perf's
"LOST n events" lines, bpftrace's "Lost n events"; strace cannot lose events (ptrace stops the
tracee). Trace size: bytes per captured event of each tool's output on the same run, plus
iotwin's JSONL export (`iotwin export --jsonl`) of that very trace.

Writes a markdown section (--md) and the raw numbers (--json). Needs root.
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

BPFTRACE_PRINTF = r"""tracepoint:raw_syscalls:sys_enter /comm == "%(comm)s"/ {
  @t[tid] = nsecs; @a0[tid] = args->args[0]; @a1[tid] = args->args[1];
  @a2[tid] = args->args[2]; @a3[tid] = args->args[3];
}
tracepoint:raw_syscalls:sys_exit /@t[tid]/ {
  printf("%%d %%d %%d %%d %%d %%d %%d %%d\n", tid, args->id, @a0[tid], @a1[tid], @a2[tid], @a3[tid],
         args->ret, nsecs - @t[tid]);
  delete(@t[tid]); delete(@a0[tid]); delete(@a1[tid]); delete(@a2[tid]); delete(@a3[tid]);
}"""
BPFTRACE_COUNT = r'tracepoint:raw_syscalls:sys_enter /comm == "%(comm)s"/ { @calls = count(); }'

# iotwin footer event types that are captured events (not strings, clock anchors, loss counters).
IOTWIN_NOT_EVENTS = {"string", "clock", "lost"}


def sh(cmd, timeout=900, env=None, cwd=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, env=env, cwd=cwd, errors="replace")
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + "\ntimed out", time.monotonic() - t0


def count_lines(path):
    if not os.path.exists(path):
        return 0
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n += block.count(b"\n")
    return n


def shell_join(cmd):
    return " ".join(c if re.fullmatch(r"[\w@%+=:,./-]+", c) else "'" + c.replace("'", "'\\''") + "'"
                    for c in cmd)


def iotwin_summary(iotwin, trace):
    rc, text, _, _ = sh([iotwin, "dump", trace])
    for line in text.splitlines():
        if line.startswith("summary "):
            return json.loads(line[len("summary "):])
    return {}


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
        if self.name == "iotwin-syscall":
            return [self.iotwin, "record", "-o", out, "--no-status", "--no-memory", "--no-block",
                    "--no-nvme", "--no-sched", "--"] + cmd
        if self.name == "strace":
            return ["strace", "-f", "-qq", "-tt", "-T", "-o", out] + cmd
        if self.name == "perf":
            return ["perf", "trace", "-o", out, "--"] + cmd
        if self.name == "bpftrace":
            return ["bpftrace", "-q", "-o", out, "-c", shell_join(cmd), "-e",
                    BPFTRACE_PRINTF % {"comm": comm}]
        if self.name == "bpftrace-count":
            return ["bpftrace", "-q", "-o", out, "-c", shell_join(cmd), "-e",
                    BPFTRACE_COUNT % {"comm": comm}]
        raise ValueError(self.name)

    def stats(self, out, stderr):
        """(events, lost, bytes) of the tracer's output, None where unknown."""
        if self.name == "none":
            return None, None, None
        size = os.path.getsize(out) if os.path.exists(out) else 0
        if self.name.startswith("iotwin"):
            summary = iotwin_summary(self.iotwin, out)
            events = sum(v for k, v in summary.get("events", {}).items()
                         if k not in IOTWIN_NOT_EVENTS)
            lost = sum(summary.get("lost", {}).values())
            return events, lost, size
        if self.name == "strace":
            return count_lines(out), 0, size
        if self.name == "perf":
            lost = 0
            with open(out, errors="replace") as f:
                for line in f:
                    m = re.search(r"LOST (\d+) events", line)
                    if m:
                        lost += int(m.group(1))
            lost += sum(int(m) for m in re.findall(r"LOST (\d+) events", stderr))
            return count_lines(out), lost, size
        if self.name == "bpftrace":
            lost = sum(int(m) for m in re.findall(r"Lost (\d+) events", stderr))
            return count_lines(out), lost, size
        if self.name == "bpftrace-count":
            text = open(out, errors="replace").read() if os.path.exists(out) else ""
            m = re.search(r"@calls: (\d+)", text)
            return (int(m.group(1)) if m else None), 0, None
        raise ValueError(self.name)


class Workload:
    """A command and how to read its speed from its stdout. `time_like`: the metric is seconds
    (slowdown = traced / untraced); otherwise a rate (slowdown = untraced / traced)."""

    def __init__(self, key, title, cmd, metric, time_like, unit, prepare=None):
        self.key, self.title, self.cmd, self.metric = key, title, cmd, metric
        self.time_like, self.unit, self.prepare = time_like, unit, prepare
        self.prepare_cmd = None  # shown with the commands when the preparation is one

    def slowdown(self, traced, untraced):
        if not traced or not untraced:
            return None
        return traced / untraced if self.time_like else untraced / traced


def last_json_line(stdout):
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def pread_workload(key, title, prog, path, calls, threads, offsets):
    def metric(stdout):
        d = last_json_line(stdout)
        return d and d.get("calls_per_s")
    return Workload(key, title, [prog, path, str(calls), str(threads), offsets], metric, False,
                    "calls/s")


# The pread loops: key -> (threads, offsets).
PREAD_LOOPS = {"W1": (1, "random"), "W1f": (1, "fixed"), "W1b": (2, "random"),
               "W1bf": (2, "fixed")}


def pread_title(key):
    threads, offsets = PREAD_LOOPS[key]
    return "pread 4 KiB cached, %s, %d thread%s" % (
        "random offsets" if offsets == "random" else "one offset", threads,
        "" if threads == 1 else "s")


def vector_search_workload(workload_bin, wdir, smoke):
    """The search phase of vector-search --small over libaio, O_DIRECT; the index is built
    (--phase build, same options) by its prepare step. --small has 16 queries: the full run asks
    for more so that the search, not the process start, is what is timed."""
    base = [workload_bin, "vector-search", "--dir", os.path.join(wdir, "vector-search"),
            "--small"] + ([] if smoke else ["--queries", "512"])

    def prepare():
        os.makedirs(wdir, exist_ok=True)  # the workload makes only the last directory
        rc, _, err, _ = sh(base + ["--phase", "build", "--quiet"])
        if rc != 0:
            sys.exit("overhead: vector-search --phase build failed: " + err)
    w = Workload("VS", "vector-search --small, search phase, libaio O_DIRECT%s" %
                 ("" if smoke else " (512 queries)"),
                 base + ["--phase", "search", "--io", "libaio"], workload_seconds, True, "s",
                 prepare=prepare)
    w.prepare_cmd = base + ["--phase", "build", "--quiet"]
    return w


def fio_workload(key, title, path, size_mb, seconds, direct):
    cmd = ["/usr/bin/fio", "--name=" + key, "--filename=" + path, "--size=%dM" % size_mb,
           "--rw=randread", "--bs=4k", "--ioengine=psync", "--invalidate=0",
           "--time_based", "--runtime=%d" % seconds, "--output-format=json"]
    if direct:
        cmd.append("--direct=1")

    def metric(stdout):
        try:
            d = json.loads(stdout[stdout.index("{"):])
            return d["jobs"][0]["read"]["iops"]
        except (ValueError, KeyError, IndexError):
            return None

    def prepare():
        if not direct:  # into the page cache
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
    return Workload(key, title, cmd, metric, False, "IOPS", prepare=prepare)


def workload_seconds(stdout):
    d = last_json_line(stdout)
    return d and d.get("seconds")


def make_file(path, size_mb):
    if os.path.exists(path) and os.path.getsize(path) >= size_mb << 20:
        return
    with open(path, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size_mb):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def jsonl_size(iotwin, trace, tmp):
    """(bytes, rows) of `iotwin export --jsonl` of `trace` (tables only, not trace_info.json)."""
    out = os.path.join(tmp, "jsonl")
    shutil.rmtree(out, ignore_errors=True)
    rc, _, err, _ = sh([iotwin, "export", trace, "--jsonl", out])
    if rc != 0:
        print("overhead: export --jsonl failed: %s" % err.strip()[-300:], file=sys.stderr)
        return None, None
    size = rows = 0
    for name in os.listdir(out):
        if name.endswith(".jsonl"):
            p = os.path.join(out, name)
            size += os.path.getsize(p)
            rows += count_lines(p)
    shutil.rmtree(out, ignore_errors=True)
    return size, rows


def fmt_num(v, spec="%.0f"):
    return "-" if v is None else spec % v


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--smoke", action="store_true", help="a run of a few seconds (figures are rough)")
    ap.add_argument("--reps", type=int, help="repetitions (median); default 3, smoke 1")
    ap.add_argument("--calls", type=int, help="preads per thread; default 50000, smoke 5000")
    ap.add_argument("--fio-seconds", type=int, help="fio runtime; default 2, smoke 1")
    ap.add_argument("--tracers", help="comma-separated, of iotwin,iotwin-syscall,strace,perf,"
                    "bpftrace,bpftrace-count; default all (those installed)")
    ap.add_argument("--workloads", default="W1,W1f,W1b,W1bf,W2,W3,KV,ML,VS",
                    help="comma-separated, of W1,W1f,W1b,W1bf,W2,W3,KV,ML,VS")
    ap.add_argument("--dir", default="/var/tmp", help="where the data files go (O_DIRECT capable)")
    ap.add_argument("--json", help="also write the raw measurements here")
    ap.add_argument("--md", help="write the markdown section here (default: stdout)")
    args = ap.parse_args()
    return args


def find_tracers(iotwin, names):
    """The untraced baseline first, then the tracers asked for that are installed; and the
    names of those skipped."""
    tracers = [Tracer("none", iotwin)]
    skipped = []
    names = names or "iotwin,iotwin-syscall,strace,perf,bpftrace,bpftrace-count"
    for name in names.split(","):
        binary = name.split("-")[0]
        if name and (binary == "iotwin" or shutil.which(binary)):
            tracers.append(Tracer(name, iotwin))
        elif name:
            skipped.append(name)
            print("overhead: %s not installed, skipped" % binary, file=sys.stderr)

    return tracers, skipped


def make_workloads(args, pread_loop, workload_bin, calls, fio_s):
    """The workloads asked for (--workloads), their data files made in --dir."""
    os.makedirs(args.dir, exist_ok=True)
    size_mb = 16 if args.smoke else 256
    cached = os.path.join(args.dir, "iotwin-bench-cached.dat")
    direct = os.path.join(args.dir, "iotwin-bench-direct.dat")
    wdir = os.path.join(args.dir, "iotwin-bench-workloads")
    wanted = args.workloads.split(",")
    workloads = []
    for key in wanted:
        if key in PREAD_LOOPS or key == "W2":
            make_file(cached, size_mb)
        if key in PREAD_LOOPS:
            threads, offsets = PREAD_LOOPS[key]
            workloads.append(pread_workload(key, pread_title(key), pread_loop, cached, calls,
                                            threads, offsets))
        elif key == "W2":
            workloads.append(fio_workload("W2", "fio 4 KiB randread, page cache", cached, size_mb,
                                          fio_s, False))
        elif key == "W3":
            make_file(direct, size_mb)
            workloads.append(fio_workload("W3", "fio 4 KiB randread, O_DIRECT", direct, size_mb,
                                          fio_s, True))
        elif key == "KV":
            chunks, gets = (8, 16) if args.smoke else (64, 1024)
            workloads.append(Workload(
                "KV", "kv-offload (%d chunk puts, %d gets, 128 KiB I/O)" % (chunks, gets),
                [workload_bin, "kv-offload", "--dir", wdir, "--chunks", str(chunks),
                 "--gets", str(gets)], workload_seconds, True, "s"))
        elif key == "ML":
            shards, shard_mb = (2, 4) if args.smoke else (2, 256)
            base = [workload_bin, "model-load", "--dir", wdir, "--shards", str(shards),
                    "--shard-mb", str(shard_mb)]

            def prepare(base=base):
                rc, _, err, _ = sh(base + ["--prepare-only", "--quiet"])
                if rc != 0:
                    sys.exit("overhead: model-load --prepare-only failed: " + err)
            workloads.append(Workload(
                "ML", "model-load mmap (%d x %d MiB shards, warm)" % (shards, shard_mb),
                base + ["--mode", "mmap"], workload_seconds, True, "s", prepare=prepare))
        elif key == "VS":
            workloads.append(vector_search_workload(workload_bin, wdir, args.smoke))
        elif key:
            sys.exit("overhead: unknown workload " + key)

    return workloads


def measure(args, workloads, tracers, reps, iotwin):
    """Every workload under every tracer, alternately, `reps` times: results per (workload
    key, tracer name), and the JSONL export size of iotwin's first trace per workload."""
    results = {}  # (workload, tracer) -> list of dicts
    sizes = {}    # workload -> {"jsonl": (bytes, rows)}
    with tempfile.TemporaryDirectory(prefix="iotwin-bench-", dir=args.dir) as tmp:
        for w in workloads:
            if w.prepare:
                w.prepare()
            comm = os.path.basename(w.cmd[0])[:15]
            sh(w.cmd)  # warm-up (page cache, dynamic loader), not counted
            # Smoke: every tracer on W1, iotwin alone elsewhere (each bpftrace start costs ~2 s).
            run_tracers = [t for t in tracers
                           if not args.smoke or w.key == "W1" or t.name in ("none", "iotwin")]
            for rep in range(reps):
                for t in run_tracers:
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
                    print("  %-4s %-14s rep %d: %s %s events=%s lost=%s bytes=%s" %
                          (w.key, t.name, rep, fmt_num(value, "%.4g"), w.unit, events, lost, size),
                          file=sys.stderr)
                    if t.name == "iotwin" and rep == 0 and os.path.exists(out):
                        sizes[w.key] = jsonl_size(iotwin, out, tmp)
                    if os.path.exists(out):
                        os.unlink(out)
    return results, sizes


class Figures:
    """Medians and slowdowns of the measurements, and commands as the document shows them."""

    def __init__(self, args, results):
        self.args, self.results = args, results

    def med(self, key, tracer, field):
        vals = [r[field] for r in self.results.get((key, tracer), []) if r[field] is not None]
        return statistics.median(vals) if vals else None

    def slowdown(self, w, tracer):
        pairs = zip(self.results.get((w.key, "none"), []), self.results.get((w.key, tracer), []))
        vals = [w.slowdown(t["value"], b["value"]) for b, t in pairs]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    def rel(self, cmd):
        return shell_join([c.replace(self.args.build, "build").replace(ROOT + "/", "")
                           .replace(self.args.dir, "DIR") for c in cmd])


def overhead_markdown(args, workloads, tracers, skipped, reps, f):
    """The slowdown table, the events table and the commands."""
    lines = []
    p = lines.append
    p("Slowdown = traced time / untraced time of the same repetition (fio: untraced IOPS / traced "
      "IOPS), median of %d repetition%s, run alternately. Lost = events each tool reported "
      "lost, summed over all runs of that workload." % (reps, "" if reps == 1 else "s"))
    p("")
    head = ["workload", "untraced"] + [t.name for t in tracers[1:]]
    p("| " + " | ".join(head) + " |")
    p("|" + "---|" * len(head))
    for w in workloads:
        base = f.med(w.key, "none", "value")
        if not base:
            shown = "failed"
        elif w.time_like:
            shown = "%.3f s" % base
        else:
            shown = "{:,.0f} {}".format(base, w.unit)
        row = [w.title, shown]
        for t in tracers[1:]:
            s = f.slowdown(w, t.name)
            ran = (w.key, t.name) in f.results
            row.append("%.2fx" % s if s else ("failed" if ran else "not run"))
        p("| " + " | ".join(row) + " |")
    p("")
    p("Events captured per run (median) / events lost (all runs):")
    p("")
    head = ["workload"] + [t.name for t in tracers[1:]]
    p("| " + " | ".join(head) + " |")
    p("|" + "---|" * len(head))
    for w in workloads:
        row = [w.title]
        for t in tracers[1:]:
            ev = f.med(w.key, t.name, "events")
            lost = sum(r["lost"] or 0 for r in f.results.get((w.key, t.name), []))
            ran = (w.key, t.name) in f.results
            row.append("%s / %d" % (fmt_num(ev), lost) if ran else "not run")
        p("| " + " | ".join(row) + " |")
    p("")
    p("iotwin counts every record type it captured (syscalls, process, intent markers, page "
      "faults and page-cache events, block-layer phases, off-CPU intervals); strace, perf and "
      "bpftrace count output lines (one per system call, plus a few exit/signal lines); "
      "bpftrace-count counts system calls in the kernel. model-load touches mapped pages "
      "without system calls, so only iotwin sees its page faults.")
    if any(w.key == "VS" for w in workloads):
        p("")
        p("vector-search times its whole run, which includes work without I/O (the data set "
          "generated from the seed, product-quantisation training, the recall check against "
          "brute force): its slowdown is that of the whole program, not of its reads alone.")
    if skipped:
        p("")
        p("Not run (not installed): %s." % ", ".join(skipped))
    p("")
    p("Commands (DIR = %s, TRACE = a temporary output file):" % args.dir)
    p("")
    p("```")
    for w in workloads:
        p("# %s" % w.title)
        if w.prepare_cmd:
            p(f.rel(w.prepare_cmd) + "   # once, before the runs")
        p(f.rel(w.cmd))
    for t in tracers[1:]:
        cmd = t.wrap(["CMD..."], "TRACE", "COMM")
        p("# %s (COMM = the workload's command name, first 15 characters)" % t.name
          if t.name.startswith("bpftrace") else "# %s" % t.name)
        p(re.sub(r"\s+", " ", f.rel(cmd)))
    p("```")
    return "\n".join(lines) + "\n"



def size_markdown(workloads, tracers, results, sizes):
    """Bytes per event of each tool's output and of iotwin's JSONL export."""
    lines = []
    p = lines.append
    size_tracers = [t for t in tracers[1:] if t.name != "bpftrace-count"]
    head = ["workload"] + ["%s B/event" % t.name for t in size_tracers] + ["iotwin JSONL export B/row"]
    p("| " + " | ".join(head) + " |")
    p("|" + "---|" * len(head))
    for w in workloads:
        row = [w.title]
        for t in size_tracers:
            r = results.get((w.key, t.name), [{}])[0]
            ev, b = r.get("events"), r.get("bytes")
            row.append("%.1f" % (b / ev) if ev and b else "-")
        jb, jr = sizes.get(w.key, (None, None))
        row.append("%.1f" % (jb / jr) if jb and jr else "-")
        p("| " + " | ".join(row) + " |")
    p("")
    p("First repetition of each workload; bytes of the tool's output file / events it "
      "captured (the events table above). iotwin: the compressed .iotwin file (zstd level 1, "
      "strings and clock anchors included). strace: `-f -tt -T` text. JSONL: `iotwin export "
      "TRACE --jsonl DIR` of that same trace, bytes of all `DIR/*.jsonl` / their rows.")
    return "\n".join(lines) + "\n"



def main():
    args = parse_args()
    reps = args.reps or (1 if args.smoke else 3)
    calls = args.calls or (5000 if args.smoke else 50000)
    fio_s = args.fio_seconds or (1 if args.smoke else 2)
    iotwin = os.path.join(args.build, "src/cli/iotwin")
    pread_loop = os.path.join(args.build, "tests/progs/pread_loop")
    workload_bin = os.path.join(args.build, "workloads/iotwin-workload")
    for p in (iotwin, pread_loop, workload_bin):
        if not os.access(p, os.X_OK):
            sys.exit("overhead: %s is missing: build first (ninja -C %s)" % (p, args.build))
    if os.geteuid() != 0:
        sys.exit("overhead: needs root (iotwin record, bpftrace and perf trace load eBPF)")
    if not os.path.ismount("/sys/kernel/tracing") and os.path.isdir("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"])

    tracers, skipped = find_tracers(iotwin, args.tracers)
    workloads = make_workloads(args, pread_loop, workload_bin, calls, fio_s)
    results, sizes = measure(args, workloads, tracers, reps, iotwin)
    figures = Figures(args, results)
    overhead_md = overhead_markdown(args, workloads, tracers, skipped, reps, figures)
    size_md = size_markdown(workloads, tracers, results, sizes)
    rel = figures.rel

    if args.md:
        with open(args.md, "w") as f:
            f.write(overhead_md)
        with open(os.path.splitext(args.md)[0] + "-size.md", "w") as f:
            f.write(size_md)
    else:
        print(overhead_md)
        print(size_md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": {"%s/%s" % k: v for k, v in results.items()},
                       "workloads": {w.key: {"title": w.title, "time_like": w.time_like,
                                             "unit": w.unit, "cmd": rel(w.cmd)}
                                     for w in workloads},
                       "jsonl": sizes, "skipped": skipped}, f, indent=1)


if __name__ == "__main__":
    main()
