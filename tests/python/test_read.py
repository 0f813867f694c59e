"""iotwin.open: the tables as NumPy and pandas, checked against `iotwin export --csv` of the
same trace (the same row functions must give the same values)."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest

import iotwin


def export_csv(iotwin_bin, trace, tmp_path):
    out = tmp_path / "csv"
    subprocess.run([iotwin_bin, "export", trace, "--csv", str(out)], check=True,
                   capture_output=True)
    tables = {}
    for name in os.listdir(out):
        if name.endswith(".csv"):
            with open(out / name, newline="") as f:
                tables[name[:-4]] = list(csv.DictReader(f))
    return tables


def as_csv_text(value):
    """A value of ours as the CSV export writes it."""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    # A name cell that a spreadsheet would take for a formula gets a leading quote in CSV
    # (docs/tables.md, "Conventions"); op and flag names never start so.
    if value[:1] in ("=", "+", "-", "@", "'"):
        return "'" + value
    return value


@pytest.mark.parametrize("trace_fixture", ["strace_trace", "synth_trace"])
def test_tables_match_csv_export(request, trace_fixture, iotwin_bin, tmp_path):
    trace = request.getfixturevalue(trace_fixture)
    expected = export_csv(iotwin_bin, trace, tmp_path)
    t = iotwin.open(trace)
    assert sorted(t.tables()) == sorted(n for n in expected if n != "files")
    files = {row["file_id"]: row["path"] for row in expected.get("files", [])}
    for table, rows in expected.items():
        a = t.to_numpy(table)
        assert len(a) == len(rows), table
        has_files = "file_id" in rows[0] and table != "files"
        for i, row in enumerate(rows):
            for column, text in row.items():
                ours = column
                if has_files and column in ("path", "path2"):
                    ours = column + "_arg"
                value = a[ours][i]
                if column in ("file_id", "file2_id") and table != "files":
                    assert (value == -1) == (text == ""), (table, i, column)
                    if text:
                        assert int(text) == value
                    continue
                assert as_csv_text(value) == text, (table, i, column, value, text)
            if has_files:
                assert a["path"][i] == files.get(row["file_id"], ""), (table, i)


def test_pandas_groupby_bytes_per_file(strace_trace):
    df = iotwin.open(strace_trace).to_pandas("syscalls")
    per_file = df.groupby("path")["length"].sum()
    # input.log: a 4096-byte read and a 131072-byte pread64 of data/shard,0.bin (opened
    # relative to the cwd /work), a 12288-byte readv of it; two writes to out<x>.log.
    assert per_file["/work/data/shard,0.bin"] == 4096 + 131072 + 12288 + 4096
    assert per_file["/work/out<x>.log"] == 6
    assert list(df.columns[:6]) == ["ts_ns", "dur_ns", "tgid", "tid", "cpu", "op"]
    assert df["op"].dtype == object and df["length"].dtype == np.uint64


def test_structured_array_releases_its_text(strace_trace):
    """The array's memory is released by the module, not NumPy: every text object it holds is
    released once, views keep it alive, copies are NumPy's own."""
    a = iotwin.open(strace_trace).to_numpy("syscalls")
    op = a["op"][0]
    rows_holding = int(sum(1 for v in a["op"] if v is op))
    assert sys.getrefcount(op) == 2 + rows_holding  # `op` and getrefcount's argument
    view, copy = a[::2], a.copy()
    del a
    assert view[0]["op"] is op and copy[0]["op"] is op
    del view, copy
    assert sys.getrefcount(op) == 2


def test_header_and_summary(strace_trace):
    t = iotwin.open(strace_trace)
    assert t.header["import"]["format"] == "strace"
    assert t.summary["events"]["syscall"] == len(t.to_numpy("syscalls"))


def test_columns_and_where(synth_trace):
    t = iotwin.open(synth_trace)
    full = t.to_pandas("syscalls")
    part = t.to_pandas("syscalls", columns=["op", "length", "path"],
                       where={"op": ["pread64", "read"], "path": "/data/shard-1*"})
    assert list(part.columns) == ["op", "length", "path"]
    mask = full["op"].isin(["pread64", "read"]) & full["path"].str.startswith("/data/shard-1")
    assert len(part) == mask.sum() > 0
    assert (part["length"].to_numpy() == full[mask]["length"].to_numpy()).all()
    ts = full["ts_ns"]
    lo, hi = int(ts.iloc[len(ts) // 4]), int(ts.iloc[len(ts) // 2])
    window = t.to_numpy("syscalls", columns=["ts_ns"], where={"ts_ns": (lo, hi)})
    assert len(window) == ((ts >= lo) & (ts < hi)).sum() > 0
    with pytest.raises(ValueError, match="unknown op"):
        t.to_numpy("syscalls", where={"op": "no_such_call"})
    with pytest.raises(ValueError, match="no column"):
        t.to_numpy("syscalls", columns=["no_such_column"])
    with pytest.raises(ValueError, match="unknown table"):
        t.to_numpy("no_such_table")
    with pytest.raises(ValueError, match="unknown key"):
        t.to_numpy("syscalls", where={"size": 1})


def test_where_takes_the_command_lines_filter_words(synth_trace):
    """where= takes the words of `--filter`: op=reads / op=writes (every call of the family),
    file=GLOB (`path` is the same key), tgid= or pid=, tid=, one value or a list."""
    t = iotwin.open(synth_trace)
    full = t.to_pandas("syscalls")
    families = {"reads": ["read", "pread64", "readv", "preadv", "preadv2"],
                "writes": ["write", "pwrite64", "writev", "pwritev", "pwritev2"]}
    for word, names in families.items():
        rows = t.to_pandas("syscalls", columns=["op"], where={"op": word})
        assert len(rows) == full["op"].isin(names).sum() > 0, word
    both = t.to_pandas("syscalls", columns=["op"], where={"op": ["reads", "openat"]})
    assert len(both) == full["op"].isin(families["reads"] + ["openat"]).sum()
    tid = int(full["tid"].iloc[-1])
    by_tid = t.to_pandas("syscalls", columns=["op"], where={"tid": tid, "op": "reads"})
    assert len(by_tid) == ((full["tid"] == tid) & full["op"].isin(families["reads"])).sum() > 0
    assert len(t.to_numpy("syscalls", where={"tid": [tid, 2**31]})) == (full["tid"] == tid).sum()
    tgid = int(full["tgid"].iloc[0])
    assert len(t.to_numpy("syscalls", columns=["op"], where={"pid": tgid})) == \
        len(t.to_numpy("syscalls", columns=["op"], where={"tgid": [tgid]})) == \
        (full["tgid"] == tgid).sum() > 0
    assert len(t.to_numpy("syscalls", columns=["op"], where={"file": "/data/shard-1*"})) == \
        len(t.to_numpy("syscalls", columns=["op"], where={"path": "/data/shard-1*"})) > 0
    with pytest.raises(ValueError, match="once"):
        t.to_numpy("syscalls", where={"file": "/a*", "path": "/b*"})
    with pytest.raises(ValueError, match=r"^where=\{'tid': 'x'\}.*e\.g\."):
        t.to_numpy("syscalls", where={"tid": "x"})


def test_records_stream_equals_to_numpy(synth_trace):
    t = iotwin.open(synth_trace)
    a = t.to_numpy("syscalls")
    n = 0
    for i, row in enumerate(t.records("syscalls", batch=1000)):  # many batches
        assert row["op"] == a["op"][i] and row["path"] == a["path"][i]
        assert row["ts_ns"] == a["ts_ns"][i] and row["flags_names"] == a["flags_names"][i]
        n += 1
    assert n == len(a) > 1000
    files = t.to_numpy("files")
    assert [r["path"] for r in t.records("files")] == list(files["path"]) and len(files) > 1


def test_truncated_trace_raises_with_file_and_offset(synth_trace, tmp_path):
    data = open(synth_trace, "rb").read()
    cut = tmp_path / "cut.iotwin"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(iotwin.TraceError) as e:
        iotwin.open(str(cut)).to_numpy("syscalls")
    assert str(e.value).startswith(str(cut) + ": byte ")  # the file and the byte offset
    assert isinstance(e.value, ValueError) and isinstance(e.value, OSError)
    # salvage: what the complete chunks hold
    assert 0 < len(iotwin.open(str(cut), salvage=True).to_numpy("syscalls"))


def test_damaged_trace_raises(synth_trace, tmp_path):
    data = bytearray(open(synth_trace, "rb").read())
    for i in range(len(data) // 3, len(data) // 3 + 64):
        data[i] ^= 0x5A
    bad = tmp_path / "bad.iotwin"
    bad.write_bytes(bytes(data))
    with pytest.raises(iotwin.TraceError, match=str(bad)):
        iotwin.open(str(bad)).to_numpy("syscalls")
    garbage = tmp_path / "garbage.iotwin"
    garbage.write_bytes(b"not a trace\n" * 10)
    with pytest.raises(iotwin.TraceError, match="garbage.iotwin"):
        iotwin.open(str(garbage))
    with pytest.raises(OSError):
        iotwin.open(str(tmp_path / "missing.iotwin"))


@pytest.mark.parametrize("batch,expected_rows", [(1000, None), (None, 10), (None, 10**12)])
def test_to_numpy_batches_and_footer_counts(synth_trace, monkeypatch, batch, expected_rows):
    """to_numpy reads in batches into an array first sized from the footer's row count: many
    batches (text dictionaries growing between them), a count far too small (the array grows)
    and one far too large (capped; the unused end given back) give the same array."""
    t = iotwin.open(synth_trace)
    whole = t.to_numpy("syscalls")
    if batch:
        monkeypatch.setattr(iotwin, "_TO_NUMPY_BATCH", batch)
    if expected_rows:
        monkeypatch.setattr(iotwin.Trace, "_expected_rows", lambda self, table: expected_rows)
    a = t.to_numpy("syscalls")
    assert a.dtype == whole.dtype and len(a) == len(whole) > 3000
    for name in a.dtype.names:
        assert list(a[name]) == list(whole[name]), name


def test_to_numpy_no_rows_keeps_columns(synth_trace):
    t = iotwin.open(synth_trace)
    none = t.to_numpy("syscalls", columns=["ts_ns", "op", "path"], where={"ts_ns": (0, 1)})
    assert len(none) == 0 and none.dtype.names == ("ts_ns", "op", "path")


def test_structured_builder_refuses_misuse():
    """finish() twice and an object field fed as numbers raise instead of crashing."""
    from iotwin import _native
    builder = _native.StructuredBuilder(np.dtype([("n", np.int64)]), 4)
    builder.append([np.arange(3, dtype=np.int64)])
    assert list(builder.finish()["n"]) == [0, 1, 2]
    with pytest.raises(ValueError):
        builder.finish()
    objects = _native.StructuredBuilder(np.dtype([("o", object)]), 4)
    with pytest.raises(ValueError):
        objects.append([np.array([None, None], dtype=object)])


def test_footer_count_is_capped_by_the_file_size(synth_trace):
    """A footer claiming more rows than the file could hold reserves no more than it could."""
    t = iotwin.open(synth_trace)
    t.summary = dict(t.summary or {}, events={"syscalls": 1 << 60})
    assert t._expected_rows("syscalls") <= os.path.getsize(synth_trace) * 64


def test_where_values_of_the_wrong_shape_say_what_they_take(synth_trace):
    """A where= value of the wrong type names its key and shows an example, instead of an
    unpacking or argument-matching error from inside the module."""
    t = iotwin.open(synth_trace)
    for where, key in [({"ts_ns": (5,)}, "ts_ns"), ({"ts_ns": 5}, "ts_ns"),
                       ({"ts_ns": ("a", None)}, "ts_ns"), ({"path": 3}, "path"),
                       ({"op": 3}, "op"), ({"op": ["read", 3]}, "op")]:
        with pytest.raises(ValueError) as e:
            t.to_numpy("syscalls", where=where)
        assert str(e.value).startswith("where=%r" % {key: where[key]}), str(e.value)
        assert "e.g." in str(e.value), str(e.value)
    # The accepted shapes: bytes and os.PathLike paths, a list of ops, an open end.
    glob = t.to_numpy("syscalls", columns=["path"], where={"path": "/data/shard-1*"})
    assert len(glob) > 0
    assert len(t.to_numpy("syscalls", columns=["path"], where={"path": b"/data/shard-1*"})) == len(glob)
    assert len(t.to_numpy("syscalls", where={"op": ("read", "pread64"), "ts_ns": [0, None]})) > 0


def test_an_unknown_column_lists_every_column_of_the_table(synth_trace):
    t = iotwin.open(synth_trace)
    every = list(t.to_pandas("syscalls").columns)
    with pytest.raises(ValueError) as e:
        t.to_numpy("syscalls", columns=["op", "no_such_column"])
    assert "['no_such_column']" in str(e.value)
    assert str(every) in str(e.value), str(e.value)
