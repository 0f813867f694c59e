"""Phases of a recorded Python program: Trace.phases(), the phases table and the `phase`
column of the per-record tables. Needs root and BPF (ctest label runtime)."""
import os
import subprocess
import sys

import pytest

import iotwin

pytestmark = pytest.mark.runtime

PROGRAM = """
import os, sys, iotwin
with iotwin.phase("write"):
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(16):
        os.write(fd, b"x" * 65536)
    os.fsync(fd)
    os.close(fd)
with iotwin.phase("read"):
    with iotwin.phase("scan"):
        fd = os.open(sys.argv[1], os.O_RDONLY)
        while os.read(fd, 65536):
            pass
        os.close(fd)
"""


@pytest.fixture(scope="module")
def phased_trace(iotwin_bin, tmp_path_factory):
    if os.geteuid() != 0 and os.environ.get("IOTWIN_REQUIRE_BPF") != "1":
        pytest.skip("needs root (IOTWIN_REQUIRE_BPF=1 makes this a failure)")
    tmp = tmp_path_factory.mktemp("phases")
    trace = tmp / "run.iotwin"
    subprocess.run([iotwin_bin, "record", "-o", str(trace), "--no-status", "--", sys.executable,
                    "-c", PROGRAM, str(tmp / "data.bin")], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    return iotwin.open(str(trace))


def test_phases_table(phased_trace):
    phases = phased_trace.phases()
    assert [(p["label"], p["depth"], p["open"]) for p in phases] == [
        ("write", 0, False), ("read", 0, False), ("scan", 1, False)]
    write, read, scan = phases
    assert write["end_ts_ns"] <= read["begin_ts_ns"] <= scan["begin_ts_ns"]
    assert scan["end_ts_ns"] <= read["end_ts_ns"]
    assert read["duration_ns"] == read["end_ts_ns"] - read["begin_ts_ns"]
    frame = phased_trace.to_pandas("phases")
    assert list(frame["label"]) == ["write", "read", "scan"]
    assert list(frame["duration_ns"]) == [p["duration_ns"] for p in phases]


def test_phase_column(phased_trace):
    calls = phased_trace.to_pandas("syscalls")
    # The innermost phase open on the call's thread.
    writes = calls[calls["op"] == "write"]
    assert set(writes["phase"]) == {"write"} and set(writes["phase_id"]) == {0}
    reads = calls[(calls["op"] == "read") & (calls["phase"] != "")]
    assert set(reads["phase"]) == {"scan"} and reads["ret"].sum() == 16 * 65536
    asked = phased_trace.to_numpy("syscalls", columns=["op", "phase"])
    assert asked.dtype.names == ("op", "phase")
    assert sum(1 for op, ph in asked if op == "write" and ph == "write") == 16
