#!/usr/bin/env python3
"""Export speed: `iotwin export --csv` and `--jsonl` rows per second on a synthetic trace, and the
Python module's to_numpy("syscalls") rows per second (bench/python_to_numpy.py).

  bench/export_speed.py [--build DIR] [--dir DIR] [--events N] [--rounds R] [--smoke]
                        [--numpy-events N] [--numpy-rounds R] [--trace T] [--iotwin BIN]
                        [--baseline BIN] [--no-python] [--md FILE] [--json FILE]

The trace is written by the build's bench/synth_trace (the training-like mix of
docs/benchmarks.md, "Analysis"; 50 million events by default) unless --trace names one. Every
table goes to /dev/null (a symlink in the export directory; trace_info.json is written for real
and gives the row counts): this measures the exporter, not the disk. The export formats rows on
a second thread, so its wall time needs a second free core; rows per CPU-second (user + system)
are the load-independent figure. The formats (and, with --baseline, the two binaries) run
alternately, the order reversed every round, so that drift in the machine's load hits all alike;
figures are medians over the rounds.

to_numpy("syscalls") runs on a trace of its own (10 million events; --numpy-events) through
bench/python_to_numpy.py, with the build's Python module (build/python).

Writes a markdown section (--md, default stdout) and the raw numbers (--json).
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
ROOT = os.path.dirname(HERE)

# Every table `iotwin export` may write (the files table is written for real: it is small and not
# a record table).
TABLES = ("syscalls", "proc", "fd_snapshots", "map_snapshots", "page_faults", "page_cache",
          "writeback", "block", "nvme", "async_io", "intents", "lost", "clocks", "cache_state",
          "subpage", "sched", "iovecs")
TARGET_ROWS_PER_S = 5e6
NUMPY_TARGET_ROWS_PER_S = 10e6


def log(msg):
    print("export_speed: " + msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timed(cmd):
    """Runs cmd under /usr/bin/time: (rc, wall s, user+sys s, peak RSS KiB, stderr tail)."""
    with tempfile.NamedTemporaryFile("r", prefix="iotwin-export-time-") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", t.name] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           errors="replace")
        fields = t.read().split()
    if p.returncode != 0 or len(fields) < 4:
        return p.returncode or 1, None, None, None, p.stderr[-500:]
    wall, user, system, rss = fields[-4:]
    return 0, float(wall), float(user) + float(system), int(rss), ""


def export_once(iotwin, trace, fmt, out_dir):
    """One export of every table to /dev/null; a dict of its measurements."""
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    for table in TABLES:
        os.symlink("/dev/null", os.path.join(out_dir, "%s.%s" % (table, fmt)))
    cmd = [iotwin, "export", trace, "--" + fmt, out_dir]
    rc, wall, cpu, rss, err = timed(cmd)
    if rc != 0:
        raise RuntimeError("%s failed (rc %d): %s" % (" ".join(cmd), rc, err))
    with open(os.path.join(out_dir, "trace_info.json")) as f:
        tables = json.load(f).get("tables", {})
    rows = sum(v for k, v in tables.items() if k != "files")
    return {"rows": rows, "wall_s": wall, "cpu_s": cpu, "rss_kib": rss,
            "rows_per_s": rows / wall if wall else None,
            "rows_per_cpu_s": rows / cpu if cpu else None}


def synth(build, path, events):
    rc = subprocess.run([os.path.join(build, "bench/synth_trace"), path, str(events)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if rc.returncode != 0:
        raise RuntimeError("synth_trace failed: " + rc.stderr[-500:])


def measure_exports(binaries, trace, rounds, scratch):
    """{(label, fmt): [run, ...]} over `rounds` alternated rounds."""
    order = [(label, binary, fmt) for fmt in ("csv", "jsonl") for label, binary in binaries]
    runs = {}
    for rnd in range(rounds):
        for label, binary, fmt in (order if rnd % 2 == 0 else order[::-1]):
            r = export_once(binary, trace, fmt, os.path.join(scratch, "%s-%s" % (label, fmt)))
            runs.setdefault((label, fmt), []).append(r)
            log("round %d %s %s: %d rows, %.2f s wall, %.2f CPU-s, %.2f M rows/s, %.2f M "
                "rows/CPU-s" % (rnd + 1, label, fmt, r["rows"], r["wall_s"], r["cpu_s"],
                                r["rows_per_s"] / 1e6, r["rows_per_cpu_s"] / 1e6))
    return runs


# A round's line: "round N[ MODULE (load L)]: ROWS rows  to_numpy wall W s cpu C s ...".
ROUND_RE = re.compile(r"^round \d+\b.*?(?:^|\s)(\d+) rows\b.*?\bwall ([\d.]+) s cpu ([\d.]+) s")


def measure_numpy(build, trace, rounds):
    """Runs bench/python_to_numpy.py on `trace`; a dict with its rounds, or with the reason it
    did not run."""
    script = os.path.join(HERE, "python_to_numpy.py")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    cmd = [python, script, "--build", build, "--rounds", str(rounds), trace]
    if not os.path.isdir(os.path.join(build, "python", "iotwin")):
        return {"cmd": cmd, "error": "the Python module is not built (build/python/iotwin)"}
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace")
    runs = []
    for line in p.stdout.splitlines():
        m = ROUND_RE.match(line.strip())
        if m:
            rows, wall, cpu = int(m.group(1)), float(m.group(2)), float(m.group(3))
            runs.append({"rows": rows, "wall_s": wall, "cpu_s": cpu,
                         "rows_per_s": rows / wall if wall else None,
                         "rows_per_cpu_s": rows / cpu if cpu else None})
            log("to_numpy: %s" % line.strip())
    if p.returncode != 0 or not runs:
        return {"cmd": cmd, "error": "rc %d: %s" % (p.returncode,
                                                    (p.stderr or p.stdout).strip()[-400:])}
    return {"cmd": cmd, "runs": runs}


def med(runs, field):
    vals = [r[field] for r in runs if r.get(field) is not None]
    return statistics.median(vals) if vals else None


def verdict(rate, target):
    return "met" if rate is not None and rate >= target else "**missed**"


def render(res, rel):
    lines = []
    p = lines.append
    n = res["events"]
    trace = ("%s events (%.0f MiB) written by `bench/synth_trace` in %.1f s" % (
        format(n, ","), res["bytes"] / 2**20, res["gen_s"]) if n else
        "%.0f MiB, given with --trace" % (res["bytes"] / 2**20))
    if n and res.get("reduced"):
        trace += " (%s M events, not 50 M: %s)" % (format(n // 10**6, ","), res["reduced"])
    p("Trace: %s. Every table goes to /dev/null (trace_info.json, written for real, gives the "
      "rows; the files table is not counted): the exporter's cost, not the disk's. %d "
      "alternated round%s, medians%s; load average (1, 5, 15 min) %s before, %s after (2 cores, "
      "shared)." % (trace, res["rounds"], "" if res["rounds"] == 1 else "s",
                    " (to_numpy: %d round%s)" % (res["numpy_rounds"], "" if res["numpy_rounds"] == 1
                                                   else "s") if res.get("numpy_rounds")
                    else "", res["load_before"], res["load_after"]))
    p("")
    p("| what | rows | wall s | M rows/s (wall) | M rows per CPU-second | peak RSS | target "
      ">= %.0f M rows/s |" % (TARGET_ROWS_PER_S / 1e6))
    p("|---|---|---|---|---|---|---|")
    verdicts = []
    for key, runs in res["exports"].items():
        label, fmt = key.split("/")
        rate, cpu_rate = med(runs, "rows_per_s"), med(runs, "rows_per_cpu_s")
        name = "`export --%s`%s" % (fmt, "" if label == "iotwin" else " (%s)" % label)
        v = verdict(rate, TARGET_ROWS_PER_S)
        p("| %s | %s | %.2f | %.2f | %.2f | %.0f MiB | %s |" % (
            name, format(runs[0]["rows"], ","), med(runs, "wall_s"), rate / 1e6,
            cpu_rate / 1e6, med(runs, "rss_kib") / 1024, v))
        if label == "iotwin":
            verdicts.append("%s %s (%.2f M rows/s, %.2f M per CPU-second)" % (
                fmt.upper(), v, rate / 1e6, cpu_rate / 1e6))
    np_res = res.get("numpy")
    if np_res and np_res.get("runs"):
        runs = np_res["runs"]
        rate = med(runs, "rows_per_s")
        v = verdict(rate, NUMPY_TARGET_ROWS_PER_S)
        p("| Python `to_numpy(\"syscalls\")`, %s-event trace | %s | %.2f | %.2f | %.2f | - | "
          "%s (target >= %.0f M) |" % (
              format(res["numpy_events"], ","), format(runs[0]["rows"], ","),
              med(runs, "wall_s"), rate / 1e6, med(runs, "rows_per_cpu_s") / 1e6, v,
              NUMPY_TARGET_ROWS_PER_S / 1e6))
        verdicts.append("to_numpy(\"syscalls\") %s (%.2f M rows/s against %.0f M)" % (
            v, rate / 1e6, NUMPY_TARGET_ROWS_PER_S / 1e6))
    elif np_res:
        p("| Python `to_numpy(\"syscalls\")` | - | - | - | - | - | not measured |")
        verdicts.append("to_numpy(\"syscalls\") not measured: %s" % np_res["error"])
    p("")
    p("Targets: CSV and JSONL export >= %.0f M rows per wall second on this trace; Python "
      "`to_numpy(\"syscalls\")` of a 10 M-event trace >= %.0f M rows/s. %s." % (
          TARGET_ROWS_PER_S / 1e6, NUMPY_TARGET_ROWS_PER_S / 1e6, "; ".join(verdicts)))
    p("")
    p("```")
    if n:
        p("build/bench/synth_trace DIR/synth.iotwin %d" % n)
    p("mkdir DIR/csv; for t in %s; do ln -s /dev/null DIR/csv/$t.csv; done" % " ".join(TABLES))
    p("/usr/bin/time -v build/src/cli/iotwin export DIR/synth.iotwin --csv DIR/csv")
    p("# the same with jsonl; side by side with another build: "
      "bench/export_ab.sh DIR/synth.iotwin OLD/iotwin build/src/cli/iotwin 3")
    if np_res:
        if res.get("numpy_trace_own"):
            p("build/bench/synth_trace DIR/synth-numpy.iotwin %d" % res["numpy_events"])
        p(rel(" ".join(np_res["cmd"])))
    p("```")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dir", default="/var/tmp", help="scratch directory (the trace goes here)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round")
    ap.add_argument("--events", type=int, help="events of the export trace (50000000; smoke "
                    "200000)")
    ap.add_argument("--numpy-events", type=int, help="events of the to_numpy trace (10000000; "
                    "smoke 200000)")
    ap.add_argument("--rounds", type=int, help="alternated export rounds (2; smoke 1)")
    ap.add_argument("--numpy-rounds", type=int, help="to_numpy rounds (3; smoke 1)")
    ap.add_argument("--reduced", help="why --events is below 50 M (said in the markdown)")
    ap.add_argument("--trace", help="export this trace instead of writing one")
    ap.add_argument("--iotwin", help="the iotwin binary (default BUILD/src/cli/iotwin)")
    ap.add_argument("--baseline", metavar="IOTWIN", help="another iotwin binary, run alternately")
    ap.add_argument("--no-python", action="store_true", help="skip to_numpy")
    ap.add_argument("--md", help="write the markdown here (default: stdout)")
    ap.add_argument("--json", help="write the raw numbers here")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    events = a.events or (200_000 if a.smoke else 50_000_000)
    numpy_events = a.numpy_events or (200_000 if a.smoke else 10_000_000)
    rounds = a.rounds or (1 if a.smoke else 2)
    numpy_rounds = a.numpy_rounds or (1 if a.smoke else 3)
    iotwin = os.path.abspath(a.iotwin or os.path.join(a.build, "src/cli/iotwin"))
    binaries = [("iotwin", iotwin)] + ([("baseline", os.path.abspath(a.baseline))]
                                       if a.baseline else [])
    os.makedirs(a.dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="iotwin-export-bench-", dir=a.dir)
    res = {"rounds": rounds, "reduced": a.reduced, "load_before": loadavg()}
    try:
        trace = a.trace or os.path.join(scratch, "synth.iotwin")
        t0 = time.monotonic()
        if not a.trace:
            synth(a.build, trace, events)
        res["gen_s"] = time.monotonic() - t0
        res["bytes"] = os.path.getsize(trace)
        res["events"] = None if a.trace else events
        runs = measure_exports(binaries, trace, rounds, scratch)
        res["exports"] = {"%s/%s" % k: v for k, v in runs.items()}
        if not a.trace:
            os.unlink(trace)
        if not a.no_python:
            np_trace = os.path.join(scratch, "synth-numpy.iotwin")
            synth(a.build, np_trace, numpy_events)
            res["numpy_events"] = numpy_events
            res["numpy_trace_own"] = True
            res["numpy_rounds"] = numpy_rounds
            res["numpy"] = measure_numpy(a.build, np_trace, numpy_rounds)
            if res["numpy"].get("error"):
                log("to_numpy not measured: " + res["numpy"]["error"])
        res["load_after"] = loadavg()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def rel(text):
        return text.replace(a.build, "build").replace(scratch, "DIR").replace(
            ROOT + "/", "").replace("/usr/bin/python3 ", "")

    md = render(res, rel)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    else:
        print(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
