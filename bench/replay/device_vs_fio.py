#!/usr/bin/env python3
"""Device-level replay in original pacing: `iotwin replay --layer block` against fio's iolog replay
of the same request stream (docs/benchmarks.md "Device replay").

Trace: N block requests (4 KiB, 70% reads, random 4 KiB-aligned offsets in 64 MiB) issued evenly
at RATE requests/s, each completing 20-120 us after its issue (so 1-2 are in flight at a time),
written as blkparse text (D and C events) and imported (`iotwin import --format blkparse`).
Target: a raw loop device over a preallocated image in --dir (not tmpfs).

Replayers, alternating, `runs` times each:
  * `iotwin replay T --layer block --device LOOP --allow-device --pace original --json -q`,
    once on its own (its self-reported `schedule_error_ns`: submission - due) and once under
    `iotwin record --no-memory`;
  * fio on `iotwin export T --fio D --layer block --fio-device MAJ:MIN=LOOP` (read_iolog, libaio,
    direct=1, iodepth = the recorded maximum), under `iotwin record --no-memory`;
  * `iotwin replay ... --rt-priority 10` under `iotwin record --no-memory` (full runs, or --rt).
Measured from outside, the same way for both: the issue (D) time of each request on the loop
device in the capture; error_i = (t_i - s_i) - min_j (t_j - s_j), s the scheduled times
(replay_vs_fio.external_error: neither replayer's clock origin is visible from outside, so the
earliest request is placed on time). Achieved rate = (N - 1) / (last issue - first issue).
Queue depth: `iotwin compare --layer block T CAPTURE --json`, the KS distances of the queue depth
each request found (dev-qd-ks) and of the time-weighted depth (dev-qd-time-ks).
"""
import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay_vs_fio as rvf  # noqa: E402  (sh, must, parse_json, pct, external_error)

IMAGE_BYTES = 128 << 20
SPAN_BLOCKS = (64 << 20) // 4096
SRC_DEV = "8,0"  # the recorded device's number in the synthetic trace


def blkparse_text(n, rate, seed=7):
    """blkparse lines of n requests at `rate`/s and their completions; returns (text, schedule):
    the schedule is each request's (due ns from the first, sector), in issue order."""
    rng = random.Random(seed)
    events, sched, recent = [], [], []
    for i in range(n):
        t = i * 1_000_000_000 // rate
        blk = rng.randrange(SPAN_BLOCKS)
        while blk in recent:  # no two requests in flight on the same sector
            blk = rng.randrange(SPAN_BLOCKS)
        sched.append((t, blk * 8))
        recent = (recent + [blk])[-8:]
        rw = "R" if rng.random() < 0.7 else "W"
        done = t + rng.randrange(20_000, 120_000)
        events.append((t, "D", rw, blk * 8))
        events.append((done, "C", rw, blk * 8))
    events.sort()
    lines = ["%5s %4d %8d %5d.%09d %5d  %s %3s %d + 8 [%s]" %
             (SRC_DEV, 0, k + 1, ts // 10**9, ts % 10**9, 4242 if act == "D" else 0, act, rw,
              sector, "synth" if act == "D" else "0")
             for k, (ts, act, rw, sector) in enumerate(events)]
    return "\n".join(lines) + "\n", sched


def pair_by_sector(issue, sched):
    """(issue ns, due ns) of each scheduled request found in the capture, in schedule order:
    the k-th issue of a sector is the k-th request due at that sector (a replayer issues in
    order). Requests not found are left out."""
    seen = {}
    for ts, sector in issue:
        seen.setdefault(sector, []).append(ts)
    used, pairs = {}, []
    for due, sector in sched:
        k = used.get(sector, 0)
        times = seen.get(sector, [])
        if k < len(times):
            pairs.append((times[k], due))
            used[sector] = k + 1
    return pairs


class LoopDevice:
    def __init__(self, directory):
        self.image = os.path.join(directory, "loop.img")
        with open(self.image, "wb") as f:  # written through: no extent is allocated mid-run
            chunk = b"\0" * (1 << 20)
            for _ in range(IMAGE_BYTES >> 20):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        out, _, _ = rvf.must(["losetup", "-f", "--show", self.image], "losetup")
        self.dev = out.strip()
        st = os.stat(self.dev)
        self.majmin = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        self.dev_t = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)

    def close(self):
        if self.dev:
            rvf.sh(["losetup", "-d", self.dev])
            self.dev = None


class DeviceBench:
    def __init__(self, bench, loop):
        self.b = bench
        self.iotwin = bench.iotwin
        self.tmp = bench.tmp
        self.loop = loop

    def make_trace(self, n, rate):
        text, sched = blkparse_text(n, rate)
        src = os.path.join(self.tmp, "synth.blkparse")
        open(src, "w").write(text)
        trace = os.path.join(self.tmp, "synth.iotwin")
        rvf.must([self.iotwin, "import", "--format", "blkparse", src, "-o", trace], "import")
        os.unlink(src)
        return trace, sched

    def export_fio(self, trace):
        d = os.path.join(self.tmp, "fio")
        shutil.rmtree(d, ignore_errors=True)
        rvf.must([self.iotwin, "export", trace, "--fio", d, "--layer", "block", "--fio-device",
                  SRC_DEV.replace(",", ":") + "=" + self.loop.dev], "export --fio --layer block")
        return os.path.join(d, "replay.fio")

    def recorded(self, cmd, capture):
        if not capture:
            return cmd
        return [self.iotwin, "record", "-o", capture, "--no-status", "--no-memory", "--"] + cmd

    def iotwin_replay(self, trace, capture=None, extra=(), pace="original"):
        cmd = [self.iotwin, "replay", trace, "--layer", "block", "--device", self.loop.dev,
               "--allow-device", "--pace", pace, "--json", "-q"] + list(extra)
        out, _, _ = rvf.must(self.recorded(cmd, capture), "iotwin replay --layer block")
        return rvf.parse_json(out)

    def fio(self, job, capture):
        out, _, _ = rvf.must(self.recorded(["fio", "--output-format=json", job], capture),
                             "fio iolog replay")
        return rvf.parse_json(out)

    def issue_times(self, capture):
        """(issue ns, sector) of the 4 KiB pieces of the requests issued (D) on the loop device
        in a capture, in time order: a request the block layer merged from several is issued
        once for all of them."""
        d = os.path.join(self.tmp, "csv")
        shutil.rmtree(d, ignore_errors=True)
        rvf.must([self.iotwin, "export", capture, "--csv", d], "export --csv")
        ts = []
        with open(os.path.join(d, "block.csv"), newline="") as f:
            for row in csv.DictReader(f):
                if row.get("phase") in ("issue", "D") and int(row["dev"]) == self.loop.dev_t:
                    sector = int(row["sector"])
                    for k in range(max(1, int(row["nr_sector"]) // 8)):
                        ts.append((int(row["ts_ns"]), sector + 8 * k))
        shutil.rmtree(d, ignore_errors=True)
        return sorted(ts)

    def queue_depth(self, trace, capture):
        """KS distances of the queue depth, recorded vs replayed (iotwin compare --layer block)."""
        _, out, _, _ = rvf.sh([self.iotwin, "compare", "--layer", "block", trace, capture, "--json"])
        d = rvf.parse_json(out) or {}
        return {m["name"]: m["value"] for m in d.get("measures", [])
                if m.get("name") in ("dev-qd-ks", "dev-qd-time-ks") and m.get("value") is not None}

    def measured(self, trace, sched, capture, what):
        """Schedule error, rate and queue depth of one recorded replay."""
        issue = self.issue_times(capture)
        row = {"what": what, "issued": len(issue)}
        pairs = pair_by_sector(issue, sched)
        row["unmatched"] = len(sched) - len(pairs)
        row["error_us"] = rvf.external_error([t for t, _ in pairs], [s for _, s in pairs])
        if len(issue) > 1:
            row["rate"] = (len(issue) - 1) / ((issue[-1][0] - issue[0][0]) / 1e9)
        row.update(self.queue_depth(trace, capture))
        os.unlink(capture)
        return row


def run(args):
    seconds = args.seconds or (0.3 if args.smoke else 3.0)
    runs = args.runs or (1 if args.smoke else 3)
    n = int(args.rate * seconds)
    b = rvf.Bench(args)
    loop = None
    results = {"rate": args.rate, "requests": n, "seconds": seconds, "runs": []}
    try:
        loop = LoopDevice(b.tmp)
        db = DeviceBench(b, loop)
        trace, sched = db.make_trace(n, args.rate)
        job = db.export_fio(trace)
        db.iotwin_replay(trace, pace="fast")  # the image's pages into the page cache
        results["load_start"] = os.getloadavg()[0]
        cap = os.path.join(b.tmp, "cap.iotwin")
        for k in range(runs):
            own = db.iotwin_replay(trace)
            e = own["schedule_error_ns"]
            row = {"run": k, "own_us": {q: e[q] / 1000.0 for q in ("p50", "p99", "max")},
                   "own_deeper": own.get("deeper_than_recorded"),
                   "own_wake_late_us": {q: own["wake_late_ns"][q] / 1000.0 for q in ("p50", "p99")}
                   if "wake_late_ns" in own else None,
                   "own_rate": own["ops"] / own["duration_s"] if own.get("duration_s") else None}
            db.iotwin_replay(trace, cap)
            row["iotwin"] = db.measured(trace, sched, cap, "iotwin")
            db.fio(job, cap)
            row["fio"] = db.measured(trace, sched, cap, "fio")
            if args.rt:
                db.iotwin_replay(trace, cap, ["--rt-priority", "10"])
                row["iotwin_rt"] = db.measured(trace, sched, cap, "iotwin --rt-priority 10")
            results["runs"].append(row)
            print("device run %d: %s" % (k, json.dumps(row)), file=sys.stderr)
        results["load_end"] = os.getloadavg()[0]
    finally:
        if loop:
            loop.close()
        shutil.rmtree(b.tmp, ignore_errors=True)
    return results


def us(v):
    return "-" if v is None else ("%.0f" % v if v >= 100 else "%.1f" % v)


def series(rows, get):
    vals = [get(r) for r in rows]
    return ", ".join(us(v) for v in vals)


def markdown(res):
    rows = res["runs"]
    lines = []
    p = lines.append
    p("**Original pacing on a loop device**: %d requests (4 KiB, 70%% reads, random offsets) at "
      "%d requests/s, 1-2 in flight as recorded; %d run%s of each replayer, alternating (load "
      "%.1f at start, %.1f at end). Schedule error = issue - scheduled time (µs), one figure per "
      "run:" % (res["requests"], res["rate"], len(rows), "" if len(rows) == 1 else "s",
                res.get("load_start", 0), res.get("load_end", 0)))
    p("")
    p("| replayer | p50 | p99 | end | requests/s | dev-qd-ks | dev-qd-time-ks | not found |")
    p("|---|---|---|---|---|---|---|---|")
    p("| iotwin, own measure (submission - due) | %s | %s | - | %s | - | - | - |" % (
        series(rows, lambda r: r["own_us"]["p50"]), series(rows, lambda r: r["own_us"]["p99"]),
        ", ".join("%.0f" % r["own_rate"] if r.get("own_rate") else "-" for r in rows)))
    keys = [("iotwin", "iotwin, measured"), ("fio", "fio read_iolog, measured")]
    if rows and "iotwin_rt" in rows[0]:
        keys.append(("iotwin_rt", "iotwin `--rt-priority 10`, measured"))
    for key, name in keys:
        def err(q):
            return lambda r: (r[key]["error_us"] or {}).get(q)
        p("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, series(rows, err("p50")), series(rows, err("p99")), series(rows, err("end")),
            ", ".join("%.0f" % r[key]["rate"] if r[key].get("rate") else "-" for r in rows),
            ", ".join("%.3f" % r[key]["dev-qd-ks"] if "dev-qd-ks" in r[key] else "-" for r in rows),
            ", ".join("%.3f" % r[key]["dev-qd-time-ks"] if "dev-qd-time-ks" in r[key] else "-"
                      for r in rows),
            ", ".join(str(r[key]["unmatched"]) for r in rows)))
    p("")
    p("\"measured\": the replayer runs under `iotwin record --no-memory`; issue time = the "
      "request's block issue (D) timestamp on the loop device; the schedule's origin is placed "
      "where the earliest request is exactly on time; \"end\" = the last request's error. "
      "Requests are found in the capture by sector, in order (a request the block layer merged "
      "from two counts as issued for both); \"not found\": scheduled requests without an issue. "
      "dev-qd-ks / dev-qd-time-ks: `iotwin compare --layer block` KS distances of the queue "
      "depth each request found and of the time-weighted depth, recorded vs replayed.")
    p("")
    p("```")
    p("# trace: synthetic blkparse text (D and C events) imported; LOOP: a loop device over a "
      "preallocated 128 MiB image")
    p("iotwin import --format blkparse synth.blkparse -o T.iotwin")
    p("iotwin replay T.iotwin --layer block --device LOOP --allow-device --pace original --json -q")
    p("iotwin export T.iotwin --fio D --layer block --fio-device 8:0=LOOP")
    p("fio --output-format=json D/replay.fio")
    p("iotwin record -o CAP --no-status --no-memory -- <either replayer>   # measured rows")
    p("iotwin compare --layer block T.iotwin CAP --json")
    p("```")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(rvf.ROOT, "build"))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--dir", default="/var/tmp", help="scratch directory (not tmpfs)")
    ap.add_argument("--rate", type=int, default=10000, help="requests/s (default 10000)")
    ap.add_argument("--seconds", type=float, help="length of the trace; default 3, smoke 0.3")
    ap.add_argument("--runs", type=int, help="runs of each replayer; default 3, smoke 1")
    ap.add_argument("--rt", action="store_true",
                    help="also replay with --rt-priority 10 (always in full runs)")
    ap.add_argument("--md", help="write the markdown section here (default stdout)")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("device_vs_fio: needs root (losetup, iotwin record)")
    for tool in ("fio", "losetup"):
        if not shutil.which(tool):
            sys.exit("device_vs_fio: %s is not installed" % tool)
    args.rt = args.rt or not args.smoke
    res = run(args)
    md = markdown(res)
    if args.md:
        open(args.md, "w").write(md)
    else:
        print(md)
    if args.json:
        json.dump(res, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
