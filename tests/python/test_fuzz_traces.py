"""The Python module on damaged and hostile traces: every call of the public API (open, to_numpy
of each table, records(), where=) returns or raises a Python exception, never crashes the
interpreter. Inputs: small real traces and the trace seeds of the fuzz targets
(tests/fuzz/seeds/*.iotwin: an undefined string id, header and footer JSON nested too deep),
each as it is and mutated (bit flips, truncations) with fixed seeds. The cases run in a child
interpreter that prints each case before running it, so a crash names the case that caused it
and the remaining cases still run."""
import glob
import os
import random
import subprocess
import sys

import pytest

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "seeds")
MUTATIONS_PER_TRACE = 30

# Runs the cases named on stdin, one path a line; prints each path before running it.
CHILD = r'''
import itertools
import sys

import iotwin

WHERE = [None, {"op": ["read", "openat"]}, {"path": "/*"}, {"ts_ns": (1, 2**63)}]


def exercise(path):
    for salvage in (False, True):
        try:
            t = iotwin.open(path, salvage=salvage)
            tables = list(t.tables()) + ["files"]
        except Exception:
            continue
        for table in tables:
            for where in WHERE:
                try:
                    t.to_numpy(table, where=where)
                except Exception:
                    pass
            try:
                list(itertools.islice(t.records(table, batch=64), 300))
            except Exception:
                pass


for line in sys.stdin:
    path = line.rstrip("\n")
    print(path, flush=True)
    exercise(path)
print("done", flush=True)
'''


def mutate(data, rng):
    """`data` with a few bits flipped, cut short, or both, and what was done."""
    data = bytearray(data)
    kind = rng.choice(["flip", "flip", "flips", "truncate", "flip+truncate"])
    done = []
    if kind.startswith("flip"):
        for _ in range(1 if kind != "flips" else rng.randint(2, 8)):
            at = rng.randrange(len(data))
            bit = rng.randrange(8)
            data[at] ^= 1 << bit
            done.append("flip byte %d bit %d" % (at, bit))
    if kind.endswith("truncate"):
        keep = rng.randrange(len(data))
        del data[keep:]
        done.append("truncate to %d bytes" % keep)
    return bytes(data), ", ".join(done)


def cases(traces, tmp_path):
    """(path, description) of every case: each trace as it is, then mutated."""
    out = []
    for t, (name, path) in enumerate(traces):
        with open(path, "rb") as f:
            data = f.read()
        out.append((path, "%s as it is" % name))
        for i in range(MUTATIONS_PER_TRACE):
            seed = 1000 * t + i
            mutated, what = mutate(data, random.Random(seed))
            case = tmp_path / ("case-%d.iotwin" % seed)
            case.write_bytes(mutated)
            out.append((str(case), "%s, seed %d: %s" % (name, seed, what)))
    return out


def run_cases(todo):
    """Runs the cases; those that ended the child by a signal or an exit status, described."""
    crashed = []
    while todo:
        child = subprocess.run([sys.executable, "-c", CHILD], input="".join(p + "\n" for p, _ in todo),
                               capture_output=True, text=True, timeout=120)
        ran = child.stdout.splitlines()
        if child.returncode == 0 and ran and ran[-1] == "done":
            break
        last = ran[-1] if ran else None
        index = next((i for i, (p, _) in enumerate(todo) if p == last), 0)
        crashed.append("%s (exit %d): %s" % (todo[index][1], child.returncode,
                                             child.stderr.strip()[-300:]))
        todo = todo[index + 1:]
    return crashed


@pytest.fixture(scope="module")
def traces(strace_trace, synth_trace):
    seeds = sorted(glob.glob(os.path.join(SEEDS, "*.iotwin")))
    names = [os.path.basename(p) for p in seeds]
    for needed in ("undefined_string_id.iotwin", "nested_header.iotwin", "nested_footer.iotwin"):
        assert needed in names, "tests/fuzz/seeds/%s is missing" % needed
    return [("strace import", strace_trace), ("synth_trace", synth_trace)] + list(zip(names, seeds))


def test_undefined_string_id_reads_as_no_name(traces):
    import iotwin
    path = dict(traces)["undefined_string_id.iotwin"]
    calls = iotwin.open(path).to_numpy("syscalls")
    # The last open names its path by id 4242, which no STRING record defines: no name, as the
    # CSV export writes it (an empty field), not another string.
    assert calls["op"][-2] == "openat"
    assert calls["path_arg"][-2] == ""
    assert calls["path_arg"][0] != ""


@pytest.mark.parametrize("name", ["nested_header.iotwin", "nested_footer.iotwin"])
def test_nested_json_is_an_error(traces, name):
    import iotwin
    with pytest.raises(iotwin.TraceError, match="nested deeper than 128 levels"):
        iotwin.open(dict(traces)[name])


def test_mutated_traces_never_crash(traces, tmp_path):
    crashed = run_cases(cases(traces, tmp_path))
    assert not crashed, "the module crashed on:\n" + "\n".join(crashed)
