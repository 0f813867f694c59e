#!/usr/bin/env python3
"""Turn bench/fidelity/run.sh's results (replay --json, compare --json, report --json) into the
markdown of docs/validation.md (or, with --smoke 1, a bare fragment with the scenario table).
With --check, judge instead what a replay must always get right (compare's seq-match 100%, no
result mismatch, record and replay exit 0), print one line per run and exit 1 on any miss, 77
when all ran clean but a real program was not installed (the ctest `fidelity` label)."""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import sys

SCENARIO_ORDER = ["kv-buffered", "kv-direct", "kv-uring", "model-mmap", "model-pread",
                  "model-direct-async", "mixed", "vector-libaio", "vector-uring",
                  # real programs (bench/fidelity/programs)
                  "sqlite-wal", "torch-checkpoint", "rocksdb-bench", "faiss-ivf",
                  # database servers (the same drivers, run.sh --set servers)
                  "mariadb-uring", "mariadb-simaio", "redis-aof"]
PACE_ORDER = ["original", "gaps", "fast"]
FAULT_OPS = {"page_fault", "page_fault_write"}
# Timing figures are a target only where the pacing promises them and the device does not set
# the pace (O_DIRECT and cold reads are device-bound: a second run on a different cache/disk
# state cannot promise the same rate). O_DIRECT scenarios by name; cold reads by what the
# original did (cold_reads below).
DEVICE_BOUND = {"kv-direct", "model-direct-async", "vector-libaio", "vector-uring",
                "mariadb-uring", "mariadb-simaio"}
# compare's per-query measures (where the original marks its queries), in table order.
QUERY_MEASURES = ["query-match", "query-hops-err", "hop-depth-err", "query-latency-p50-rel-err"]
# A run reads cold when the block layer carried at least this share of the bytes it read
# (read system calls plus mapped-file faults), per the original's report.
COLD_READ_SHARE = 0.9


def cold_reads(report):
    amp = (report or {}).get("amplification") or {}
    app = (amp.get("app_read_bytes") or 0) + (amp.get("fault_read_bytes") or 0)
    return app > 0 and (amp.get("block_read_bytes") or 0) >= COLD_READ_SHARE * app


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(path):
    """A one-line file run.sh leaves (a missing program, an exit status), or None."""
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def measures(cmp):
    return {m["name"]: m for m in (cmp or {}).get("measures", [])}


def fmt_pct(v, digits=1):
    return "—" if v is None else f"{100.0 * v:.{digits}f}%"


def fmt_num(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}"


def fmt_ns(v):
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.0f} µs"
    return f"{v:.0f} ns"


def mval(ms, name):
    m = ms.get(name)
    return None if m is None else m.get("value")


def judged_mark(ms, name):
    """value, plus a mark: '' ok, ' ✗' judged and failed, ' (nj)' reported, not judged."""
    m = ms.get(name)
    if m is None:
        return "—"
    text = fmt_pct(m.get("value"))
    if not m.get("judged"):
        return text + " (nj)"
    return text + ("" if m.get("pass") else " ✗")


def skipped_syscalls(rep):
    """System calls the replay deliberately did not issue (by reason), page touches excluded."""
    total = 0
    reasons = {}
    for reason, ops in ((rep or {}).get("skipped", {}).get("by_reason", {}) or {}).items():
        for op, n in ops.items():
            if op in FAULT_OPS:
                continue
            total += n
            reasons.setdefault(reason, {})[op] = n
    return total, reasons


def d2c_p50(report):
    """Median device service time (block D2C) of a report --json, or None without block data."""
    lat = (((report or {}).get("block") or {}).get("latency_ns") or {}).get("D2C") or {}
    return lat.get("p50") if lat.get("count") else None


def row_for(results, name, pace):
    tag = f"{name}.{pace}"
    rep = load(os.path.join(results, f"{tag}.replay.json"))
    cmp = load(os.path.join(results, f"{tag}.compare.json"))
    cmp_all = load(os.path.join(results, f"{tag}.compare-all.json"))
    summary = None
    try:
        with open(os.path.join(results, f"{name}.orig.summary")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    summary = json.loads(line)
    except (OSError, ValueError):
        pass
    ms = measures(cmp)
    threads = (cmp or {}).get("threads", {}) or {}
    orig_sc = ((cmp or {}).get("original") or {}).get("syscalls")
    repl_sc = ((cmp or {}).get("replay") or {}).get("syscalls")
    # compare's scope (storage calls it judged) when it has one
    scope = (cmp or {}).get("scope") or {}
    def compared(side, fallback):
        sc = scope.get(side) or {}
        return sc["calls"] - sc.get("excluded", 0) if "calls" in sc else fallback
    orig_calls = compared("original", orig_sc)
    repl_calls = compared("replay", repl_sc)
    seq_all = mval(measures(cmp_all), "seq-match") if cmp_all else None
    skipped, skipped_by = skipped_syscalls(rep)
    sched = (rep or {}).get("schedule_error_ns") or {}
    orig_report = load(os.path.join(results, f"{name}.orig.report.json"))
    return {
        "missing": read_text(os.path.join(results, f"{name}.missing")),
        "record_rc": read_text(os.path.join(results, f"{name}.orig.rc")),
        "replay_rc": read_text(os.path.join(results, f"{tag}.replay.rc")),
        "device_bound": name in DEVICE_BOUND or cold_reads(orig_report),
        "d2c_orig": d2c_p50(orig_report),
        "d2c_repl": d2c_p50(load(os.path.join(results, f"{tag}.report.json"))),
        "name": name, "pace": pace, "rep": rep, "cmp": cmp, "ms": ms, "summary": summary,
        "orig_sc": orig_sc, "repl_sc": repl_sc, "skipped": skipped, "skipped_by": skipped_by,
        "seq_all": seq_all,
        "orig_calls": orig_calls, "repl_calls": repl_calls, "has_scope": bool(scope),
        "sched_p50": sched.get("p50") if pace != "fast" and sched.get("count") else None,
        "sched_p99": sched.get("p99") if pace != "fast" and sched.get("count") else None,
        "mismatches": ((rep or {}).get("mismatches") or {}).get("total"),
        "mismatch_kinds": ((rep or {}).get("mismatches") or {}).get("by_kind"),
        "failed": (cmp or {}).get("failed", []),
        "verdict": (cmp or {}).get("verdict"),
        "threads": threads,
        "orig_span": ((cmp or {}).get("original") or {}).get("span_ns"),
        "repl_span": ((cmp or {}).get("replay") or {}).get("span_ns"),
    }


def scenario_table(rows):
    head = ("| scenario | pace | workload s | calls compared orig/replay | seq-match | seq-match, all calls | "
            "IOPS err | throughput err | size KS read / write | offset KS read / write | size, offset JS (worst) | "
            "iat KS (median orig / replay) | block req err | block bytes err | device D2C p50 orig / replay | "
            "sched err p50 / p99 | "
            "result mismatches | verdict |")
    sep = "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"
    out = [head, sep]
    for r in rows:
        ms = r["ms"]
        if r["missing"]:
            out.append(f"| {r['name']} | {r['pace']} | " + " | ".join(["—"] * 15) +
                       f" | not run: {r['missing']} |")
            continue
        if r["cmp"] is None:
            out.append(f"| {r['name']} | {r['pace']} | " + " | ".join(["—"] * 15) + " | no compare output |")
            continue
        # The generator reports its own run time; a real program's is the span of its calls.
        wl_s = (r["summary"] or {}).get("seconds")
        if wl_s is None and r["orig_span"]:
            wl_s = r["orig_span"] / 1e9
        dist = r["cmp"].get("distributions") or {}
        def dir_val(d, k):
            v = (dist.get(d) or {}).get(k)
            return "—" if v is None else fmt_num(v)
        size = f"{dir_val('read', 'size_ks')} / {dir_val('write', 'size_ks')}"
        off = f"{dir_val('read', 'offset_ks')} / {dir_val('write', 'offset_ks')}"
        js = f"{fmt_num(mval(ms, 'size-js'))}, {fmt_num(mval(ms, 'offset-js'))}"
        iat_m = ms.get("iat-ks") or {}
        iat = (f"{fmt_num(iat_m.get('value'))} ({fmt_ns(iat_m.get('original'))} / "
               f"{fmt_ns(iat_m.get('replay'))})") if iat_m else "—"
        blk_req = judged_mark(ms, "block-requests-rel-err") if "block-requests-rel-err" in ms else "—"
        blk_b = judged_mark(ms, "block-bytes-rel-err") if "block-bytes-rel-err" in ms else "—"
        d2c = ("—" if r["d2c_orig"] is None and r["d2c_repl"] is None
               else f"{fmt_ns(r['d2c_orig'])} / {fmt_ns(r['d2c_repl'])}")
        sched = "—" if r["sched_p50"] is None else f"{fmt_ns(r['sched_p50'])} / {fmt_ns(r['sched_p99'])}"
        verdict = r["verdict"] or "—"
        if r["failed"]:
            verdict += " (" + ", ".join(r["failed"]) + ")"
        out.append(
            f"| {r['name']} | {r['pace']} | {fmt_num(wl_s, 2)} | {r['orig_calls']}/{r['repl_calls']} | "
            f"{fmt_pct(mval(ms, 'seq-match'), 2)} | {fmt_pct(r['seq_all'], 2)} | "
            f"{judged_mark(ms, 'iops-rel-err')} | {judged_mark(ms, 'throughput-rel-err')} | {size} | {off} | "
            f"{js} | {iat} | {blk_req} | {blk_b} | {d2c} | {sched} | {r['mismatches']} | {verdict} |")
    return "\n".join(out)


def query_table(rows):
    """compare's per-query measures, for the runs whose original marks its queries."""
    head = ("| scenario | pace | queries | reads of queries found | dependent hops per query orig / replay | "
            "hops with another depth | query latency p50 orig / paced orig / replay | p50 err | "
            "p90 orig / paced orig / replay | "
            "per-query verdict |")
    out = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows:
        q = (r["cmp"] or {}).get("queries")
        if not q:
            continue
        ms = r["ms"]
        lat = q.get("latency_ns") or {}
        o, p = lat.get("original") or {}, lat.get("replay") or {}
        # Original and gaps replays judge the latency against the original paced with the
        # replay's own read times (compare's paced_original); fast replays against the recorded.
        po = lat.get("paced_original") or {}
        hops = q.get("dependent_hops_per_query") or {}
        failed = [n for n in r["failed"] if n in QUERY_MEASURES]
        verdict = "pass" if not failed else "fail (" + ", ".join(failed) + ")"
        out.append(
            f"| {r['name']} | {r['pace']} | {q.get('queries')} | {q.get('reads_found')}/{q.get('reads')} | "
            f"{fmt_num(hops.get('original'), 2)} / {fmt_num(hops.get('replay'), 2)} | "
            f"{q.get('hops_with_other_depth')} of {q.get('hops')} | "
            f"{fmt_ns(o.get('p50'))} / {fmt_ns(po.get('p50'))} / {fmt_ns(p.get('p50'))} | "
            f"{judged_mark(ms, 'query-latency-p50-rel-err')} | "
            f"{fmt_ns(o.get('p90'))} / {fmt_ns(po.get('p90'))} / {fmt_ns(p.get('p90'))} | {verdict} |")
    return "\n".join(out) if len(out) > 2 else "(no run marks its queries)"


def op_diff(cmp):
    """Operation kinds whose counts differ: 'mmap 34→25'."""
    parts = []
    for o in (cmp or {}).get("ops", []) or []:
        if o.get("original") != o.get("replay"):
            parts.append(f"{o['op']} {o.get('original')}→{o.get('replay')}")
    return ", ".join(parts)


def misses(rows):
    out = []
    for r in rows:
        if r["missing"]:
            continue
        if r["record_rc"] or r["replay_rc"] or r["cmp"] is None:
            # A run that did not get as far as a comparison is a miss of its own.
            why = [f"record: {r['record_rc']}" if r["record_rc"] else "",
                   f"replay exited {r['replay_rc']}" if r["replay_rc"] else "",
                   "no compare output" if r["cmp"] is None else ""]
            out.append(f"- **{r['name']} / {r['pace']}**: " + "; ".join(w for w in why if w) + ".")
            if r["cmp"] is None:
                continue
        ms = r["ms"]
        items = []
        for name in r["failed"]:
            m = ms.get(name, {})
            items.append(f"`{name}` = {fmt_num(m.get('value'), 4)} (original {m.get('original')}, "
                         f"replay {m.get('replay')}, threshold {m.get('condition')} {m.get('threshold')})")
        timing_target = r["pace"] in ("original", "gaps") and not r["device_bound"]
        if not items and not r["skipped"]:
            continue
        line = f"- **{r['name']} / {r['pace']}**"
        if not timing_target and r["pace"] != "fast":
            line += " (device-bound: no timing target)"
        line += ": " + ("; ".join(items) if items else "no compare failure")
        # compare's own account of a FAIL: the likely causes with their evidence.
        causes = [c for c in ((r["cmp"] or {}).get("causes") or []) if isinstance(c, dict)]
        if items and causes:
            line += ". Measured cause (compare): " + "; also ".join(
                f"{c.get('cause')}: {c.get('evidence')}" for c in causes[:2])
        diff = op_diff(r["cmp"])
        if diff:
            line += f". Op counts differing: {diff}"
        if r["skipped_by"]:
            sk = "; ".join(f"{reason}: " + ", ".join(f"{op} {n}" for op, n in ops.items())
                           for reason, ops in r["skipped_by"].items())
            line += f". Not re-issued by replay (by design): {sk}"
        worst = [t for t in (r["threads"].get("rows") or []) if t.get("share", 1) < 1]
        if worst:
            line += ". Threads below 100%: " + ", ".join(
                f"{t['original_ops']}→{t['replay_ops']} ops, {fmt_pct(t['share'])}, first difference at op #{t['first_difference']}"
                for t in worst[:4])
        if r["mismatches"]:
            line += f". Result mismatches: {r['mismatch_kinds']}"
        out.append(line + ".")
    return "\n".join(out) if out else "None."


def key_figures(rows):
    def agg(pred, key):
        vals = [r[key] if key in r else mval(r["ms"], key) for r in rows if pred(r)]
        vals = [v for v in vals if v is not None]
        return (min(vals), max(vals)) if vals else (None, None)

    paced = lambda r: r["pace"] in ("original", "gaps") and not r["device_bound"]
    lines = []
    lo, hi = agg(lambda r: True, "seq-match")
    n100 = sum(1 for r in rows if mval(r["ms"], "seq-match") == 1.0)
    lines.append(f"- seq-match over the storage calls compare judges: {fmt_pct(lo, 2)} – {fmt_pct(hi, 2)} "
                 f"({n100} of {len(rows)} runs at 100%)")
    lo, hi = agg(lambda r: True, "seq_all")
    lines.append(f"- seq-match over all system calls (`--all-calls`, includes what replay skips by design): "
                 f"{fmt_pct(lo, 2)} – {fmt_pct(hi, 2)}")
    lo, hi = agg(paced, "iops-rel-err")
    def within(r, name):
        v = mval(r["ms"], name)
        return v is not None and v <= 0.05
    n_ok = sum(1 for r in rows if paced(r) and within(r, "iops-rel-err")
               and within(r, "throughput-rel-err"))
    n_all = sum(1 for r in rows if paced(r))
    lines.append(f"- IOPS relative error, original/gaps pacing, not device-bound: {fmt_pct(lo)} – {fmt_pct(hi)}; "
                 f"{n_ok} of {n_all} runs within 5% for both IOPS and throughput")
    lo, hi = agg(lambda r: True, "size-ks")
    lines.append(f"- size KS distance: {fmt_num(lo)} – {fmt_num(hi)}")
    lo, hi = agg(lambda r: True, "offset-ks")
    lines.append(f"- offset KS distance: {fmt_num(lo)} – {fmt_num(hi)}")
    total_mm = sum(r["mismatches"] or 0 for r in rows)
    lines.append(f"- result mismatches (replay's own check of every call's result): {total_mm} in total")
    return "\n".join(lines)


def block_summary(rep, loop_device=None):
    """Figures of a report --json: the data's device (the loop device when given, else the device
    with the most bytes) and the others, D2C over all devices, pread64 latency and size."""
    if not rep:
        return None
    blk = rep.get("block") or {}
    devices = blk.get("devices", []) or []
    main = None
    if loop_device:
        main = next((d for d in devices if d.get("name") == loop_device), None)
    if main is None and devices:
        main = max(devices, key=lambda d: (d.get("read") or {}).get("bytes", 0) + (d.get("write") or {}).get("bytes", 0))
    res = {}
    if main:
        rd = main.get("read") or {}
        res["dev"] = main.get("name")
        res["requests"] = main.get("requests")
        res["read_ops"], res["read_bytes"] = rd.get("ops"), rd.get("bytes")
        res["read_dom"] = (rd.get("dominant") or {}).get("size")
        res["seq_share"] = (rd.get("pattern") or {}).get("sequential_share")
        res["splits"], res["merges"] = main.get("splits"), main.get("merges")
    others = [d for d in devices if d is not main]
    res["others"] = ", ".join(f"{d.get('name')}: {d.get('requests')} req, {((d.get('read') or {}).get('bytes', 0) + (d.get('write') or {}).get('bytes', 0)) >> 20} MiB"
                              for d in others) or "none"
    lat = (blk.get("latency_ns") or {}).get("D2C") or {}
    res["d2c_p50"], res["d2c_p99"] = lat.get("p50"), lat.get("p99")
    for o in rep.get("ops", []) or []:
        if o.get("op") == "pread64":
            res["pread_p50"] = o["latency_ns"].get("p50")
            res["pread_p99"] = o["latency_ns"].get("p99")
    sizes = [x for x in rep.get("sizes", []) or [] if x.get("op") == "pread64"]
    if sizes:
        res["pread_dom"] = (sizes[0].get("dominant") or {}).get("size")
    return res


def fs_section(results, fs_note):
    src_path = os.path.join(results, "fs-source")
    if not os.path.exists(src_path):
        return f"File-system part {fs_note or 'not run'}."
    src = open(src_path).read().strip()
    cols = [("original (/var/tmp, ext4 on virtio)", load(os.path.join(results, f"{src}.orig.report.json")), None)]
    loop_names = {}
    for fs in ("ext4", "xfs"):
        dev = ""
        try:
            dev = open(os.path.join(results, f"fs-{fs}.device")).read().strip()
            # major:minor as the report names devices (7:N for loop devices)
            m = re.match(r"/dev/loop(\d+)$", dev)
            if m:
                loop_names[fs] = f"7:{m.group(1)}"
        except OSError:
            pass
        cols.append((f"replay on {fs} ({dev})", load(os.path.join(results, f"fs-{fs}.gaps.report.json")),
                     load(os.path.join(results, f"fs-{fs}.gaps.compare.json"))))
    head = "| figure | " + " | ".join(c[0] for c in cols) + " |"
    out = [f"Source trace: `{src}` (cold model load, pread64 of 128 KiB), replayed with `--pace gaps` and "
           f"`--map DATA=MOUNT/data` onto each file system.", "", head,
           "|" + "|".join(["---"] * (len(cols) + 1)) + "|"]
    sums = [block_summary(cols[0][1]) or {}]
    for fs, c in zip(("ext4", "xfs"), cols[1:]):
        sums.append(block_summary(c[1], loop_device=loop_names.get(fs)) or {})
    def row(label, fn):
        out.append(f"| {label} | " + " | ".join(fn(i) for i in range(len(cols))) + " |")
    def cmpm(i, name, digits=4):
        if cols[i][2] is None:
            return "—"
        return fmt_num(mval(measures(cols[i][2]), name), digits)
    row("seq-match vs original", lambda i: "(itself)" if i == 0 else fmt_pct(mval(measures(cols[i][2]), "seq-match"), 2))
    row("size KS / offset KS vs original", lambda i: "—" if i == 0 else f"{cmpm(i, 'size-ks')} / {cmpm(i, 'offset-ks')}")
    row("bytes rel. err vs original", lambda i: "—" if i == 0 else cmpm(i, "bytes-rel-err"))
    row("pread64 dominant size", lambda i: str(sums[i].get("pread_dom", "—")))
    row("data device (major:minor)", lambda i: str(sums[i].get("dev", "—")))
    row("its block read requests / bytes", lambda i: f"{sums[i].get('read_ops', '—')} / {sums[i].get('read_bytes', '—')}")
    row("its dominant request size", lambda i: str(sums[i].get("read_dom", "—")))
    row("its sequential share / splits / merges", lambda i: f"{fmt_pct(sums[i].get('seq_share'))} / {sums[i].get('splits', '—')} / {sums[i].get('merges', '—')}")
    row("other devices in the trace", lambda i: sums[i].get("others", "—"))
    row("block D2C p50 / p99 (all devices)", lambda i: f"{fmt_ns(sums[i].get('d2c_p50'))} / {fmt_ns(sums[i].get('d2c_p99'))}")
    row("pread64 latency p50 / p99", lambda i: f"{fmt_ns(sums[i].get('pread_p50'))} / {fmt_ns(sums[i].get('pread_p99'))}")
    row("block-requests-rel-err vs original", lambda i: "—" if i == 0 else cmpm(i, "block-requests-rel-err"))
    row("compare verdict", lambda i: "—" if i == 0 else str((cols[i][2] or {}).get("verdict")) +
        (" (" + ", ".join((cols[i][2] or {}).get("failed", [])) + ")" if (cols[i][2] or {}).get("failed") else ""))
    return "\n".join(out)


def mismatch_examples(rep, most=3):
    """The replay's first mismatch examples: ' (e.g. unlink /x: recorded 0, live -2; ...)'."""
    found = []
    for kind, items in (((rep or {}).get("mismatches") or {}).get("examples") or {}).items():
        for e in items or []:
            found.append(f"{kind} {e.get('op')} {e.get('path') or '-'} (tid {e.get('tid')} op #{e.get('index')}): "
                         f"recorded {e.get('recorded')}, live {e.get('live')}")
    return f" (e.g. {'; '.join(found[:most])})" if found else ""


def check(rows):
    """What a replay must get right on any machine: every call in order and every result as
    recorded. Timing is not judged here (a shared machine makes it noisy)."""
    failed = missing = 0
    for r in rows:
        where = f"{r['name']} / {r['pace']}"
        if r["missing"]:
            print(f"{where}: not run: {r['missing']}")
            missing += 1
            continue
        seq = mval(r["ms"], "seq-match")
        problems = []
        if r["record_rc"]:
            problems.append(f"record exited {r['record_rc']}")
        if r["replay_rc"]:
            problems.append(f"replay exited {r['replay_rc']}")
        if r["cmp"] is None:
            problems.append("no compare output")
        elif seq != 1.0:
            first = [t.get("first_difference") for t in (r["threads"].get("rows") or [])
                     if t.get("share", 1) < 1]
            problems.append(f"seq-match {fmt_pct(seq, 4)} ({r['orig_calls']}/{r['repl_calls']} calls"
                            + (f", first difference at op #{first[0]}" if first else "") + ")"
                            + (f"; op counts differing: {op_diff(r['cmp'])}" if op_diff(r["cmp"]) else ""))
        if r["rep"] is None:
            problems.append("no replay summary")
        elif r["mismatches"] != 0:
            problems.append(f"{r['mismatches']} result mismatches {r['mismatch_kinds']}"
                            + mismatch_examples(r["rep"]))
        if problems:
            failed += 1
            print(f"{where}: FAIL: " + "; ".join(problems))
        else:
            print(f"{where}: ok: seq-match 100% of {r['orig_calls']} calls, 0 result mismatches")
    if failed:
        return 1
    return 77 if missing else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--elapsed", type=int, default=0)
    ap.add_argument("--smoke", type=int, default=0)
    ap.add_argument("--fs-note", default="")
    ap.add_argument("--paces", default="original gaps fast")
    ap.add_argument("--template")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()

    found = [os.path.basename(p).split(".")[0]
             for pattern in ("*.orig.iotwin", "*.orig.rc", "*.missing")
             for p in glob.glob(os.path.join(a.results, pattern))]
    names = sorted(set(found), key=lambda n: SCENARIO_ORDER.index(n) if n in SCENARIO_ORDER else 99)
    paces = a.paces.split()
    rows = [row_for(a.results, n, p) for n in names for p in paces]
    if a.check:
        sys.exit(check(rows))
    table = scenario_table(rows)
    queries = query_table(rows)
    if a.smoke or not a.template:
        with open(a.out, "w") as f:
            f.write(table + "\n\n" + (queries + "\n\n" if "|" in queries else "") + misses(rows) + "\n")
        return
    run_info = (f"Generated by `bench/fidelity/run.sh` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
                f"host kernel {platform.release()}, {os.cpu_count()} CPUs, whole run {a.elapsed} s. "
                f"The machine is a shared 2-core VM: timing figures are noisy, rerun to see the spread.")
    text = open(a.template).read()
    text = (text.replace("@RUN_INFO@", run_info).replace("@SCENARIO_TABLE@", table)
            .replace("@QUERY_TABLE@", queries)
            .replace("@KEY_FIGURES@", key_figures(rows)).replace("@MISSES@", misses(rows))
            .replace("@FS_TABLE@", fs_section(a.results, a.fs_note)))
    with open(a.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
