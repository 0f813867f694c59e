#!/usr/bin/env python3
"""`iotwin replay` against fio replaying the same trace as an iolog (docs/benchmarks.md "Replay").

Traces: one thread, N random 4 KiB preads of one 64 MiB file, evenly spaced at a given rate,
made by writing a synthetic fio iolog v3 and importing it (`iotwin import --format fio-iolog`).
fio gets that trace back as `iotwin export --fio DIR` (iolog v3 + job file), so both replayers
replay the very same operations. Page cache warm in both (per-operation cost, not the disk).

1. Fast: `iotwin replay --pace fast` IOPS vs `fio DIR/replay.fio` with replay_no_stall=1, each
   as the replayer reports it (iotwin: pread64 count / duration; fio: the replay job's read
   IOPS), alternating runs, median of the ratios.
2. Original pacing at 1k/10k/50k ops/s: schedule error = actual issue time - scheduled time.
   * iotwin self-reported: `iotwin replay --pace original --json` schedule_error_ns (issue time
     measured just before the call, due time from the absolute schedule).
   * measured from outside, the same way for both: the replayer runs under `iotwin record`;
     the issue time is each pread64's entry timestamp in that capture; error_i = (t_i - s_i) -
     min_j (t_j - s_j) with s the scheduled times (the origin is placed where the earliest read
     is exactly on time, because fio starts its clock at job start). Costs the traced process
     about 1 us per call, alike for both.
   fio paces an iolog v3 by gaps with drift compensation; iotwin `original` by an absolute
   schedule, so the last operation's error ("end drift") shows accumulated lateness.
"""
import argparse
import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILE_BYTES = 64 << 20
DATA_PATH = "/bench/replay/data.bin"


def sh(cmd, timeout=600):
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, errors="replace")
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def must(cmd, what):
    rc, out, err, wall = sh(cmd)
    if rc != 0:
        sys.exit("replay_vs_fio: %s failed (rc %d): %s\n  %s" % (what, rc, " ".join(cmd),
                                                                 (err or out).strip()[-800:]))
    return out, err, wall


def parse_json(text):
    i = text.find("{")
    return json.loads(text[i:]) if i >= 0 else None


def pct(vals, q):
    if not vals:
        return None
    s = sorted(vals)
    return s[min(len(s) - 1, int(q * len(s)))]


class Bench:
    def __init__(self, args):
        self.args = args
        self.iotwin = os.path.join(args.build, "src/cli/iotwin")
        self.tmp = tempfile.mkdtemp(prefix="iotwin-replay-bench-", dir=args.dir)

    def make_trace(self, name, n, rate):
        """An iolog v3 of n random 4 KiB reads at `rate` ops/s imported as an iotwin trace.
        Returns (trace path, scheduled times in ns relative to the first read)."""
        rng = random.Random(12345)
        iolog = os.path.join(self.tmp, name + ".in.iolog")
        sched = []
        with open(iolog, "w") as f:
            f.write("fio version 3 iolog\n0 %s add\n0 %s open\n" % (DATA_PATH, DATA_PATH))
            for i in range(n):
                t_us = 10 + i * 1_000_000 // rate
                sched.append((t_us - 10) * 1000)
                f.write("%d %s read %d 4096\n" % (t_us, DATA_PATH,
                                                 rng.randrange(FILE_BYTES // 4096) * 4096))
            f.write("%d %s close\n" % (10 + n * 1_000_000 // rate, DATA_PATH))
        trace = os.path.join(self.tmp, name + ".iotwin")
        must([self.iotwin, "import", "--format", "fio-iolog", iolog, "-o", trace], "import")
        return trace, sched

    def export_fio(self, trace, name, no_stall):
        d = os.path.join(self.tmp, name + ".fio")
        shutil.rmtree(d, ignore_errors=True)
        must([self.iotwin, "export", trace, "--fio", d, "--fio-root",
              os.path.join(self.tmp, "fio-files")], "export --fio")
        job = os.path.join(d, "replay.fio")
        if no_stall:
            text = open(job).read()
            text = text.replace("[global]\n", "[global]\nreplay_no_stall=1\n", 1)
            if "replay_no_stall=1" not in text:
                text = "[global]\nreplay_no_stall=1\n" + text
            open(job, "w").write(text)
        return job

    def iotwin_replay(self, trace, pace, record=None):
        root = os.path.join(self.tmp, "root-" + os.path.basename(trace))  # one sandbox per trace
        cmd = [self.iotwin, "replay", trace, "--root", root, "--pace", pace, "--cache",
               "warm", "--json", "-q"]
        if record:
            cmd = [self.iotwin, "record", "-o", record, "--no-status", "--no-memory", "--"] + cmd
        out, _, _ = must(cmd, "iotwin replay")
        return parse_json(out)

    def fio(self, job, record=None):
        cmd = ["fio", "--output-format=json", job]
        if record:
            cmd = [self.iotwin, "record", "-o", record, "--no-status", "--no-memory", "--"] + cmd
        out, _, _ = must(cmd, "fio replay")
        d = parse_json(out)
        best = None
        for j in d.get("jobs", []):
            if j["read"]["total_ios"] > 0 and (best is None or j["read"]["total_ios"] > best["read"]["total_ios"]):
                best = j
        return best

    def issue_times(self, capture, n):
        """Entry timestamps of the last n 4 KiB pread64 calls of the busiest thread."""
        d = os.path.join(self.tmp, "csv")
        shutil.rmtree(d, ignore_errors=True)
        must([self.iotwin, "export", capture, "--csv", d], "export --csv")
        by_tid = {}
        with open(os.path.join(d, "syscalls.csv"), newline="") as f:
            for row in csv.DictReader(f):
                if row.get("op") == "pread64" and row.get("length") == "4096" and row.get("ret") == "4096":
                    by_tid.setdefault(row["tid"], []).append(int(row["ts_ns"]))
        shutil.rmtree(d, ignore_errors=True)
        if not by_tid:
            return []
        ts = max(by_tid.values(), key=len)
        return sorted(ts)[-n:]


def external_error(issue, sched):
    """Lateness in us of each read against the schedule, as (p50, p99, max, end), or None when
    the counts differ. The schedule's origin is not observable from outside (fio starts its
    clock at job start), so it is placed where the earliest read has error 0: neither replayer
    ever issues before its due time, so this is the best case for both."""
    if len(issue) != len(sched) or not issue:
        return None
    off = [t - s for t, s in zip(issue, sched)]
    origin = min(off)
    err = [(o - origin) / 1000.0 for o in off]
    return {"p50": pct(err, 0.5), "p99": pct(err, 0.99), "max": max(err), "end": err[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--dir", default="/var/tmp", help="scratch directory (not tmpfs)")
    ap.add_argument("--seconds", type=float, help="length of each paced trace; default 3, smoke 0.2")
    ap.add_argument("--fast-ops", type=int, help="reads in the fast trace; default 200000, smoke 5000")
    ap.add_argument("--pairs", type=int, help="alternating fast runs; default 3, smoke 1")
    ap.add_argument("--md", help="write the markdown section here (default stdout)")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    seconds = args.seconds or (0.2 if args.smoke else 3.0)
    fast_ops = args.fast_ops or (5000 if args.smoke else 200000)
    pairs = args.pairs or (1 if args.smoke else 3)
    if os.geteuid() != 0:
        sys.exit("replay_vs_fio: needs root (iotwin record measures the issue times)")
    b = Bench(args)
    results = {"fast": {}, "pacing": []}
    try:
        # ---- fast ----
        trace, _ = b.make_trace("fast", fast_ops, 1_000_000)
        job = b.export_fio(trace, "fast", no_stall=True)
        b.iotwin_replay(trace, "fast")  # prepare + warm both
        b.fio(job)
        it, fi = [], []
        for _ in range(pairs):
            s = b.iotwin_replay(trace, "fast")
            it.append(s["per_op"]["pread64"]["count"] / s["duration_s"])
            fi.append(b.fio(job)["read"]["iops"])
        ratios = [a / f for a, f in zip(it, fi) if f]
        results["fast"] = {"ops": fast_ops, "iotwin_iops": it, "fio_iops": fi,
                           "ratio_median": statistics.median(ratios) if ratios else None}
        print("fast: iotwin %s fio %s" % (it, fi), file=sys.stderr)

        # ---- original pacing ----
        for rate in ((10000,) if args.smoke else (1000, 10000, 50000)):
            n = max(50, int(rate * seconds))
            trace, sched = b.make_trace("pace%d" % rate, n, rate)
            job = b.export_fio(trace, "pace%d" % rate, no_stall=False)
            self_rep = b.iotwin_replay(trace, "original")
            e = self_rep["schedule_error_ns"]
            cap = os.path.join(b.tmp, "cap.iotwin")
            b.iotwin_replay(trace, "original", record=cap)
            ext_iotwin = external_error(b.issue_times(cap, n), sched)
            fj = b.fio(job, record=cap)
            ext_fio = external_error(b.issue_times(cap, n), sched)
            os.unlink(cap)
            row = {"rate": rate, "ops": n,
                   "iotwin_self": {k: e[k] / 1000.0 for k in ("p50", "p99", "max")},
                   "iotwin_self_achieved": n / self_rep["duration_s"] if self_rep.get("duration_s") else None,
                   "iotwin_external": ext_iotwin, "fio_external": ext_fio,
                   "fio_iops": fj["read"]["iops"] if fj else None}
            results["pacing"].append(row)
            print("pace %d: %s" % (rate, json.dumps(row)), file=sys.stderr)
    finally:
        shutil.rmtree(b.tmp, ignore_errors=True)

    def us(v):
        return "-" if v is None else ("%.1f" % v)

    lines = []
    p = lines.append
    f = results["fast"]
    p("**Fast replay** of %d random 4 KiB preads (page cache warm), %d alternating run%s:" %
      (fast_ops, pairs, "" if pairs == 1 else "s"))
    p("")
    p("| replayer | IOPS (median) | ratio to fio (median of pairs) |")
    p("|---|---|---|")
    p("| `iotwin replay --pace fast` | %.0f | %s |" % (statistics.median(f["iotwin_iops"]),
                                                       "%.2f" % f["ratio_median"] if f["ratio_median"] else "-"))
    p("| fio, exported iolog, `replay_no_stall=1` | %.0f | 1 |" % statistics.median(f["fio_iops"]))
    p("")
    p("**Schedule error** (actual - scheduled issue time, µs) of paced replay, %.1f s per rate, "
      "one thread:" % seconds)
    p("")
    p("| rate (ops/s) | iotwin self-reported p50 / p99 / max | iotwin measured p50 / p99 / end | "
      "fio iolog measured p50 / p99 / end | achieved ops/s: iotwin / fio |")
    p("|---|---|---|---|---|")
    for r in results["pacing"]:
        s, ie, fe = r["iotwin_self"], r["iotwin_external"], r["fio_external"]
        p("| %d | %s / %s / %s | %s | %s | %s / %s |" % (
            r["rate"], us(s["p50"]), us(s["p99"]), us(s["max"]),
            "%s / %s / %s" % (us(ie["p50"]), us(ie["p99"]), us(ie["end"])) if ie else "count mismatch",
            "%s / %s / %s" % (us(fe["p50"]), us(fe["p99"]), us(fe["end"])) if fe else "count mismatch",
            "%.0f" % r["iotwin_self_achieved"] if r.get("iotwin_self_achieved") else "-",
            "%.0f" % r["fio_iops"] if r.get("fio_iops") else "-"))
    p("")
    p("\"self-reported\": `iotwin replay --json` `schedule_error_ns` (absolute schedule from the "
      "replay start). \"measured\": both replayers run under `iotwin record --no-memory`; issue "
      "time = pread64 entry timestamp, schedule origin placed where the earliest read is exactly "
      "on time (fio's clock origin is not visible from outside); \"end\" = error of the last "
      "read (accumulated drift). Rows with \"count mismatch\" lost or gained reads in the "
      "capture.")
    p("")
    p("```")
    p("# trace: a synthetic iolog v3 (N reads at RATE, 4 KiB, random offsets in 64 MiB) imported")
    p("iotwin import --format fio-iolog IN.iolog -o T.iotwin")
    p("iotwin export T.iotwin --fio D --fio-root FILES   # fast: replay_no_stall=1 added to D/replay.fio [global]")
    p("iotwin replay T.iotwin --root R --pace fast|original --cache warm --json -q")
    p("fio --output-format=json D/replay.fio")
    p("iotwin record -o CAP --no-status --no-memory -- <either replayer>   # measured columns")
    p("```")
    md = "\n".join(lines) + "\n"
    if args.md:
        open(args.md, "w").write(md)
    else:
        print(md)
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
