#!/usr/bin/env python3
"""The referee's own false-fail / false-pass table: how often `iotwin compare` passes what is
faithful and fails what is not.

False-fail cases (must PASS): two recordings of the same deterministic workload, a replay
against a second replay (original and gaps pacing), a trace against itself with a few ms of
wake-up jitter. False-pass cases (must FAIL on the measure meant to catch each): a replay
distorted by bench/referee/iotwin-distort (every call 10% slower, 5% of the data calls dropped,
two threads trading places, sizes changed, a 20 ms stall).

  bench/referee/run.py                 # writes docs/referee.md (needs root: iotwin record)
  bench/referee/run.py --repeat 1 --out /tmp/referee.md
  bench/referee/run.py --keep ...; bench/referee/run.py --reuse DIR   # compare the kept traces again
Environment: IOTWIN_BUILD_DIR (default <repo>/build).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("IOTWIN_BUILD_DIR", os.path.join(REPO, "build"))
IOTWIN = os.path.join(BUILD, "src", "cli", "iotwin")
WORKLOAD = os.path.join(BUILD, "workloads", "iotwin-workload")
DISTORT = os.path.join(BUILD, "bench", "referee", "iotwin-distort")

# Multi-second and paced by its own think time (--compute-us), so that two runs of it have the
# same timing; the I/O itself is buffered, 2 put and 2 get threads.
WORKLOAD_ARGS = ["kv-offload", "--io", "buffered", "--chunks", "64", "--gets", "1024",
                 "--threads", "2", "--compute-us", "4000", "--fsync"]

# name, what, expected verdict, the measures meant to catch it (any of them failing counts)
CASES = [
    ("two-recordings", "two recordings of the workload", "pass", []),
    ("replay-vs-replay-original", "replay vs second replay, pace original", "pass", []),
    ("replay-vs-replay-gaps", "replay vs second replay, pace gaps", "pass", []),
    ("jitter-5ms", "recording vs itself, each wake-up up to 5 ms late", "pass", []),
    ("slow-10pct", "replay with every call 10% slower (times and durations)", "fail",
     ["iops-rel-err", "throughput-rel-err"]),
    ("drop-5pct", "replay with 5% of the data calls dropped", "fail",
     ["seq-match", "op-count-rel-err", "bytes-rel-err"]),
    ("swap-threads", "replay with two threads trading places in time", "fail",
     ["thread-series-err"]),
    ("sizes-10pct", "replay with 10% of the data calls moving half the bytes", "fail",
     ["size-ks", "bytes-rel-err"]),
    ("stall-20ms", "replay with a 20 ms stall in the middle", "fail", ["stall-ms"]),
]
SHOWN = ["iops-rel-err", "iops-series-err", "thread-series-err", "stall-ms", "iat-ks"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def record(work, name):
    data = os.path.join(work, "data", name)
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(os.path.dirname(data), exist_ok=True)
    out = os.path.join(work, name + ".iotwin")
    run([IOTWIN, "record", "-o", out, "--no-status", "--", WORKLOAD] + WORKLOAD_ARGS + ["--dir", data])
    return out


def replay(work, trace, name, pace):
    sandbox = os.path.join(work, "sandbox", name)
    shutil.rmtree(sandbox, ignore_errors=True)
    os.makedirs(sandbox)
    out = os.path.join(work, name + ".iotwin")
    run([IOTWIN, "replay", trace, "--root", sandbox, "--pace", pace, "--quiet", "--record", out])
    shutil.rmtree(sandbox, ignore_errors=True)
    return out


def distort(work, trace, name, *spec):
    out = os.path.join(work, name + ".iotwin")
    run([DISTORT, trace, out] + [str(s) for s in spec])
    return out


def compare(a, b):
    p = subprocess.run([IOTWIN, "compare", a, b, "--json", "--no-progress"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"compare {a} {b}: {p.stderr.decode(errors='replace')}")
    return json.loads(p.stdout)


def bucket_series_err(cmp):
    """The series error as compare defined it before the cumulative curves: sum |a-b| / sum a
    over fixed time buckets (threshold 0.20), from the aligned series compare still reports."""
    t = cmp.get("timeseries") or {}
    a, b = t.get("original_ops") or [], t.get("replay_ops") or []
    n = max(len(a), len(b))
    a, b = a + [0] * (n - len(a)), b + [0] * (n - len(b))
    return sum(abs(x - y) for x, y in zip(a, b)) / max(1, sum(a))


def one_round(work, r, reuse):
    tag = f"r{r}"
    if reuse:
        path = lambda name: os.path.join(work, f"{tag}-{name}.iotwin")
        return compare_round(path("rec1"), path("rec2"), path("orig1"), path("orig2"), path("gaps1"),
                             path("gaps2"), lambda base, name, *spec: path(name))
    k1, k2 = record(work, f"{tag}-rec1"), record(work, f"{tag}-rec2")
    o1, o2 = replay(work, k1, f"{tag}-orig1", "original"), replay(work, k1, f"{tag}-orig2", "original")
    g1, g2 = replay(work, k1, f"{tag}-gaps1", "gaps"), replay(work, k1, f"{tag}-gaps2", "gaps")
    return compare_round(k1, k2, o1, o2, g1, g2,
                         lambda base, name, *spec: distort(work, base, f"{tag}-{name}", *spec), r)


def compare_round(k1, k2, o1, o2, g1, g2, distorted, r=0):
    pairs = {
        "two-recordings": (k1, k2),
        "replay-vs-replay-original": (o1, o2),
        "replay-vs-replay-gaps": (g1, g2),
        "jitter-5ms": (k1, distorted(k1, "jitter", "jitter", 5, r + 1)),
        "slow-10pct": (k1, distorted(o1, "slow", "slow", 1.1)),
        "drop-5pct": (k1, distorted(o1, "drop", "drop", 0.05)),
        "swap-threads": (k1, distorted(o1, "swap", "swap-threads")),
        "sizes-10pct": (k1, distorted(o1, "sizes", "sizes", 0.1)),
        "stall-20ms": (k1, distorted(o1, "stall", "stall", 20)),
    }
    return {name: compare(a, b) for name, (a, b) in pairs.items()}


def measure(cmp, name):
    for m in cmp.get("measures", []):
        if m["name"] == name:
            return m
    return None


def fmt_values(results, name):
    vals = [measure(c, name) for c in results]
    vals = [m for m in vals if m is not None]
    if not vals:
        return "—"
    lo, hi = min(m["value"] for m in vals), max(m["value"] for m in vals)
    mark = " ✗" if any(m["judged"] and not m["pass"] for m in vals) else ""
    text = f"{lo:.4g}" if lo == hi else f"{lo:.4g}–{hi:.4g}"
    return text + mark


def table(rounds):
    head = ("| case | expected | verdicts | correct | caught by the meant measure | failed measures | "
            + " | ".join(SHOWN) + " | bucket series err (old) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    totals = {"pass": [0, 0], "fail": [0, 0]}
    for name, what, expected, meant in CASES:
        results = [r[name] for r in rounds]
        verdicts = [c["verdict"] for c in results]
        correct = sum(1 for v in verdicts if v == expected)
        totals[expected][0] += correct
        totals[expected][1] += len(verdicts)
        caught = "—" if not meant else f"{sum(1 for c in results if set(meant) & set(c['failed']))}/{len(results)}"
        failed = sorted({f for c in results for f in c["failed"]})
        old = [bucket_series_err(c) for c in results]
        old_txt = f"{min(old):.3f}–{max(old):.3f}" + (" ✗" if max(old) > 0.20 else "")
        lines.append(f"| {name}: {what} | {expected.upper()} | "
                     + ", ".join(v.upper() for v in verdicts)
                     + f" | {correct}/{len(verdicts)} | {caught} | {', '.join(failed) or '—'} | "
                     + " | ".join(fmt_values(results, m) for m in SHOWN) + f" | {old_txt} |")
    ff = totals["pass"][1] - totals["pass"][0]
    fp = totals["fail"][1] - totals["fail"][0]
    summary = (f"False fails: {ff} of {totals['pass'][1]} faithful comparisons. "
               f"False passes: {fp} of {totals['fail'][1]} distorted comparisons.")
    return lines, summary


def notes(rounds):
    """Every comparison with the unexpected verdict, with compare's own likely cause."""
    out = []
    for i, r in enumerate(rounds):
        for name, _, expected, _ in CASES:
            c = r[name]
            if c["verdict"] == expected:
                continue
            cause = (c.get("causes") or [{}])[0]
            out.append(f"- round {i + 1}, {name}: {c['verdict'].upper()} ({', '.join(c['failed']) or 'no measure'}); "
                       f"compare's likely cause: {cause.get('cause', '—')} ({cause.get('evidence', '')})")
    return "\n".join(out) if out else "- none"


def main():
    global IOTWIN, WORKLOAD, DISTORT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (fresh recordings each)")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "referee.md"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--reuse", metavar="DIR",
                    help="compare again the traces a --keep run left in DIR (no recording)")
    args = ap.parse_args()
    for b in (IOTWIN, WORKLOAD, DISTORT):
        if not os.access(b, os.X_OK):
            sys.exit(f"run.py: {b} missing: build first (ninja -C build iotwin iotwin-workload iotwin-distort)")
    if os.geteuid() != 0 and not args.reuse:
        sys.exit("run.py: needs root (iotwin record)")
    work = args.reuse or tempfile.mkdtemp(prefix="iotwin-referee.", dir="/var/tmp")
    # Run copies of the binaries: a rebuild during the run must not swap them underneath it.
    bin_dir = os.path.join(work, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    IOTWIN, WORKLOAD, DISTORT = (shutil.copy2(b, bin_dir) for b in (IOTWIN, WORKLOAD, DISTORT))
    try:
        rounds = []
        for r in range(args.repeat):
            print(f"[referee] round {r + 1}/{args.repeat}", file=sys.stderr)
            rounds.append(one_round(work, r, bool(args.reuse)))
    finally:
        if args.keep or args.reuse:
            print(f"[referee] kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    lines, summary = table(rounds)
    with open(os.path.join(HERE, "referee.md.in")) as f:
        doc = f.read()
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"] * 3
    doc = (doc.replace("@TABLE@", "\n".join(lines))
              .replace("@NOTES@", notes(rounds))
              .replace("@SUMMARY@", summary)
              .replace("@ROUNDS@", str(args.repeat))
              .replace("@WORKLOAD@", "iotwin-workload " + " ".join(WORKLOAD_ARGS))
              .replace("@HOST@", f"{platform.node() and 'Linux ' + platform.release()}, "
                                 f"{os.cpu_count()} CPUs, load average {' '.join(load)} at the end")
              .replace("@DATE@", datetime.date.today().isoformat()))
    with open(args.out, "w") as f:
        f.write(doc)
    print(summary)
    print(f"[referee] wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
