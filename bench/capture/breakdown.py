#!/usr/bin/env python3
"""Where `iotwin record`'s cost per call goes, layer by layer, on one cached 4 KiB pread loop.

Workload: tests/progs/pread_loop, 1 thread, 4 KiB preads at pseudo-random 4 KiB offsets of a
page-cached file (64 MiB by default), run under `sh -c 'echo start; pread_loop ...; sleep 0.6'`
so that the capture is still attached when the loop has printed its result (the figures below are
read then).

Configurations, run alternately in each repetition (untraced first, the others in an order
rotated by one per repetition):
  untraced          the loop alone
  syscall           --no-memory --no-block --no-nvme --no-sched (syscall, process, async, intent)
  syscall+memory    --no-block --no-nvme --no-sched
  syscall+block     --no-memory --no-nvme --no-sched
  syscall+sched     --no-memory --no-block --no-nvme
  default           every default layer
  bpftrace-count    (when bpftrace is installed) a one-liner counting the loop's system calls in a
                    map: the floor of a tracepoint program on sys_enter, nothing leaves the kernel

Per configuration (medians over the repetitions):
  slowdown          untraced calls/s / traced calls/s of the same repetition
  loop CPU ns/call  the loop's own CPU time (user + system, its getrusage) per call: the BPF
                    programs run in its context, so this is what tracing adds to each call, and
                    it is steadier than elapsed time on a shared machine
  consumer ns/call  CPU time of the iotwin process (its threads' /proc/PID/task/*/schedstat, ns)
                    from the command's start (an `echo start` before the loop) until the loop
                    has printed its result, per call: the consumer, without the set-up
  ring B/call       ring_bytes_consumed of the trace's footer per call
  trace B/call      the trace file's size per call
  events/call       captured records per call, by type (footer `events`)
  lost              events lost (footer `lost`, all sources)

Then, with `kernel.bpf_stats_enabled=1` (restored afterwards) and the default layers, each BPF
program's run time and run count from `bpftool prog show` taken as the loop ends: ns per call
(run_time_ns / calls of the loop) and runs per call. The stats also count other processes'
events on the machine (the syscall programs' first check runs for every system call), and
enabling them adds a clock read per program run, so they are measured in runs of their own.

Needs root. Prints markdown on stdout; --json writes the raw numbers.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CONFIGS = [
    ("untraced", None),
    ("syscall", ["--no-memory", "--no-block", "--no-nvme", "--no-sched"]),
    ("syscall+memory", ["--no-block", "--no-nvme", "--no-sched"]),
    ("syscall+block", ["--no-memory", "--no-nvme", "--no-sched"]),
    ("syscall+sched", ["--no-memory", "--no-block", "--no-nvme"]),
    ("default", []),
]

# BPF program name prefix -> layer.
LAYERS = [("iot_sys_", "syscall"), ("iot_proc_", "process"), ("iot_uring_", "async"),
          ("iot_uprobe_", "intent"), ("iot_mem_", "memory"), ("iot_blk_", "block"),
          ("iot_nvme_", "nvme"), ("iot_sched_", "sched"), ("iot_irq_", "sched"),
          ("iot_softirq_", "sched"), ("sys_enter", "bpftrace")]

STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
BPFTRACE = ["bpftrace"]  # a configuration's flags: the bpftrace floor, not iotwin
BPFTRACE_COUNT = 'tracepoint:raw_syscalls:sys_enter /comm == "%s"/ { @calls = count(); }'
CLK_TCK = os.sysconf("SC_CLK_TCK")


def layer_of(prog):
    for prefix, layer in LAYERS:
        if prog.startswith(prefix):
            return layer
    return "other"


def proc_cpu_s(pid):
    """CPU seconds of process `pid` so far: the sum of its threads' on-CPU nanoseconds
    (/proc/PID/task/*/schedstat), else utime + stime in clock ticks (10 ms: too coarse for a run
    of a second)."""
    try:
        total = 0
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, IndexError, ValueError):
        pass
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def owned_prog_ids(pid):
    """IDs of the BPF programs process `pid` holds open (others' captures run on this machine
    too, with programs of the same names)."""
    ids = set()
    try:
        fds = os.listdir("/proc/%d/fdinfo" % pid)
    except OSError:
        return ids
    for fd in fds:
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except (OSError, ValueError):
            pass
    return ids


def bpf_prog_stats(pid):
    owned = owned_prog_ids(pid)
    p = subprocess.run(["bpftool", "prog", "show", "-j"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    try:
        progs = json.loads(p.stdout)
    except ValueError:
        return {}
    out = {}
    for prog in progs:
        name = prog.get("name", "")
        if prog.get("id") in owned and "run_cnt" in prog:
            key = "%s#%d" % (name, prog["id"])
            out[key] = (prog["run_time_ns"], prog["run_cnt"])
    return out


def footer(iotwin, trace):
    p = subprocess.run([iotwin, "dump", trace], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("summary "):
            return json.loads(line[len("summary "):])
    return {}


def run_one(iotwin, loop_cmd, flags, trace, want_bpf_stats):
    """Runs the loop (traced when flags is not None); returns a dict of measurements."""
    inner = "echo start; " + " ".join(loop_cmd) + "; sleep 0.6"
    if flags is None:
        cmd = loop_cmd
    elif flags == BPFTRACE:
        script = trace + ".sh"  # bpftrace -c splits its command at spaces, without quoting
        with open(script, "w") as f:
            f.write(inner + "\n")
        cmd = ["bpftrace", "-q", "-e", BPFTRACE_COUNT % os.path.basename(loop_cmd[0])[:15],
               "-c", "/bin/sh " + script]
    else:
        cmd = [iotwin, "record", "-o", trace, "--no-status"] + flags + ["--", "sh", "-c", inner]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = None
    cpu_at_start = None
    for line in proc.stdout:
        line = line.strip()
        if line == "start":  # the capture is set up and the command runs
            cpu_at_start = proc_cpu_s(proc.pid)
        elif line.startswith("{"):
            result = json.loads(line)
            break
    rec = {}
    if flags is not None and result:
        time.sleep(0.15)  # the consumer's last polls (10 ms apart) drain the ring
        cpu_at_end = proc_cpu_s(proc.pid)
        if cpu_at_start is not None and cpu_at_end is not None:
            rec["consumer_cpu_s"] = cpu_at_end - cpu_at_start
        if want_bpf_stats:
            rec["bpf"] = bpf_prog_stats(proc.pid)
    proc.stdout.read()
    err = proc.stderr.read()
    rc = proc.wait()
    if rc != 0 or not result:
        print("breakdown: %s failed (rc %d): %s" % (" ".join(cmd[:8]), rc, err.strip()[-300:]),
              file=sys.stderr)
        return None
    calls = result["calls"]
    rec.update({"calls": calls, "calls_per_s": result["calls_per_s"],
                "loop_cpu_ns": result["cpu_s"] * 1e9 / calls})
    if rec.get("consumer_cpu_s") is not None:
        rec["consumer_ns"] = rec["consumer_cpu_s"] * 1e9 / calls
    if flags is not None and flags != BPFTRACE:
        summary = footer(iotwin, trace)
        rec["events"] = {k: v / calls for k, v in summary.get("events", {}).items()
                         if k not in ("string", "clock", "lost")}
        rec["lost"] = sum(summary.get("lost", {}).values())
        rec["ring_bytes"] = summary.get("ring_bytes_consumed", 0) / calls
        rec["trace_bytes"] = os.path.getsize(trace) / calls
        os.unlink(trace)
    return rec


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values):
    values = [v for v in values if v is not None]
    return "%.2f-%.2f" % (min(values), max(values)) if values else "-"


def bpf_table(p, title, stats_runs):
    p("")
    p("BPF programs, %s (`kernel.bpf_stats_enabled=1`, %d runs, medians); programs that ran less "
      "than once per 1000 calls count only in their layer's total:" % (title, len(stats_runs)))
    p("")
    p("| layer | program | ns/call | runs/call | ns/run |")
    p("|---|---|---|---|---|")
    per_prog = {}
    for r in stats_runs:
        merged = {}
        for key, (ns, cnt) in r["bpf"].items():
            name = key.split("#")[0]
            t = merged.setdefault(name, [0, 0])
            t[0] += ns
            t[1] += cnt
        for name, (ns, cnt) in merged.items():
            per_prog.setdefault(name, []).append((ns / r["calls"], cnt / r["calls"]))
    layer_total = {}
    rows = []
    for name, vals in per_prog.items():
        ns = med([v[0] for v in vals])
        cnt = med([v[1] for v in vals])
        layer = layer_of(name)
        layer_total[layer] = layer_total.get(layer, 0) + ns
        if cnt >= 0.001:
            rows.append((layer, name, ns, cnt))
    for layer, name, ns, cnt in sorted(rows, key=lambda x: (x[0], -x[2])):
        p("| %s | `%s` | %.1f | %.3f | %.0f |" % (layer, name, ns, cnt, ns / cnt))
    for layer, ns in sorted(layer_total.items(), key=lambda x: -x[1]):
        p("| %s | all | %.1f | | |" % (layer, ns))
    p("| all | all | %.1f | | |" % sum(layer_total.values()))


def cached_data_file(directory, file_mb):
    """The loop's data file under `directory` (`file_mb` MiB of random bytes, made once), read
    whole so that it is in the page cache."""
    path = os.path.join(directory, "iotwin-breakdown-%dm.dat" % file_mb)
    if not os.path.exists(path) or os.path.getsize(path) != file_mb << 20:
        with open(path, "wb") as f:
            for _ in range(file_mb):
                f.write(os.urandom(1 << 20))
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 20):
            pass
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iotwin", help="the iotwin binary (default: BUILD/src/cli/iotwin)")
    ap.add_argument("--calls", type=int, default=1000000, help="preads per run (1000000)")
    ap.add_argument("--reps", type=int, default=3, help="alternated repetitions (3)")
    ap.add_argument("--threads", type=int, default=1, help="loop threads (1), each --calls")
    ap.add_argument("--file-mb", type=int, default=64, help="file size in MiB (64)")
    ap.add_argument("--dir", default="/var/tmp", help="where the file goes")
    ap.add_argument("--configs", help="comma-separated subset of " +
                    ",".join(c for c, _ in CONFIGS))
    ap.add_argument("--no-bpf-stats", action="store_true", help="skip the bpf_stats runs")
    ap.add_argument("--baseline", metavar="IOTWIN",
                    help="another iotwin binary (e.g. a build before a change): its syscall and "
                    "default configurations run alternately with the others, as 'base ...'")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("breakdown: needs root")
    iotwin = args.iotwin or os.path.join(args.build, "src/cli/iotwin")
    loop = os.path.join(args.build, "tests/progs/pread_loop")
    path = cached_data_file(args.dir, args.file_mb)
    loop_cmd = [loop, path, str(args.calls), str(args.threads)]
    wanted = args.configs.split(",") if args.configs else [c for c, _ in CONFIGS]
    configs = [(name, iotwin, flags) for name, flags in CONFIGS
               if name in wanted or name == "untraced"]
    if shutil.which("bpftrace") and (not args.configs or "bpftrace-count" in wanted):
        configs.append(("bpftrace-count", None, BPFTRACE))
    if args.baseline:
        configs += [("base " + name, args.baseline, flags) for name, flags in CONFIGS
                    if name in ("syscall", "default")]
    stats_binaries = [("default", iotwin, [])] + (
        [("base default", args.baseline, [])] if args.baseline else []) + (
        [("bpftrace-count", None, BPFTRACE)] if shutil.which("bpftrace") else [])
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]

    runs = {name: [] for name, _, _ in configs}
    stats_runs = {name: [] for name, _, _ in stats_binaries}
    with tempfile.TemporaryDirectory(prefix="iotwin-breakdown-", dir=args.dir) as tmp:
        trace = os.path.join(tmp, "t.iotwin")
        subprocess.run(loop_cmd, stdout=subprocess.DEVNULL)  # warm-up
        for rep in range(args.reps):
            # Untraced first, then the others rotated by one per repetition: the run right
            # after the untraced one is measurably slower on this machine, whichever it is.
            traced = configs[1:]
            shift = rep % len(traced) if traced else 0
            for name, binary, flags in configs[:1] + traced[shift:] + traced[:shift]:
                r = run_one(binary, loop_cmd, flags, trace, False)
                runs[name].append(r)
                if r:
                    print("  rep %d %-15s %8.0f calls/s loop %5.0f ns/call consumer %s" %
                          (rep, name, r["calls_per_s"], r["loop_cpu_ns"],
                           "%.0f ns/call" % r["consumer_ns"] if r.get("consumer_ns") is not None
                           else "-"),
                          file=sys.stderr)
        if not args.no_bpf_stats:
            with open(STATS_SYSCTL) as f:
                old = f.read().strip()
            try:
                with open(STATS_SYSCTL, "w") as f:
                    f.write("1")
                for rep in range(args.reps):
                    for name, binary, flags in stats_binaries:
                        r = run_one(binary, loop_cmd, flags, trace, True)
                        if r:
                            stats_runs[name].append(r)
            finally:
                with open(STATS_SYSCTL, "w") as f:
                    f.write(old)
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]

    p = print
    p("Cached 4 KiB preads at random offsets, %d thread%s, %d calls per thread and run over a "
      "%d MiB file, %d alternated repetitions; load average before %s, after %s (2 cores, "
      "shared). Per call: per call of all threads." %
      (args.threads, "" if args.threads == 1 else "s", args.calls, args.file_mb, args.reps,
       " ".join(load_before), " ".join(load_after)))
    p("")
    p("| layers | calls/s | slowdown (spread) | loop CPU ns/call | added ns/call | "
      "consumer CPU ns/call | ring B/call | trace B/call | events/call | lost |")
    p("|---|---|---|---|---|---|---|---|---|---|")
    base = runs["untraced"]
    lost_total = [0]
    base_cpu = med([r["loop_cpu_ns"] for r in base if r])
    for name, _, flags in configs:
        rs = runs[name]
        cps = med([r["calls_per_s"] for r in rs if r])
        ratios = [b["calls_per_s"] / t["calls_per_s"] for b, t in zip(base, rs) if b and t]
        cpu = med([r["loop_cpu_ns"] for r in rs if r])
        row = [name, "%.0f" % cps if cps else "-",
               "%.2fx (%s)" % (med(ratios), spread(ratios)) if ratios else "1.00x",
               "%.0f" % cpu if cpu else "-",
               "%+.0f" % (cpu - base_cpu) if cpu and base_cpu and flags is not None else "-"]
        if flags is None:
            row += ["-"] * 5
        elif flags == BPFTRACE:
            cons = med([r.get("consumer_ns") for r in rs if r])
            row += ["%.0f (bpftrace)" % cons if cons is not None else "-"] + ["-"] * 4
        else:
            cons = med([r.get("consumer_ns") for r in rs if r])
            ring = med([r["ring_bytes"] for r in rs if r])
            tb = med([r["trace_bytes"] for r in rs if r])
            types = sorted({k for r in rs if r for k in r["events"]})
            ev = ", ".join("%s %.3g" % (k, med([r["events"].get(k, 0) for r in rs if r]))
                           for k in types)
            lost = sum(r["lost"] for r in rs if r)
            row += ["%.0f" % cons if cons is not None else "-",
                    "%.1f" % ring if ring is not None else "-",
                    "%.2f" % tb if tb is not None else "-", ev or "-", "%d" % lost]
            lost_total[0] += lost
        p("| " + " | ".join(row) + " |")

    if lost_total[0]:
        p("")
        p("**%d events lost** in these runs." % lost_total[0])
    for stats_name, srs in stats_runs.items():
        if srs:
            bpf_table(p, stats_name, srs)
    p("")
    p("Command: `sudo bench/capture/breakdown.py --calls %d --reps %d%s%s%s%s`" %
      (args.calls, args.reps, " --threads %d" % args.threads if args.threads != 1 else "",
       " --file-mb %d" % args.file_mb if args.file_mb != 64 else "",
       " --configs " + args.configs if args.configs else "",
       " --baseline BASE_IOTWIN" if args.baseline else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "bpf_stats": stats_runs}, f, indent=1)


if __name__ == "__main__":
    main()
