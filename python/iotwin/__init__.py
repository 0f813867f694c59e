"""Read iotwin traces from Python, and mark the phases of a traced Python program.

    t = iotwin.open("run.iotwin")
    t.header                      # the trace's header (dict)
    t.tables()                    # the tables it holds: ["proc", "syscalls", ...]
    a = t.to_numpy("syscalls")    # NumPy structured array
    df = t.to_pandas("syscalls", columns=["op", "length", "dur_ns", "path"],
                     where={"op": ["read", "pread64"], "path": "/data/*"})
    for row in t.records("syscalls"): ...

    with iotwin.phase("load"):    # intent markers, when run under `iotwin record`
        ...
    t.phases()                    # the phases they mark (dicts: label, thread, times)
    t.to_pandas("phases")         # the same as a table; per-record tables get a `phase` column

The columns are those of `iotwin export --csv` (docs/tables.md), typed by the record field
they hold; in tables with a `file_id` (`file2_id`), `path` (`path2`) is the file's resolved path
from the files table and the path argument as recorded is `path_arg` (`path2_arg`).
Reference: docs/python.md.
"""

import contextlib
import json
import os
import threading

import numpy as np

from iotwin._native import TraceError
from iotwin import _native

__all__ = ["open", "Trace", "TraceError", "marker", "phase"]

# where= keys and the column each filters on: the words of the command line's --filter (op,
# file, tgid or pid, tid), `path` as another name of `file`, and `ts_ns`.
_WHERE_KEYS = {"op": "op", "path": "file_id", "file": "file_id", "ts_ns": "ts_ns",
               "tgid": "tgid", "pid": "tgid", "tid": "tid"}
# Renamed columns of tables with file ids: the CSV's name -> ours.
_ARG_COLUMNS = {"path": "path_arg", "path2": "path2_arg"}
_RESOLVED = {"path": "file_id", "path2": "file2_id"}


def open(path, salvage=False):  # noqa: A001 (the module's entry point, like io.open)
    """Opens a trace. `salvage`: skip damaged chunks and accept a truncated end, as
    `iotwin dump --salvage` does; otherwise such a trace raises TraceError."""
    return Trace(path, salvage)


class Trace:
    """An iotwin trace file. Each read streams the file again; nothing is cached."""

    def __init__(self, path, salvage=False):
        self.path = os.fspath(path)
        self.salvage = salvage
        self._trace = _native.Trace(self.path, salvage)
        self.header = json.loads(self._trace.header_json())
        summary = self._trace.summary_json()
        self.summary = json.loads(summary) if summary is not None else None
        self.format_version = self._trace.format_version()
        self._intervals = None   # the phases' intervals for `phase` columns, read once

    def __repr__(self):
        return "iotwin.Trace(%r)" % self.path

    def tables(self):
        """Names of the record tables the trace holds, in the order of `iotwin export`
        (one pass over the records). The `files` table can always be read too."""
        return self._trace.tables()

    def phases(self):
        """The phases intent markers mark, in the order begun: one dict per begin..end interval
        (docs/python.md, "Phases"): label, tgid, tid, depth (0 outermost), begin and end on the
        records' clock, duration, and whether it never ended (then it lasts to the trace's
        end). Their I/O figures are `iotwin report --json`'s intents.phases, row for row."""
        return [{"label": label, "tgid": tgid, "tid": tid, "depth": depth,
                 "open": end == _OPEN_END, "begin_ts_ns": begin,
                 "end_ts_ns": None if end == _OPEN_END else end,
                 "duration_ns": None if end == _OPEN_END else end - begin}
                for begin, end, tid, label, depth, tgid in self._phase_intervals()]

    def hosts(self):
        """The hosts of a trace merged by `iotwin merge` (docs/multi-host.md), by index: a
        record's host is its tgid >> 22. Empty for a trace of one host. Tables of records that
        name a process then have a `host` column (the host's name)."""
        return [h.get("name", "") for h in self.header.get("hosts", [])
                if isinstance(h, dict)]

    def to_numpy(self, table, columns=None, where=None):
        """The table as a structured array (text columns as Python str objects)."""
        if table == "phases":
            names, specs = self._phases_table(columns, where)
            builder = _structured_builder(names, specs, 0)
            builder.append(_fill_fields(specs))
            return builder.finish()
        if table == "files":  # built at the end of the trace: read whole
            names, specs = self._read_all(table, columns, where)
            builder = _structured_builder(names, specs, 0)
            builder.append(_fill_fields(specs))
            return builder.finish()
        # In batches straight into the array: the reader's columns hold one batch and are
        # reused, so only the array takes fresh memory (docs/python.md, "Speed").
        reader, wanted = self._reader(table, columns, where)
        builder, dictionaries = None, {}
        while True:
            more = reader.read(_TO_NUMPY_BATCH)
            # Views of the reader's columns: copied into the array before the next read.
            found = reader.tables(False, {k: len(v) for k, v in dictionaries.items()}, True)
            if found:
                names, specs = _assemble(found[0], wanted, where, dictionaries,
                                         reader.file_paths, self._column_names,
                                         self._phase_of(table, columns), self.hosts())
                if builder is None:
                    # A filter keeps an unknown share of the rows: no count, the array grows.
                    expected = 0 if where else self._expected_rows(table)
                    builder = _structured_builder(names, specs, expected)
                builder.append(_fill_fields(specs))
                del found, specs
                reader.clear()
            if not more:
                break
        if builder is None:
            if table not in _native.table_names():
                raise ValueError("unknown table %r; tables: %s" % (table, _native.table_names()))
            return _native.StructuredBuilder(np.dtype([]), 0).finish()
        return builder.finish()

    def to_pandas(self, table, columns=None, where=None):
        """The table as a pandas DataFrame (pandas is imported only here)."""
        import pandas as pd
        if table == "phases":
            names, specs = self._phases_table(columns, where)
        else:
            names, specs = self._read_all(table, columns, where)
        return pd.DataFrame({n: _materialize(c) for n, c in zip(names, specs)}, columns=names,
                            copy=False)

    def records(self, table, columns=None, where=None, batch=65536):
        """Yields the table's rows one by one as dicts, reading `batch` rows at a time, so
        memory stays bounded whatever the trace's size."""
        if table in ("files", "phases"):  # built at the end of the trace: read whole
            names, specs = (self._phases_table(columns, where) if table == "phases" else
                            self._read_all(table, columns, where))
            arrays = [_materialize(c) for c in specs]
            for i in range(len(arrays[0]) if arrays else 0):
                yield {n: _scalar(a[i]) for n, a in zip(names, arrays)}
            return
        reader, wanted = self._reader(table, columns, where)
        dictionaries = {}
        while True:
            more = reader.read(batch)
            found = reader.tables(False, {k: len(v) for k, v in dictionaries.items()})
            if found:
                names, specs = _assemble(found[0], wanted, where, dictionaries,
                                         reader.file_paths, self._column_names,
                                         self._phase_of(table, columns), self.hosts())
                arrays = [_materialize(c) for c in specs]
                for i in range(len(arrays[0]) if arrays else 0):
                    yield {n: _scalar(a[i]) for n, a in zip(names, arrays)}
                reader.clear()
            if not more:
                return

    # ---- internals -------------------------------------------------------------------------

    def _expected_rows(self, table):
        """The table's rows as the footer counts them (0: unknown): room the reader makes at
        once instead of regrowing its columns. A hint only, capped by the module: the footer
        is untrusted, and a wrong count costs address space or regrowing, never rows."""
        events = (self.summary or {}).get("events")
        if not isinstance(events, dict):
            return 0
        count = events.get(table, events.get(table[:-1] if table.endswith("s") else table))
        if not isinstance(count, int) or count <= 0:
            return 0
        # No more than the file could hold: the densest traces pack a record in about 1.6
        # bytes (docs/benchmarks.md, in-process writer rows); 64 per byte leaves room for that.
        try:
            most = os.path.getsize(self.path) * 64
        except OSError:
            return 0
        return min(count, most)

    def _column_names(self, table):
        """Every column of `table`, in order, from its first row (for messages only)."""
        names, _ = self._read_all(table, None, None, max_rows=1)
        return names

    def _reader(self, table, columns, where, reserve_rows=0):
        if table == "files":
            reader = _native.Reader(self.path, ["files"], [], [], 0, 2**64 - 1, "",
                                    self.salvage)
            return reader, columns
        where = dict(where or {})
        unknown = set(where) - set(_WHERE_KEYS)
        if unknown:
            raise ValueError("where=: unknown key(s) %s; known: %s" %
                             (sorted(unknown), sorted(_WHERE_KEYS)))
        if "path" in where and "file" in where:
            raise ValueError("where=: give the file glob once, as 'file' or as 'path'")
        ops = _where_ops(where.get("op", []))
        ts_from, ts_to = _where_time(where.get("ts_ns", (None, None)))
        path_glob = _where_path(where.get("file", where.get("path", "")))
        if "tgid" in where and "pid" in where:
            raise ValueError("where=: give the process once, as 'tgid' or as 'pid'")
        tgids = _where_ids("tgid", where.get("tgid", where.get("pid", [])))
        tids = _where_ids("tid", where.get("tid", []))
        native_columns = []
        # A row's phase is found by its time (and thread: _PHASE_BY_THREAD).
        phase_columns = ["ts_ns", "tid"] if _PHASE_BY_THREAD.get(table) else ["ts_ns"]
        if columns is not None:
            columns = list(columns)
            for c in columns:
                native_columns += {"path_arg": ["path"], "path2_arg": ["path2"],
                                   "path": ["path", "file_id"],
                                   "path2": ["path2", "file2_id"],
                                   "phase": phase_columns,
                                   "phase_id": phase_columns,
                                   "host": ["tgid"]}.get(c, [c])
            native_columns = list(dict.fromkeys(native_columns))
        reader = _native.Reader(self.path, [table], native_columns, list(ops),
                                0 if ts_from is None else int(ts_from),
                                2**64 - 1 if ts_to is None else int(ts_to),
                                path_glob, self.salvage, reserve_rows, tgids, tids)
        return reader, columns

    def _read_all(self, table, columns, where, max_rows=0):
        # A filter keeps an unknown share of the rows: no room made for the footer's count.
        reader, wanted = self._reader(table, columns, where,
                                      0 if where or max_rows else self._expected_rows(table))
        reader.read(max_rows)
        if table == "files":
            found = [reader.files()]
        else:
            found = reader.tables(True, {})
        if not found:
            if table not in _native.table_names():
                raise ValueError("unknown table %r; tables: %s" % (table, _native.table_names()))
            return [], []  # the trace has no such records: no rows, no columns
        return _assemble(found[0], wanted, where, {}, reader.file_paths, self._column_names,
                         self._phase_of(table, columns) if not max_rows else None,
                         self.hosts())

    def _phases_table(self, columns, where):
        """phases() as columns: names and arrays (the label as text)."""
        if where:
            raise ValueError("where=: the phases table takes no filter")
        rows = self.phases()
        names = list(columns) if columns is not None else list(_PHASE_COLUMNS)
        unknown = [c for c in names if c not in _PHASE_COLUMNS]
        if unknown:
            raise ValueError("table 'phases' has no column(s) %s; columns: %s" %
                             (unknown, list(_PHASE_COLUMNS)))
        specs = []
        for n in names:
            if _PHASE_COLUMNS[n] is object:
                values = [r.get(n, "") for r in rows]
                specs.append((np.arange(len(values), dtype=np.int64), _lookup(values + [""])))
            else:
                specs.append(np.array([r.get(n) or 0 for r in rows], dtype=_PHASE_COLUMNS[n]))
        return names, specs

    def _phase_of(self, table, columns):
        """What gives a batch of `table` its `phase` and `phase_id` columns, or None: tables of
        records with a time, when all columns are read and the trace marks phases, or when
        either column is asked for."""
        if table not in _PHASE_BY_THREAD:
            return None
        asked = columns is not None and ("phase" in columns or "phase_id" in columns)
        if columns is not None and not asked:
            return None
        if not asked and not self._may_hold_intents():
            return None
        intervals = self._phase_intervals()
        if not intervals and not asked:
            return None
        by_thread = _PHASE_BY_THREAD[table]
        labels = [i[3] for i in intervals]
        return lambda native: (_phase_codes(native, intervals, by_thread), labels)

    def _may_hold_intents(self):
        events = (self.summary or {}).get("events")
        if not isinstance(events, dict):
            return True  # no footer: the intents table says
        count = events.get("intents", events.get("intent", 0))
        return not isinstance(count, int) or count > 0

    def _phase_intervals(self):
        """[begin_ts, end_ts, tid, label, depth, tgid] of each phase, in the order begun, by the
        rule of the report (an end closes the latest open phase of its label on its thread, and those
        begun inside it; a phase never ended lasts to the end of the trace)."""
        if self._intervals is not None:
            return self._intervals
        reader = _native.Reader(self.path, ["intents"], ["ts_ns", "kind", "tgid", "tid", "label"],
                                [], 0, 2**64 - 1, "", self.salvage, 0, [], [])
        reader.read(0)
        found = reader.tables(True, {})
        intervals, stacks = [], {}
        if found:
            cols = {name: (array, dictionary) for name, _, array, dictionary in
                    found[0]["columns"]}
            kinds, labels = cols["kind"], cols["label"]
            for i in range(len(cols["ts_ns"][0])):
                ts, tid = int(cols["ts_ns"][0][i]), int(cols["tid"][0][i])
                tgid = int(cols["tgid"][0][i])
                kind, label = kinds[1][kinds[0][i]], labels[1][labels[0][i]]
                stack = stacks.setdefault(tid, [])
                if kind == "begin":
                    index = len(intervals) if len(intervals) < _MAX_PHASES else -1
                    if index >= 0:
                        intervals.append([ts, _OPEN_END, tid, label, len(stack), tgid])
                    stack.append((label, index))
                elif kind == "end":
                    for at in range(len(stack) - 1, -1, -1):
                        if stack[at][0] == label:
                            for _, index in stack[at:]:
                                if index >= 0:
                                    intervals[index][1] = max(ts, intervals[index][0])
                            del stack[at:]
                            break
        self._intervals = intervals
        return intervals


# The phases table's columns (Trace.phases()) and their types; an open phase's end and duration
# are 0 there.
_PHASE_COLUMNS = {"label": object, "tgid": np.uint32, "tid": np.uint32, "depth": np.uint32,
                  "open": np.bool_, "begin_ts_ns": np.uint64, "end_ts_ns": np.uint64,
                  "duration_ns": np.uint64}
_OPEN_END = 2**64 - 1
# Phases the analysis tracks (Analyzer::kMaxPhases); later ones have no row and no id.
_MAX_PHASES = 1024
# Tables whose rows get a `phase`: True, the innermost phase open on the row's thread (what the
# thread did); False, the latest begun phase open at the row's time, whichever thread marked it
# (what the device and the kernel's workers did while it was open), as the report counts them.
_PHASE_BY_THREAD = {"syscalls": True, "page_faults": True, "async_io": True, "page_cache": True,
                    "block": False, "nvme": False, "writeback": False}


def _phase_codes(native, intervals, by_thread):
    """Each row's phase: its index in `intervals` (-1: none), the latest begun that holds the
    row's time (and, `by_thread`, was marked by the row's thread): the innermost."""
    ts = native["ts_ns"]
    codes = np.full(len(ts), -1, dtype=np.int64)
    if not intervals or not len(ts):
        return codes
    order = np.argsort(ts, kind="stable")
    sorted_ts = ts[order]
    tid = native.get("tid") if by_thread else None
    for index, (begin, end, phase_tid, *_) in enumerate(intervals):
        lo, hi = np.searchsorted(sorted_ts, [begin, end], side="left")
        rows = order[lo:hi]
        if tid is not None:
            rows = rows[tid[rows] == phase_tid]
        codes[rows] = index
    return codes


def _where_ops(ops):
    """where={"op": ...}: one op name or a list of them."""
    if isinstance(ops, str):
        return [ops]
    if isinstance(ops, (list, tuple, set, frozenset)) and all(isinstance(o, str) for o in ops):
        return list(ops)
    raise ValueError("where=%r: an op name or a list of op names, e.g. {'op': ['read', "
                     "'pread64']}" % {"op": ops})


def _where_ids(key, ids):
    """where={"tgid": ...} or {"tid": ...}: one id or a list of them."""
    one = isinstance(ids, (int, np.integer)) and not isinstance(ids, bool)
    many = isinstance(ids, (list, tuple, set, frozenset)) and all(
        isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in ids)
    if (one or many) and all(0 <= i < 2**32 for i in ([ids] if one else ids)):
        return [int(ids)] if one else [int(i) for i in ids]
    raise ValueError("where=%r: a thread or process id or a list of them, e.g. {%r: [1234]}" %
                     ({key: ids}, key))


def _where_time(window):
    """where={"ts_ns": (start, end)}: start included, end excluded, either None for open."""
    if isinstance(window, (list, tuple)) and len(window) == 2 and all(
            v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool) and
                          0 <= v < 2**64)
            for v in window):
        return window
    raise ValueError("where=%r: a pair (start, end) of nanoseconds on the trace's clock, "
                     "either None for open, e.g. {'ts_ns': (t0, t0 + 10**9)}" % {"ts_ns": window})


def _where_path(glob):
    """where={"path": glob}: a str, bytes or os.PathLike glob on the resolved path."""
    if isinstance(glob, (str, bytes, os.PathLike)):
        return os.fsencode(glob)  # the trace's names are bytes: os.fsdecode'd names round-trip
    raise ValueError("where=%r: a glob on the resolved path, e.g. {'path': '/data/*'}"
                     % {"path": glob})


def _assemble(found, wanted, where, dictionaries, file_paths, column_names, phase_of=None,
              hosts=()):
    """Names and columns of a table read by the native reader, in the CSV's order (then `path`,
    `path2`, then `phase`, `phase_id` when `phase_of` gives them, then `host` for a merged
    trace's tables with a `tgid`: `hosts` by index) or in the order asked for. A
    column is a NumPy array (numbers) or a pair (codes, values): text, decoded lazily as
    values[codes] (code -1: the last value, "")."""
    native = {}
    order = []
    for name, kind, array, dictionary in found["columns"]:
        if kind == "text":
            values = dictionaries.setdefault(name, [])
            values.extend(dictionary)
            array = (array, _lookup(values + [""]))
        native[name] = array
        order.append(name)
    for key, column in _WHERE_KEYS.items():
        if key in (where or {}) and column not in native and found["name"] != "files":
            raise ValueError("where=%r: table %r has no column %r" % (key, found["name"], column))
    out = {}
    has_files = "file_id" in native and found["name"] != "files"
    paths = None
    for name in order:
        if has_files and name in _ARG_COLUMNS:
            out[_ARG_COLUMNS[name]] = native[name]
        else:
            out[name] = native[name]
    if has_files:
        for name, id_column in _RESOLVED.items():
            if id_column in native:
                if paths is None:
                    paths = _lookup(file_paths() + [""])  # file id -1: no file
                out[name] = (native[id_column], paths)
    if phase_of is not None:
        codes, labels = phase_of(native)
        out["phase"] = (codes, _lookup(labels + [""]))
        out["phase_id"] = codes
    if hosts and "tgid" in native:
        # A pid past the table (a forged trace) or of no process (0 is host 0) reads as "".
        codes = np.asarray(native["tgid"], dtype=np.int64) >> 22
        codes = np.where(codes < len(hosts), codes, -1)
        out["host"] = (codes, _lookup(list(hosts) + [""]))
    if wanted is None:
        names = list(out)
    else:
        missing = [c for c in wanted if c not in out]
        if missing:
            # `out` holds only what was read: the message lists every column of the table.
            raise ValueError("table %r has no column(s) %s; columns: %s" %
                             (found["name"], missing, column_names(found["name"]) or list(out)))
        names = list(wanted)
    return names, [out[n] for n in names]


# Rows to_numpy reads at a time: the reader's columns for a batch (about 20 MB for all the
# columns of syscalls) are reused from batch to batch.
_TO_NUMPY_BATCH = 1 << 17


def _structured_builder(names, specs, expected_rows):
    dtype = np.dtype([(n, object if isinstance(c, tuple) else c.dtype)
                      for n, c in zip(names, specs)])
    return _native.StructuredBuilder(dtype, expected_rows)


def _fill_fields(specs):
    return [(c[0], list(c[1])) if isinstance(c, tuple) else c for c in specs]


def _lookup(values):
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _materialize(column):
    return column[1][column[0]] if isinstance(column, tuple) else column


def _scalar(v):
    return v.item() if isinstance(v, np.generic) else v


# ---- intent markers ----------------------------------------------------------------------------
# The marker file of `iotwin record` (docs/record.md, "Intent"): $IOTWIN_MARKER names it; the
# program opens it once, O_WRONLY, and writes one line per marker in one write(2). Without it
# (not run under `iotwin record`), markers do nothing.

_MAX_LABEL = 200
_marker_lock = threading.Lock()
_marker_fd = None  # None: not opened yet; -1: markers off


def _marker_line(kind, label, value=None):
    data = label.encode("ascii") if isinstance(label, str) and label.isascii() else None
    if not data or len(data) > _MAX_LABEL or any(c <= 0x20 or c > 0x7e for c in data):
        raise ValueError("iotwin marker label %r: 1 to %d printable ASCII characters, no spaces"
                         % (label, _MAX_LABEL))
    line = kind + b" " + data
    if value is not None:
        value = int(value)
        if value < 0 or value >= 2**64:
            raise ValueError("iotwin marker value %r: an unsigned 64-bit integer" % value)
        line += b" %d" % value
    return line + b"\n"


def _marker_write(line):
    global _marker_fd
    if _marker_fd is None:
        with _marker_lock:
            if _marker_fd is None:
                path = os.environ.get("IOTWIN_MARKER", "")
                fd = -1
                if path:
                    try:
                        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                    except OSError:
                        fd = -1  # as workloads/marker.h: an unopenable path turns markers off
                _marker_fd = fd
    if _marker_fd >= 0:
        os.write(_marker_fd, line)  # one write(2): lines of different threads never mix


def marker(label, value=None):
    """An instant intent marker (`I label [value]`) when running under `iotwin record`;
    nothing otherwise. The label is checked either way."""
    _marker_write(_marker_line(b"I", label, value))


@contextlib.contextmanager
def phase(label):
    """`with iotwin.phase("load"):` marks the block as a phase (begin and end markers) when
    running under `iotwin record`; nothing otherwise. Also a decorator."""
    _marker_write(_marker_line(b"B", label))
    try:
        yield
    finally:
        _marker_write(_marker_line(b"E", label))
