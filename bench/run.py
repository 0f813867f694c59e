#!/usr/bin/env python3
"""Runs every iotwin benchmark and writes docs/benchmarks.md (bench/run.sh is the entry point).

  bench/run.sh [--smoke] [--build DIR] [--out FILE] [--dir DIR] [--only SECTIONS]

Sections (--only, comma-separated): capture (overhead, loss and trace size:
bench/capture/overhead.py, loss_rate.py, the per-layer cost of breakdown.py and the per-call CPU
with its spread of percall.py), replay
(bench/replay/replay_vs_fio.py), device (original-pacing device replay against fio's on a
loop device: bench/replay/device_vs_fio.py), analysis (report throughput and peak RSS on a
synthetic trace from build/bench/synth_trace), export (CSV/JSONL export and Python to_numpy rows/s:
bench/export_speed.py), inprocess (Google Benchmark iotwin_bench and replay_bench). Every
figure is a ratio or a rate measured side by side in this one run: the machine is a shared,
noisy VM, so absolute times are not comparable between runs.

--smoke runs every piece with tiny sizes (about a minute) and writes its markdown to a
temporary directory (or --out), never to docs/; ctest runs it (label `bench`). Needs root (eBPF):
without it exits 77 (ctest: skipped) unless IOTWIN_REQUIRE_BPF=1, then 1.
"""
import argparse
import datetime
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
SECTIONS = ("capture", "replay", "device", "analysis", "export", "inprocess")


def sh(cmd, timeout=1800, **kw):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, errors="replace", **kw)
    except FileNotFoundError as e:  # a program that is not installed: say so like a shell
        return 127, "", str(e), time.monotonic() - t0
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def portable(obj, build):
    """obj with the build machine's paths made portable, for what goes into docs/: the build
    directory becomes `build`, the repository root `.`, a scratch directory of this run `DIR`
    (as in the commands the markdown shows)."""
    if isinstance(obj, dict):
        return {k: portable(v, build) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v, build) for v in obj]
    if not isinstance(obj, str):
        return obj
    obj = SCRATCH_RE.sub("DIR", obj)
    for prefix, name in ((build, "build"), (ROOT, ".")):
        if obj == prefix:
            return name
        obj = obj.replace(prefix + "/", name + "/")
    return obj


# The scratch directories the sections and their scripts make (tempfile prefixes `iotwin-*-`,
# 8 random characters): iotwin-analysis-bench-, iotwin-replay-bench-, iotwin-bench-, iotwin-loss-.
SCRATCH_RE = re.compile(r"/[^\s=:,]*?/iotwin-(?:[a-z]+-)+[A-Za-z0-9_]{8}(?![A-Za-z0-9_])")


def first_line(cmd):
    try:
        rc, out, err, _ = sh(cmd, timeout=30)
        text = (out or err).strip().splitlines()
        return text[0] if text else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def time_v(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd under /usr/bin/time -v: (rc, wall s, user+sys s, peak RSS KiB, stderr)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=stdout, stderr=subprocess.PIPE,
                       text=True, errors="replace")
    err = p.stderr

    def field(name):
        m = re.search(re.escape(name) + r":\s*(\S+)", err)
        return m.group(1) if m else None
    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    secs = 0.0
    if wall:
        for part in wall.split(":"):
            secs = secs * 60 + float(part)
    cpu = float(field("User time (seconds)") or 0) + float(field("System time (seconds)") or 0)
    rss = int(field("Maximum resident set size (kbytes)") or 0)
    return p.returncode, secs, cpu, rss, err


# ---------------------------------------------------------------------------------------------

def run_script(a, work, script, name, extra=()):
    """Runs bench/SCRIPT with --build/--dir/--md/--json (and --smoke, and `extra`); returns its
    markdown, its JSON results and the seconds it took."""
    md, js = os.path.join(work, name + ".md"), os.path.join(work, name + ".json")
    cmd = [sys.executable, os.path.join(HERE, script), "--build", a.build, "--dir", a.dir,
           "--md", md, "--json", js] + list(extra)
    if a.smoke:
        cmd.append("--smoke")
    rc, out, err, wall = sh(cmd)
    sys.stderr.write(err)
    if rc != 0:
        raise RuntimeError("%s failed (rc %d)" % (script, rc))
    return open(md).read(), json.load(open(js)), wall


def section_capture(a, work):
    overhead, results, wall = run_script(a, work, "capture/overhead.py", "capture")
    size = open(os.path.join(work, "capture-size.md")).read()
    loss, results["loss_rate"], wall2 = run_script(a, work, "capture/loss_rate.py", "loss")
    overhead += "\n### Loss at the highest call rate, and beyond\n\n" + loss
    breakdown, results["breakdown"], wall3 = run_breakdown(a, work)
    overhead += "\n### Where the cost per call goes\n\n" + breakdown
    percall, results["percall"], wall4 = run_percall(a, work)
    overhead += "\n### CPU added per call, with its spread\n\n" + percall
    return overhead, size, results, wall + wall2 + wall3 + wall4


def run_percall(a, work):
    """bench/capture/percall.py: the CPU each configuration adds per call (BPF run time, the
    loop's and the consumer's CPU) and the wall ratio, median and spread of 11 interleaved
    repetitions, and the cached fio ratio. It prints its markdown."""
    js = os.path.join(work, "percall.json")
    cmd = [sys.executable, os.path.join(HERE, "capture/percall.py"), "--build", a.build,
           "--dir", a.dir, "--json", js]
    cmd += ["--smoke"] if a.smoke else ["--fio"]
    rc, out, err, wall = sh(cmd)
    sys.stderr.write(err)
    if rc != 0:
        raise RuntimeError("capture/percall.py failed (rc %d)" % rc)
    text = out.replace("Command: `sudo bench/capture/percall.py",
                       "Command: `sudo bench/capture/percall.py --dir %s" % a.dir)
    return portable(text, a.build), json.load(open(js)), wall


def run_breakdown(a, work):
    """bench/capture/breakdown.py: the 1-thread random-offset loop untraced, per layer and under
    the counting bpftrace floor, then the BPF programs' run-time stats. It prints its markdown."""
    js = os.path.join(work, "breakdown.json")
    cmd = [sys.executable, os.path.join(HERE, "capture/breakdown.py"), "--build", a.build,
           "--dir", a.dir, "--json", js]
    if a.smoke:
        # Two layer sets, not five: every code path (runs, footers, BPF stats) in half the time.
        cmd += ["--calls", "20000", "--reps", "1", "--file-mb", "16", "--configs",
                "syscall,default"]
    rc, out, err, wall = sh(cmd)
    sys.stderr.write(err)
    if rc != 0:
        raise RuntimeError("capture/breakdown.py failed (rc %d)" % rc)
    text = out.replace("Command: `sudo bench/capture/breakdown.py",
                       "Command: `sudo bench/capture/breakdown.py --dir %s" % a.dir)
    return portable(text, a.build), json.load(open(js)), wall


def section_export(a, work):
    """bench/export_speed.py: CSV and JSONL export rows/s of a 50 M-event synthetic trace (the
    --export-events given) and Python to_numpy("syscalls") rows/s of a 10 M-event one."""
    extra = []
    if not a.smoke:
        extra = ["--events", str(a.export_events), "--rounds", str(a.export_rounds)]
        if a.export_events < 50_000_000:
            extra += ["--reduced", "50 M events would make this section take more than 3 minutes "
                      "on this machine"]
    text, results, wall = run_script(a, work, "export_speed.py", "export", extra)
    return text, results, wall


def section_replay(a, work):
    return run_script(a, work, "replay/replay_vs_fio.py", "replay")


def section_device(a, work):
    """bench/replay/device_vs_fio.py, and whether iotwin's measured schedule error met the
    targets (p50 <= 20 us, p99 <= 200 us at 10k requests/s) in the median run."""
    text, results, wall = run_script(a, work, "replay/device_vs_fio.py", "device")
    lines = []
    for key, name in (("iotwin", "`iotwin replay`"),
                      ("iotwin_rt", "`iotwin replay --rt-priority 10`")):
        errs = [r[key]["error_us"] for r in results["runs"] if r.get(key, {}).get("error_us")]
        if not errs:
            continue
        p50 = statistics.median(e["p50"] for e in errs)
        p99 = statistics.median(e["p99"] for e in errs)
        lines.append("* %s, measured, median of %d run%s: p50 %.1f µs (target ≤ 20: %s), p99 "
                     "%.0f µs (target ≤ 200: %s)." % (
                         name, len(errs), "" if len(errs) == 1 else "s", p50,
                         "met" if p50 <= 20 else "missed", p99, "met" if p99 <= 200 else "missed"))
    return text + ("\n" + "\n".join(lines) + "\n" if lines else ""), results, wall


def section_analysis(a, work):
    iotwin = os.path.join(a.build, "src/cli/iotwin")
    synth = os.path.join(a.build, "bench/synth_trace")
    events_wanted = 200_000 if a.smoke else a.analysis_events
    scratch = tempfile.mkdtemp(prefix="iotwin-analysis-bench-", dir=a.dir)
    t0 = time.monotonic()
    try:
        trace = os.path.join(scratch, "synth.iotwin")
        rc, out, err, gen_wall = sh([synth, trace, str(events_wanted)])
        if rc != 0:
            raise RuntimeError("synth_trace failed: " + err)
        gen = json.loads(out.strip().splitlines()[-1])
        events = gen["events"]
        rows = []

        def run(name, cmd, note=""):
            rc, wall, cpu, rss, err = time_v(cmd)
            if rc != 0:
                raise RuntimeError("%s failed (rc %d): %s" % (name, rc, err[-500:]))
            rows.append({"name": name, "cmd": cmd, "wall_s": wall, "cpu_s": cpu, "rss_kib": rss,
                         "events_per_s": events / wall if wall else None,
                         "events_per_cpu_s": events / cpu if cpu else None, "note": note})
            log("analysis %s: %.1f s, %.0f events/s, %d MiB" %
                (name, wall, events / wall if wall else 0, rss // 1024))

        # Format 1.2 (packed chunks, codec 3) against the same events in format-1.1 chunks (codec
        # 2) and format-1.0 chunks (codec 1), alternated five times each so that the machine's
        # drift hits all alike; medians of CPU time.
        plain = os.path.join(scratch, "synth-plain.iotwin")
        rc, _, err, _ = sh([synth, plain, str(events_wanted), "--plain"])
        if rc != 0:
            raise RuntimeError("synth_trace --plain failed: " + err)
        codec2 = os.path.join(scratch, "synth-codec2.iotwin")
        rc, _, err, _ = sh([synth, codec2, str(events_wanted), "--codec2"])
        if rc != 0:
            raise RuntimeError("synth_trace --codec2 failed: " + err)
        side = {"packed": [], "codec2": [], "plain": []}
        order = (("packed", trace), ("codec2", codec2), ("plain", plain))
        for rnd in range(1 if a.smoke else 5):
            # Forward, then backward: no trace always runs first (the one written last is warmer).
            for kind, path in (order if rnd % 2 == 0 else order[::-1]):
                rc, wall, cpu, rss, err = time_v([iotwin, "report", path, "--no-progress"])
                if rc != 0:
                    raise RuntimeError("report of the %s trace failed: %s" % (kind, err[-500:]))
                side[kind].append({"wall_s": wall, "cpu_s": cpu, "rss_kib": rss})
        plain_size = os.path.getsize(plain)
        codec2_size = os.path.getsize(codec2)
        os.unlink(plain)
        os.unlink(codec2)
        codec = {}
        for kind, runs in side.items():
            cpu = statistics.median(r["cpu_s"] for r in runs)
            codec[kind] = {"runs": runs, "cpu_s_median": cpu,
                           "events_per_cpu_s": events / cpu if cpu else None}
        codec["plain"]["bytes"] = plain_size
        codec["codec2"]["bytes"] = codec2_size
        log("analysis report codec 3 vs codec 2 vs plain chunks: %.2f vs %.2f vs %.2f CPU-s "
            "(median)" % (codec["packed"]["cpu_s_median"], codec["codec2"]["cpu_s_median"],
                          codec["plain"]["cpu_s_median"]))
        run("report (text)", [iotwin, "report", trace, "--no-progress"])
        recorded = measure_recorded_report(a, iotwin, scratch)
        # CSV/JSONL export has a section of its own (section_export).
        size = os.path.getsize(trace)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def rel(cmd):
        return " ".join(c.replace(a.build, "build").replace(scratch, "DIR") for c in cmd)

    lines = []
    p = lines.append
    p("Trace: %s events (%.1f bytes/event, %.0f MiB) written by `bench/synth_trace` in %.1f s "
      "(%.1f M events/s): the training-like mix of bench/analysis_bench.cc (60%% 128 KiB/4 KiB "
      "pread64, read, write, lseek, page faults, page-cache adds, block issue/complete; 8 "
      "threads, 65 files)." % (format(events, ","), size / events, size / 2**20, gen_wall,
                              events / gen_wall / 1e6))
    p("")
    p("| command | wall s | events/s (wall) | events/s per CPU-second | peak RSS |")
    p("|---|---|---|---|---|")
    for r in rows:
        p("| `%s`%s | %.1f | %.2f M | %.2f M | %.0f MiB |" % (
            r["name"], " (%s)" % r["note"] if r["note"] else "", r["wall_s"],
            (r["events_per_s"] or 0) / 1e6, (r["events_per_cpu_s"] or 0) / 1e6, r["rss_kib"] / 1024))
    p("")
    pk, c2, pl = codec["packed"], codec.get("codec2"), codec["plain"]
    p("Format 1.2 (codec 3) against 1.1 (codec 2) and 1.0 on the same events (`synth_trace "
      "--codec2` writes codec-2 chunks, `--plain` zstd of the plain records, codec 1), `iotwin "
      "report` alternated %d times each, median CPU time: codec 3 %.2f s (%.2f M events per "
      "CPU-second, %.1f bytes/event)%s, plain chunks %.2f s (%.2f M, %.1f bytes/event): "
      "**%.2fx** the events per CPU-second of plain chunks%s." % (
          len(pk["runs"]), pk["cpu_s_median"], (pk["events_per_cpu_s"] or 0) / 1e6, size / events,
          (", codec 2 %.2f s (%.2f M, %.1f bytes/event)" % (
              c2["cpu_s_median"], (c2["events_per_cpu_s"] or 0) / 1e6, c2["bytes"] / events))
          if c2 else "",
          pl["cpu_s_median"], (pl["events_per_cpu_s"] or 0) / 1e6, pl["bytes"] / events,
          (pl["cpu_s_median"] / pk["cpu_s_median"]) if pk["cpu_s_median"] else 0,
          (" and **%.2fx** those of codec 2" % (c2["cpu_s_median"] / pk["cpu_s_median"]))
          if c2 and pk["cpu_s_median"] else ""))
    p("")
    p("```")
    p("build/bench/synth_trace DIR/synth.iotwin %d" % events_wanted)
    p("build/bench/synth_trace DIR/synth-codec2.iotwin %d --codec2" % events_wanted)
    p("build/bench/synth_trace DIR/synth-plain.iotwin %d --plain" % events_wanted)
    for r in rows:
        p("/usr/bin/time -v " + rel(r["cmd"]))
    p("```")
    rc_ = recorded
    p("")
    p("A recorded trace, for comparison with the synthetic mix: `iotwin record` of fio reading a "
      "page-cached %d MiB file (2 jobs, psync, random 16 KiB reads, %d s), %s events (%.1f "
      "bytes/event; %.0f%% system calls). `iotwin report`, median CPU time of %d runs: %.2f s, "
      "**%.2f M events per CPU-second**." % (
          rc_["file_mib"], rc_["runtime_s"], format(rc_["events"], ","),
          rc_["bytes"] / rc_["events"], 100.0 * rc_["syscalls"] / rc_["events"],
          len(rc_["runs"]), rc_["cpu_s_median"], rc_["events_per_cpu_s"] / 1e6))
    p("")
    p("```")
    p(" ".join(c.replace(a.build, "build").replace(scratch, "DIR") for c in rc_["record_cmd"]))
    p("build/src/cli/iotwin report DIR/recorded.iotwin --no-progress")
    p("```")
    return "\n".join(lines) + "\n", {"events": events, "bytes": size, "gen_s": gen_wall,
                                      "rows": rows, "codec": codec, "recorded": recorded}, \
        time.monotonic() - t0


def measure_recorded_report(a, iotwin, scratch):
    """Records fio's page-cached random reads and times `iotwin report` of that trace: the
    synthetic mix's events per CPU-second next to those of a real capture."""
    mib = 32 if a.smoke else 256
    runtime = 1 if a.smoke else 10
    data = os.path.join(scratch, "fio.data")
    with open(data, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(mib):
            f.write(block)
    with open(data, "rb") as f:  # into the page cache
        while f.read(1 << 20):
            pass
    trace = os.path.join(scratch, "recorded.iotwin")
    record = [iotwin, "record", "-o", trace, "--", "fio", "--name=r", "--filename=" + data,
              "--size=%dM" % mib, "--rw=randread", "--bs=16k", "--ioengine=psync",
              "--time_based", "--runtime=%d" % runtime, "--numjobs=2", "--group_reporting",
              "--invalidate=0"]
    rc, _, err, _ = sh(record)
    if rc != 0:
        raise RuntimeError("iotwin record of fio failed: " + err[-500:])
    rc, out, err, _ = sh([iotwin, "report", trace, "--no-progress", "--json"])
    if rc != 0:
        raise RuntimeError("report --json of the recorded trace failed: " + err[-500:])
    totals = json.loads(out)["totals"]
    runs = []
    for _ in range(1 if a.smoke else 5):
        rc, wall, cpu, rss, err = time_v([iotwin, "report", trace, "--no-progress"])
        if rc != 0:
            raise RuntimeError("report of the recorded trace failed: " + err[-500:])
        runs.append({"wall_s": wall, "cpu_s": cpu, "rss_kib": rss})
    cpu = statistics.median(r["cpu_s"] for r in runs)
    events = totals["records"]
    result = {"events": events, "syscalls": totals["syscalls"], "bytes": os.path.getsize(trace),
              "file_mib": mib, "runtime_s": runtime, "runs": runs, "cpu_s_median": cpu,
              "events_per_cpu_s": events / cpu if cpu else 0, "record_cmd": record}
    log("analysis report of a recorded fio trace: %d events, %.2f CPU-s (median), %.2f M/s" %
        (events, cpu, result["events_per_cpu_s"] / 1e6))
    os.unlink(data)
    return result


def section_inprocess(a, work):
    t0 = time.monotonic()
    gb = os.path.join(a.build, "bench/iotwin_bench")
    js = os.path.join(work, "gbench.json")
    min_time = "0.01" if a.smoke else "0.5"
    cmd = [gb, "--benchmark_format=console", "--benchmark_out_format=json",
           "--benchmark_out=" + js, "--benchmark_min_time=" + min_time]
    if a.smoke:
        cmd.append("--benchmark_filter=BM_(LogLinearAdd|FlatMapFind/64|TraceReaderIterate)")
    rc, out, err, _ = sh(cmd)
    if rc != 0:
        raise RuntimeError("iotwin_bench failed: " + err[-500:])
    data = json.load(open(js))
    lines = []
    p = lines.append
    p("`build/bench/iotwin_bench --benchmark_min_time=%s` (Google Benchmark; single thread, "
      "CPU time; items/s or events/s where the benchmark counts them):" % min_time)
    p("")
    p("| benchmark | CPU time per iteration | rate |")
    p("|---|---|---|")
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        rate = b.get("events/s") or b.get("items_per_second")
        extra = ""
        if "bytes/event" in b:
            extra = ", %.1f bytes/event" % b["bytes/event"]
        p("| %s | %.3g %s | %s%s |" % (b["name"], b["cpu_time"], b["time_unit"],
                                       "%.3g /s" % rate if rate else "-", extra))
    p("")
    r = {}
    if a.smoke:
        p("`replay_bench` is skipped in smoke runs (it prepares a 256 MiB file).")
    else:
        r = run_replay_bench(a, work, p)
    return "\n".join(lines) + "\n", {"gbench": data, "replay_bench": r}, time.monotonic() - t0


def run_replay_bench(a, work, p):
    rj = os.path.join(work, "replay_bench.json")
    # No --dir: it makes (and removes) its own directory under /var/tmp.
    rcmd = [os.path.join(a.build, "bench/replay/replay_bench"), "--json", rj,
            "--smoke"]  # the full comparison with fio is section 3
    rc, out, err, _ = sh(rcmd)
    if rc != 0:
        raise RuntimeError("replay_bench failed (rc %d): %s %s" % (rc, out[-500:], err[-500:]))
    r = json.load(open(rj))
    p("`build/bench/replay/replay_bench --smoke` (0.3 s per rate): schedule error of `--pace "
      "original` with the `sync` back end (real preads) and the `null` back end (no I/O: the "
      "scheduler and pacer alone); `/sleep`: `--spin-us 0` (no spin before a deadline); `/rt`: "
      "`--rt-priority 1` (the replay threads in SCHED_FIFO), µs:")
    p("")
    p("| rate (ops/s) | variant | p50 | p99 | max | achieved ops/s |")
    p("|---|---|---|---|---|---|")
    for row in r.get("original_pacing", []):
        p("| %d | %s | %.1f | %.1f | %.1f | %.0f |" % (
            row["rate"], row.get("variant", row["backend"]), row["p50_ns"] / 1e3,
            row["p99_ns"] / 1e3, row["max_ns"] / 1e3, row["achieved_ops_s"]))
    p("")
    verdicts = []
    for row in r.get("original_pacing", []):
        if row["rate"] == 10000 and row.get("variant") in ("sync", "sync/rt"):
            ok = row["p50_ns"] < 20e3 and row["p99_ns"] < 200e3
            verdicts.append("%s %s (p50 %.1f µs, p99 %.1f µs)" % (
                "`--rt-priority 1`" if row["variant"] == "sync/rt" else "default",
                "met" if ok else "**missed**", row["p50_ns"] / 1e3, row["p99_ns"] / 1e3))
    if verdicts:
        p("Target at 10k ops/s, sync back end (p50 < 20 µs, p99 < 200 µs): " +
          "; ".join(verdicts) + ". Without a real-time class the p99 is the time the worker "
          "waits for a CPU on this loaded machine (docs/replay.md \"What the p99 measures\").")
    fv = r.get("fast_vs_fio", {})
    if fv:
        p("")
        p("Its fast-replay check (%d reads, page cache): iotwin / fio randread job = %.2f, "
          "iotwin / fio iolog (its own v2 iolog) = %.2f." % (
              fv["ops"], fv["ratio_vs_fio_randread"], fv["ratio_vs_fio_iolog"]))
    return r


# ---------------------------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, output to a temp dir")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--out", help="markdown to write (default docs/benchmarks.md; smoke: temp)")
    ap.add_argument("--dir", default="/var/tmp", help="scratch directory on a real disk (not tmpfs)")
    ap.add_argument("--only", help="comma-separated subset of " + ",".join(SECTIONS))
    ap.add_argument("--reuse", metavar="WORKDIR",
                    help="take the sections not rerun (see --only) from an earlier run's "
                    "directory (printed at its end: 'raw results in ...')")
    ap.add_argument("--analysis-events", type=int, default=50_000_000,
                    help="events in the analysis trace (default 50 million)")
    ap.add_argument("--export-events", type=int, default=50_000_000,
                    help="events in the export section's trace (default 50 million)")
    ap.add_argument("--export-rounds", type=int, default=2,
                    help="alternated rounds of CSV and JSONL export (default 2: 50 M events take "
                    "about 12 s per export on the 2-core VM)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    if a.only is not None:
        a.sections = [s for s in a.only.split(",") if s]
    else:
        a.sections = [] if a.reuse else list(SECTIONS)
    for s in a.sections:
        if s not in SECTIONS:
            ap.error("unknown section " + s)
    return a


def check_prerequisites(a):
    """Exits (77: skipped, unless IOTWIN_REQUIRE_BPF=1) when the run cannot measure."""
    require = os.environ.get("IOTWIN_REQUIRE_BPF") == "1"
    if os.geteuid() != 0:
        log("needs root (iotwin record, bpftrace and perf trace load eBPF)")
        sys.exit(1 if require else 77)
    needed = ["src/cli/iotwin", "workloads/iotwin-workload", "tests/progs/pread_loop",
              "bench/iotwin_bench", "bench/replay/replay_bench", "bench/synth_trace"]
    missing = [n for n in needed if not os.access(os.path.join(a.build, n), os.X_OK)]
    if missing:
        log("missing in %s: %s; build first: ninja -C %s (or ./tools/bootstrap.sh bench)" %
            (a.build, ", ".join(missing), a.build))
        sys.exit(2)
    for tool in ("fio", "strace"):
        if not shutil.which(tool):
            log("%s is not installed (tools/debian-packages.txt)" % tool)
            sys.exit(2)


SECTION_RUNNERS = {
    "capture": lambda a, work: section_capture(a, work),
    "replay": lambda a, work: section_replay(a, work),
    "device": lambda a, work: section_device(a, work),
    "analysis": lambda a, work: section_analysis(a, work),
    "export": lambda a, work: section_export(a, work),
    "inprocess": lambda a, work: section_inprocess(a, work),
}


def run_sections(a, work, run):
    """Runs the sections asked for, each saved in `work` as it ends (for a later --reuse)."""
    for s in a.sections:
        log("section %s ..." % s)
        try:
            got = SECTION_RUNNERS[s](a, work)
            if s == "capture":
                run.texts["capture"], run.texts["size"], run.results[s], run.times[s] = got
            else:
                run.texts[s], run.results[s], run.times[s] = got
            log("section %s done in %.0f s" % (s, run.times[s]))
            saved = {"texts": {k: v for k, v in run.texts.items()
                               if k == s or (s == "capture" and k == "size")},
                     "results": run.results[s], "time": run.times[s],
                     "commit": run.commit_here, "mode": run.mode_here}
            with open(os.path.join(work, "section-%s.json" % s), "w") as f:
                json.dump(saved, f, default=str)
        except (RuntimeError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
            run.failures.append("%s: %s" % (s, e))
            log("section %s FAILED: %s" % (s, e))


def take_reused(a, work, run):
    """The sections not rerun, from --reuse's directory; returns that run's meta ({} if none)."""
    try:
        reused_meta = json.load(open(os.path.join(a.reuse, "run-meta.json")))
    except (OSError, ValueError):
        reused_meta = {}
    for s in SECTIONS:
        path = os.path.join(a.reuse, "section-%s.json" % s)
        if s in a.sections or not os.path.exists(path):
            continue
        saved = json.load(open(path))
        run.texts.update(saved["texts"])
        run.results[s] = saved["results"]
        run.times[s] = saved["time"]
        # Sections saved before they carried their commit: the earlier run's.
        run.commits[s] = saved.get("commit") or reused_meta.get("commit", "?")
        run.modes[s] = saved.get("mode") or (
            "smoke" if reused_meta.get("mode", "full").startswith("smoke") else "full")
        # This run's directory holds every section it renders, so it can be reused in turn.
        saved["commit"] = run.commits[s]
        saved["mode"] = run.modes[s]
        with open(os.path.join(work, "section-%s.json" % s), "w") as f:
            json.dump(saved, f, default=str)
        log("section %s taken from %s" % (s, a.reuse))
    return reused_meta


def reuse_notes(a, run, rerendered):
    """What the document says of sections taken over with --reuse and of failed sections."""
    parts = []
    reused = [s for s in SECTIONS if s not in a.sections and s in run.results]
    if a.reuse and reused:
        parts.append("Sections %s were measured in an earlier run and reused here (`--reuse`); "
                     "the date and load above are those of %s.\n" %
                     (", ".join(s + (" (smoke sizes)" if run.modes.get(s) == "smoke" else "")
                                for s in reused),
                      "the run this text was re-rendered from" if rerendered else "this run"))
        tiny = [s for s in reused if run.modes.get(s) == "smoke"]
        if tiny and not a.smoke:
            log("warning: sections %s were measured with smoke sizes" % ", ".join(tiny))
            parts.append("**Sections %s were measured with `--smoke` sizes: their figures are "
                         "meaningless.**\n" % ", ".join(tiny))
    if run.failures:
        parts.append("**Sections that failed in this run:** " + "; ".join(run.failures) + "\n")
    return parts


def section_texts(texts, results):
    """The document's numbered sections, in order, from the texts present."""
    parts = []
    if "capture" in texts:
        parts.append("## 1. Capture overhead\n\n" + CAPTURE_INTRO + texts["capture"] + "\n" +
                     summarize_capture(results.get("capture")))
        parts.append("## 2. Trace size\n\n" + texts["size"])
    if "replay" in texts:
        parts.append("## 3. Replay\n\n" + texts["replay"] + "\n" + summarize_replay(results.get("replay")))
    if "device" in texts:
        parts.append(("" if "replay" in texts else "## 3. Replay\n\n") +
                     "### Device level (`--layer block`), original pacing\n\n" + texts["device"])
    if "analysis" in texts:
        parts.append("## 4. Analysis throughput\n\n" + texts["analysis"] + "\n" +
                     summarize_analysis(results.get("analysis"), results.get("inprocess")))
    if "export" in texts:
        parts.append("## 5. Export throughput\n\n" + texts["export"])
    if "inprocess" in texts:
        parts.append("## 6. In-process micro-benchmarks\n\n" + texts["inprocess"])
    return parts


def run_meta_of(a, work, run, reused_meta, load_start, load_end):
    """The run's date, commit, load and mode, as the header shows them; returns (meta,
    rerendered): a pure re-rendering shows the measuring run's facts."""
    run_meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "commit": run.commit_here,
                "load": "%.1f at start, %.1f at end" % (load_start[0], load_end[0]),
                "mode": "smoke (tiny sizes: figures meaningless)" if a.smoke else "full"}
    rerendered = bool(a.reuse and not a.sections and reused_meta)
    if rerendered:
        run_meta = dict(reused_meta)
        run_meta["date"] += " (text re-rendered later with `--reuse`)"
    if a.sections or rerendered:
        with open(os.path.join(work, "run-meta.json"), "w") as f:
            json.dump(reused_meta if rerendered else run_meta, f)
    return run_meta, rerendered


def main():
    a = parse_args()
    check_prerequisites(a)
    work = tempfile.mkdtemp(prefix="iotwin-bench-run-")
    out = a.out or (os.path.join(work, "benchmarks.md") if a.smoke
                    else os.path.join(ROOT, "docs/benchmarks.md"))
    started = time.monotonic()
    load_start = os.getloadavg()
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])[1].strip() or "?"
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])[1].strip()
    commit_here = commit + (" (with uncommitted changes)" if dirty else "")
    mode_here = "smoke" if a.smoke else "full"
    # The code each section measured and the sizes it ran with: this run's for the sections
    # run here, the earlier run's for sections taken over with --reuse.
    run = argparse.Namespace(texts={}, results={}, times={}, failures=[],
                             commit_here=commit_here, mode_here=mode_here,
                             commits={s: commit_here for s in a.sections},
                             modes={s: mode_here for s in a.sections})
    run_sections(a, work, run)
    total = time.monotonic() - started
    load_end = os.getloadavg()
    reused_meta = take_reused(a, work, run) if a.reuse else {}
    run_meta, rerendered = run_meta_of(a, work, run, reused_meta, load_start, load_end)
    header = TEMPLATE_HEAD.format(
        date=run_meta["date"],
        kernel=os.uname().release, cpus=os.cpu_count(), load=run_meta["load"],
        mode=run_meta.get("mode", "full"),
        total="%.0f" % sum(run.times.values()),
        times=", ".join("%s %.0f s" % (k, v) for k, v in run.times.items()),
        fio=first_line(["fio", "--version"]), strace=first_line(["strace", "-V"]),
        bpftrace=first_line(["bpftrace", "--version"]),
        perf=first_line(["perf", "--version"]) if shutil.which("perf") else "not installed")
    parts = [header] + reuse_notes(a, run, rerendered) + section_texts(run.texts, run.results)
    parts.append(TEMPLATE_TAIL)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(parts))
    with open(os.path.splitext(out)[0] + ".json", "w") if not a.smoke else open(
            os.path.join(work, "results.json"), "w") as f:
        json.dump(portable(run.results, a.build), f, indent=1, default=str)
    if not a.smoke and not a.out and "capture" in run.texts:
        update_record_md(run.texts["capture"])
    remove_data_files(a.dir)
    log("wrote %s in %.0f s%s" % (out, total,
                                  "; FAILED: " + "; ".join(run.failures) if run.failures else ""))
    if a.smoke and not a.out:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("raw results in %s" % work)
    sys.exit(1 if run.failures else 0)

# The data files the capture scripts make in --dir and share between them (they keep them so that
# one script's runs reuse them): removed at the end of the run, they take up to 600 MiB.
DATA_FILES = re.compile(
    r"^iotwin-(?:bench-(?:cached|direct)\.dat|bench-workloads|breakdown-\d+m\.dat)$")


def remove_data_files(directory):
    for name in os.listdir(directory):
        if DATA_FILES.match(name):
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)


RECORD_BEGIN = "<!-- overhead table: generated by bench/run.sh, do not edit -->"
RECORD_END = "<!-- end of overhead table -->"


def update_record_md(capture_md):
    """Puts the slowdown table (the first table of the capture section) into docs/record.md,
    in place of the OVERHEAD_TABLE placeholder or of the previous generated table."""
    path = os.path.join(ROOT, "docs/record.md")
    if not os.path.exists(path):
        return
    table = []
    for line in capture_md.splitlines():
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    block = "\n".join([RECORD_BEGIN,
                       "Slowdown (traced / untraced time, medians of alternating runs) measured "
                       "by `sudo bench/run.sh` on the shared 2-core VM; events lost, the run's "
                       "date and load and the other tools' details in "
                       "[benchmarks.md](benchmarks.md#1-capture-overhead):", ""] +
                      table + [RECORD_END])
    text = open(path).read()
    if RECORD_BEGIN in text and RECORD_END in text:
        start = text.index(RECORD_BEGIN)
        end = text.index(RECORD_END) + len(RECORD_END)
        text = text[:start] + block + text[end:]
    elif "OVERHEAD_TABLE" in text:
        text = text.replace("OVERHEAD_TABLE", block, 1)
    else:
        return
    with open(path, "w") as f:
        f.write(text)
    log("updated the overhead table in docs/record.md")


# ---------------------------------------------------------------------------------------------
# Text around the tables. The summaries compare with the tracer overheads measured on a 2-core VM
# of the same kind (2026-11; REFERENCE_OVERHEADS) and name the targets each figure is held to.

TEMPLATE_HEAD = """# iotwin benchmarks

Generated by `bench/run.sh` ({mode}) on {date}. Do not edit by hand: rerun
`sudo bench/run.sh` (after the build: it expects `build/` from `ninja -C build`;
`./tools/bootstrap.sh bench` installs every package, builds and runs it; `--smoke` runs every piece with tiny sizes
and writes nowhere in docs/; `--only capture,replay,device,analysis,export,inprocess`
reruns some sections). Raw numbers: `docs/benchmarks.json`.

**Machine.** A shared 2-core VM (kernel {kernel}, {cpus} CPUs, no PMU, virtio disk), on which
other engineers were compiling during the run (1-minute load average {load}). Every figure
below is therefore a **ratio or rate measured side by side within this one run** (alternating
runs, medians); absolute times are not comparable between runs or machines, and ratios move by
±10-20% between runs. Total {total} s ({times}).

Tools: {fio}; {strace}; {bpftrace}; {perf}.
"""

CAPTURE_INTRO = """Every tracer records every system call of the workload to a file, except
`bpftrace-count`, the floor: a tracepoint that only counts. iotwin runs with its defaults, i.e.
also the memory layer (page faults, page cache, write-back), the block layer (bio and request
phases) and the sched layer (off-CPU intervals of traced threads), which the other tools do not
capture. Workloads time themselves, so tracer start-up is not included. Reproduce one cell: run
the workload command untraced and under the tracer command below, alternately, and divide.

"""

TEMPLATE_TAIL = """## Reading these numbers

* The machine was shared: on 2 cores the ring-buffer consumer of a tracer competes with the
  workload (and with compilers), which is why 2-thread figures are worse than 1-thread ones.
* fio O_DIRECT figures depend on the virtio disk, whose speed varied a lot during the run (see
  the untraced IOPS, against ≈13k IOPS measured on the same kind of VM in 2026-11); the `bpftrace-count` column, which adds
  almost nothing, shows the noise level, and ratios within that spread mean "no measurable
  overhead". fio runs a fixed time, so its event counts differ between tools.
* The pread loop reads 4 KiB at random offsets of a page-cached 256 MiB file (`random`) or always
  at offset 0 (`one offset`): with the memory layer on, a read of a page the trace has not seen
  yet runs more of its programs, so the random loop is the harder case. Its rows in the slowdown
  table are 50,000 calls per thread (about a tenth of a second, short enough for strace), so one
  scheduler hiccup moves them; the per-layer breakdown runs the 1-thread loop with 1 M calls per
  run, and its figures are the steadier ones.
* vector-search times its whole run, including in-memory work (data set generation, PQ
  training, the recall check), so its slowdown understates what tracing adds to its reads.
* The events table counts output lines for strace, perf and bpftrace: strace writes a call
  interrupted by another thread as two lines (`<unfinished ...>` / `<... resumed>`), so its
  2-thread count is higher and its bytes per event lower than per call.
* Export throughput (section 5) is measured with the tables written to /dev/null, i.e. the
  exporter's cost, not the disk's. The export formats rows on a second thread, so its rows per
  wall second need a free second core, which this shared machine rarely has; rows per
  CPU-second do not depend on the load. `to_numpy` reads on one thread while a second
  faults in the array's fresh memory ahead of it (docs/python.md, "Speed"), so its wall time
  too needs the second core.
* Smoke runs (`bench/run.sh --smoke`, ctest label `bench`) only check that every piece still runs.
"""


def _time_like(cap, workload):
    """Whether the workload's figure is a time (slowdown = traced / untraced) or a rate."""
    known = cap.get("workloads", {}).get(workload)
    if known is not None:
        return known["time_like"]
    return workload not in ("W1", "W1f", "W1b", "W1bf", "W2", "W3")


def _slowdowns(cap, workload, tracer):
    base = cap["results"].get("%s/none" % workload, [])
    tr = cap["results"].get("%s/%s" % (workload, tracer), [])
    vals = []
    for b, t in zip(base, tr):
        if b["value"] and t["value"]:
            vals.append(t["value"] / b["value"] if _time_like(cap, workload)
                        else b["value"] / t["value"])
    return statistics.median(vals) if vals else None


# Tracer overheads measured on a 2-core VM of the same kind (2026-11), traced ÷ untraced: 1 M cached
# 4 KiB preads with 1 and 2 threads, and the IOPS ratio of fio 4 KiB O_DIRECT random reads.
# Tools: strace -f, perf trace, a bpftrace printf one-liner, a bpftrace tracepoint that only
# counts, and SamsungDS/ebpf-syscall's syscall_monitor (detailed, JSON).
REFERENCE_OVERHEADS = {
    "strace": (27.1, 30.0, 0.54), "perf": (15.9, 14.1, 0.62),
    "bpftrace": (6.0, 6.1, 0.77), "bpftrace-count": (1.21, 1.23, 1.00),
    "ebpf-syscall syscall_monitor": (1.23, 1.74, 0.98)}


def summarize_capture(cap):
    if not cap:
        return ""
    ref = REFERENCE_OVERHEADS
    measured = ("iotwin", "iotwin-syscall", "strace", "perf", "bpftrace", "bpftrace-count")
    lines = ["**Against the reference figures** (traced ÷ untraced, medians of alternating pairs, "
             "measured on a 2-core VM of the same kind in 2026-11: 1 M cached 4 KiB preads, and fio "
             "4 KiB O_DIRECT random reads; "
             "the fio figure there is an IOPS ratio, shown here as its inverse, a slowdown):", "",
             "| tracer | pread 1 thread: here / reference | pread 2 threads: here / reference | "
             "fio O_DIRECT: here / reference |", "|---|---|---|---|"]
    for name in measured + ("ebpf-syscall syscall_monitor",):
        r = ref.get(name)
        cells = []
        for i, w in enumerate(("W1", "W1b", "W3")):
            here = _slowdowns(cap, w, name) if name in measured else None
            there = None if r is None else (r[i] if i < 2 else 1 / r[i])
            cells.append("%s / %s" % ("%.2fx" % here if here else "-",
                                      "%.2fx" % there if there else "-"))
        lines.append("| %s | %s |" % (name, " | ".join(cells)))
    lines.append("")
    lines += capture_targets(cap)
    return "\n".join(lines) + "\n"


# The capture's targets, side by side in one run: workload, its slowdown limit with the default
# layers and with the syscall layer alone (None: the target names the defaults only), as stated.
CAPTURE_TARGETS = [
    ("W1", 1.25, 1.20, "defaults <= 1.25x, syscall layer <= 1.20x"),
    ("W1f", 1.25, 1.20, "defaults <= 1.25x, syscall layer <= 1.20x"),
    ("W1b", 1.35, 1.35, "<= 1.35x"),
    ("W1bf", 1.35, 1.35, "<= 1.35x"),
    ("W2", 1 / 0.85, None, "defaults: IOPS >= 0.85x untraced"),
    ("W3", 1 / 0.97, 1 / 0.97, "IOPS >= 0.97x untraced"),
]
TARGET_LOSS_RATE = 1e6      # calls/s at which nothing may be lost
TARGET_TRACE_BYTES = 8.0    # trace bytes per call of the pread loop


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _breakdown_slowdown(bd, config):
    pairs = zip(bd["runs"].get("untraced", []), bd["runs"].get(config, []))
    return _median([b["calls_per_s"] / t["calls_per_s"] for b, t in pairs if b and t])


def _breakdown_field(bd, config, field):
    return _median([r.get(field) for r in bd["runs"].get(config, []) if r])


def _verdict_cell(value, limit, shown, missed, what):
    if value is None:
        return "not run"
    if limit is None:
        return shown
    if value <= limit:
        return shown + " met"
    missed.append("%s (%s)" % (what, shown))
    return shown + " **missed**"


def capture_targets(cap):
    """The targets table with met/missed, and the measured reason for what is missed."""
    titles = {k: v.get("title", k) for k, v in cap.get("workloads", {}).items()}
    lines = ["**Against the capture's targets** (side by side in this run):", "",
             "| target | measured on | iotwin (defaults) | iotwin-syscall |", "|---|---|---|---|"]
    missed = []
    for w, limit, limit_sys, text in CAPTURE_TARGETS:
        if "%s/none" % w not in cap["results"]:
            continue
        title = titles.get(w, w)
        cells = []
        for tracer, lim in (("iotwin", limit), ("iotwin-syscall", limit_sys)):
            v = _slowdowns(cap, w, tracer)
            shown = None if v is None else (
                "%.2fx IOPS" % (1 / v) if w in ("W2", "W3") else "%.2fx" % v)
            cells.append(_verdict_cell(v, lim, shown, missed, "%s under %s" % (title, tracer)))
        lines.append("| %s | %s | %s |" % (text, title, " | ".join(cells)))
    bd = cap.get("breakdown")
    if bd and bd.get("runs"):
        calls = _median([r["calls"] for r in bd["runs"].get("untraced", []) if r])
        title = "the same loop, %s calls per run (breakdown below)" % format(int(calls or 0), ",")
        cells = [_verdict_cell(_breakdown_slowdown(bd, c), lim,
                               "%.2fx" % (_breakdown_slowdown(bd, c) or 0), missed,
                               "%s, %s" % (title, c))
                 for c, lim in (("default", 1.25), ("syscall", 1.20))]
        lines.append("| defaults <= 1.25x, syscall layer <= 1.20x | %s | %s |" %
                     (title, " | ".join(cells)))
        cells = []
        for c in ("default", "syscall"):
            b = _breakdown_field(bd, c, "trace_bytes")
            cells.append(_verdict_cell(b, TARGET_TRACE_BYTES, "%.2f B/call" % (b or 0), missed,
                                       "trace size under %s" % c))
        lines.append("| trace <= %.0f bytes per call | %s | %s |" %
                     (TARGET_TRACE_BYTES, title, " | ".join(cells)))
    loss = cap.get("loss_rate")
    if loss:
        cells = []
        for key in ("default", "syscall"):
            rate = _median([r.get("calls_per_s") for r in loss.get(key, [])])
            lost = sum(r.get("lost") or 0 for r in loss.get(key, []))
            if rate is None:
                cells.append("failed")
            elif lost:
                cells.append("%s lost at %s calls/s **missed**" % (format(lost, ","),
                                                                 format(int(rate), ",")))
                missed.append("loss under %s" % key)
            elif rate < TARGET_LOSS_RATE:
                cells.append("0 lost, but only %s calls/s reached: **not shown**" %
                             format(int(rate), ","))
                missed.append("1 M calls/s not reached under %s (%s calls/s)" %
                              (key, format(int(rate), ",")))
            else:
                cells.append("0 lost at %s calls/s met" % format(int(rate), ","))
        lines.append("| 0 lost events at >= 1 M calls/s | the 2-thread loop of the loss table | "
                     "%s |" % " | ".join(cells))
    lost = {t: sum(r["lost"] or 0 for k, rs in cap["results"].items()
                   if k.split("/")[1] == t for r in rs) for t in ("iotwin", "iotwin-syscall")}
    lines.append("")
    verdict = ["Lost events over all runs of the slowdown table: iotwin %d, iotwin-syscall %d" %
               (lost["iotwin"], lost["iotwin-syscall"])]
    if missed:
        verdict.append("**Missed:** %s. %s" % ("; ".join(missed), missed_reason(bd)))
    else:
        verdict.append("Every target met in this run")
    lines.append(". ".join(verdict) + ".")
    lines.append("")
    return lines


def floor_versus_targets(base_ns, floor_added_ns):
    """The 1-thread targets as nanoseconds a call may gain, beside what the counting floor adds."""
    if not base_ns or floor_added_ns is None:
        return ""
    floor_ratio = (base_ns + floor_added_ns) / base_ns
    budgets = [(name, ratio, (ratio - 1) * base_ns) for name, ratio in
               (("the syscall layer", 1.20), ("the default layers", 1.25))]
    text = ("The 1-thread targets leave a call %s; the counting tracepoint alone adds %+.0f ns "
            "(%.2fx). " % (" and ".join("%+.0f ns under %s (%.2fx)" % (b, n, r)
                                         for n, r, b in budgets),
                           floor_added_ns, floor_ratio))
    below = [n for n, r, _ in budgets if floor_ratio > r]
    if below:
        text += ("On this machine in this run the target of %s is below the floor: no tracer "
                 "with a program on every system call met it, so no change to iotwin's programs "
                 "alone can. " % " and of ".join(below))
    return text


def missed_reason(bd):
    """Where the cost per call goes, in the breakdown's numbers, and what would close the gap."""
    text = ""
    if bd and bd.get("runs"):
        base = _breakdown_field(bd, "untraced", "loop_cpu_ns")
        added = {c: (_breakdown_field(bd, c, "loop_cpu_ns") or 0) - (base or 0)
                 for c in ("syscall", "default", "bpftrace-count") if bd["runs"].get(c)}
        floor = ("" if "bpftrace-count" not in added else
                 ", against %+.0f ns for a counting bpftrace tracepoint (the floor of any program "
                 "on every system call)" % added["bpftrace-count"])
        text = ("The measured reason (the breakdown below, 1-thread random-offset loop): "
                "untraced, a call costs the loop %.0f ns of CPU; the syscall layer adds %+.0f ns "
                "per call in the caller's context, the default layers %+.0f ns%s; iotwin's "
                "consumer spends %.0f ns of CPU per call on reading %.0f ring bytes per call, on "
                "the same 2 shared cores. " % (
                    base or 0, added.get("syscall", 0), added.get("default", 0), floor,
                    _breakdown_field(bd, "default", "consumer_ns") or 0,
                    _breakdown_field(bd, "default", "ring_bytes") or 0))
        text += floor_versus_targets(base, added.get("bpftrace-count"))
    return text + ("What would close it: fewer nanoseconds in the per-call programs "
                   "(`iot_sys_enter`/`iot_sys_exit`, the BPF table below), a smaller ring record "
                   "for the common read/write case, a consumer that wakes less often, and a quiet "
                   "machine to measure on (with 2 threads on 2 cores the consumer and other "
                   "tenants take the loop's core)")


def summarize_replay(rep):
    if not rep:
        return ""
    lines = []
    f = rep.get("fast", {})
    if f.get("ratio_median") is not None:
        ok = f["ratio_median"] >= 0.95
        lines.append("Target (bench/replay/replay_bench.cc): fast replay >= 0.95x fio's IOPS: %s "
                     "(%.2fx)." % ("met" if ok else "**missed**", f["ratio_median"]))
    for r in rep.get("pacing", []):
        if r["rate"] == 10000:
            s = r["iotwin_self"]
            ok = s["p50"] < 20 and s["p99"] < 200
            lines.append("Target at 10k ops/s (replay_bench.cc, after Buttress's 100 µs at 10k "
                         "IOPS, Anderson et al., FAST'04): self-reported p50 < 20 µs and p99 < 200 µs: %s "
                         "(p50 %.1f µs, p99 %.1f µs)%s." % (
                             "met" if ok else "**missed**", s["p50"], s["p99"],
                             "" if ok else ": on a loaded 2-core VM a replay thread that sleeps "
                             "waits for a core; an idle machine (or a pinned, isolated CPU) fixes it"))
    fio_rates = [(r["rate"], r["fio_iops"] / r["rate"]) for r in rep.get("pacing", [])
                 if r.get("fio_iops")]
    if fio_rates:
        lines.append(
            "fio's paced iolog replay reached %s of the requested rate (its own IOPS, under "
            "`iotwin record`), so its lateness grows through the run (the \"end\" column): fio "
            "paces by gaps (wait = recorded gap - time since the last issue - the previous "
            "overshoot), and when an overshoot is larger than the next gap it issues at once and "
            "*forgets* the rest of the overshoot (`iolog_delay` resets `time_offset`), so every "
            "late wake-up on this loaded machine is lost for good (fio iolog.c, issue #1537). "
            "iotwin's absolute schedule catches up instead: its end error stays small and the "
            "achieved rate matches the trace." % ", ".join(
                "%.0f%% at %dk" % (100 * f, r // 1000) for r, f in fio_rates))
    return "\n".join(lines) + "\n" if lines else ""


def summarize_analysis(an, inprocess=None):
    if not an:
        return ""
    rep = [r for r in an["rows"] if r["name"] == "report (text)"]
    if not rep or not rep[0]["events_per_cpu_s"]:
        return ""
    single = rep[0]["events_per_cpu_s"] / 1e6
    # The verdict gives the median of the alternated runs and their best: one run on this shared
    # VM can take 50% more CPU than the median when other tenants load it, and interference only
    # ever adds CPU time, so the best run is the closest to the report's own cost. Older sections
    # (before the alternation) have only the single run.
    packed = an.get("codec", {}).get("packed", {})
    runs = len(packed.get("runs", []))
    v = packed["events_per_cpu_s"] / 1e6 if packed.get("events_per_cpu_s") else single
    best = None
    if runs > 1 and an.get("events"):
        best = an["events"] / min(r["cpu_s"] for r in packed["runs"]) / 1e6
    consume = None
    report_in_process = None
    for b in (inprocess or {}).get("gbench", {}).get("benchmarks", []):
        if b.get("name") == "BM_AnalyzerConsume" and b.get("items_per_second"):
            consume = b["items_per_second"] / 1e6
        if b.get("name") == "BM_TextReportFromFile" and b.get("items_per_second"):
            report_in_process = b["items_per_second"] / 1e6
    above = lambda x: "above" if x >= 10 else "**below**"
    text = ("Target (docs/report.md): 10 M events/s per core for the default text "
            "report. On the synthetic training-like mix, `iotwin report` ran at %.2f M events "
            "per CPU-second%s (%s 10 M)" % (
                v, " (median of %d alternated runs; the single timed run: %.2f M)" % (runs, single)
                if runs > 1 else "", above(v)))
    if best:
        text += (", %.2f M in the best of those runs (%s 10 M)" % (best, above(best)))
    if report_in_process:
        text += ("; in one process (`BM_TextReportFromFile`, section 6: the same mix read from a "
                 "file, analysed and rendered) at %.1f M/s (%s 10 M)" %
                 (report_in_process, above(report_in_process)))
    recorded = an.get("recorded")
    if recorded and recorded.get("events_per_cpu_s"):
        r = recorded["events_per_cpu_s"] / 1e6
        text += ("; on a recorded page-cached fio trace at %.2f M (%s 10 M)" %
                 (r, above(r)))
    if consume:
        text += ("; the analysis alone (`BM_AnalyzerConsume`, section 6) at %.1f M/s" % consume)
    text += "."
    reader = None
    for b in (inprocess or {}).get("gbench", {}).get("benchmarks", []):
        if b.get("name") == "BM_ReadTraceFile" and b.get("items_per_second"):
            reader = b["items_per_second"] / 1e6
    if v < 10:
        text += (" On the synthetic mix the reading and the analysis each take about half: "
                 "zstd decompression of its high-entropy records (random offsets and "
                 "durations, 8 interleaved threads) is the largest single cost "
                 "(docs/report.md, Performance)")
        if reader:
            text += ("; the reader alone (`BM_ReadTraceFile`: read, XXH3 check, decompression, "
                     "unpacking, framing) runs at %.1f M/s" % reader)
        text += (". Decompressing on a second thread would shorten the wall time, not the CPU "
                 "time.")
    text += " Peak RSS stays flat (streaming), whatever the trace size."
    return text + "\n"


if __name__ == "__main__":
    main()
