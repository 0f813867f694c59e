"""A Python program recorded by `iotwin record`: its markers become intents and its reads are
the bytes per file the module reports. Needs root and BPF (ctest label runtime)."""
import os
import subprocess
import sys

import pytest

import iotwin

pytestmark = pytest.mark.runtime

PROGRAM = """
import os, sys, iotwin
with iotwin.phase("load"):
    fd = os.open(sys.argv[1], os.O_RDONLY)
    while os.read(fd, 65536):
        pass
    os.close(fd)
iotwin.marker("epoch", 3)
"""


def test_recorded_markers_and_bytes_per_file(iotwin_bin, tmp_path):
    if os.geteuid() != 0 and os.environ.get("IOTWIN_REQUIRE_BPF") != "1":
        pytest.skip("needs root (IOTWIN_REQUIRE_BPF=1 makes this a failure)")
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(300000))
    trace = tmp_path / "run.iotwin"
    subprocess.run([iotwin_bin, "record", "-o", str(trace), "--no-status", "--", sys.executable,
                    "-c", PROGRAM, str(data)], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    t = iotwin.open(str(trace))
    intents = t.to_pandas("intents")
    assert [(k, l) for k, l in zip(intents["kind"], intents["label"])] == [
        ("begin", "load"), ("end", "load"), ("instant", "epoch")]
    assert intents["value"].iloc[2] == 3
    reads = t.to_pandas("syscalls", where={"op": "read", "path": str(data)})
    assert reads["ret"].clip(lower=0).sum() == 300000


def test_merged_trace_has_a_host_column(iotwin_bin, tmp_path):
    """Two recordings merged as two hosts: each row names its host, and a host's rows are its
    own program's (the bytes each read)."""
    if os.geteuid() != 0 and os.environ.get("IOTWIN_REQUIRE_BPF") != "1":
        pytest.skip("needs root (IOTWIN_REQUIRE_BPF=1 makes this a failure)")
    traces = []
    for name, size in (("a", 100000), ("b", 200000)):
        data = tmp_path / ("data-" + name)
        data.write_bytes(os.urandom(size))
        trace = tmp_path / (name + ".iotwin")
        subprocess.run([iotwin_bin, "record", "-o", str(trace), "--no-status", "--",
                        sys.executable, "-c", PROGRAM, str(data)], check=True,
                       capture_output=True,
                       env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
        traces.append(str(trace))
    job = tmp_path / "job.iotwin"
    subprocess.run([iotwin_bin, "merge", "-o", str(job)] + traces +
                   ["--name", "a", "--name", "b"], check=True, capture_output=True)
    t = iotwin.open(str(job))
    assert t.hosts() == ["a", "b"]
    reads = t.to_pandas("syscalls", where={"op": "read"})
    assert set(reads["host"]) == {"a", "b"}
    assert ((reads["tgid"] // (1 << 22)) == (reads["host"] == "b").astype(int)).all()
    for name, size in (("a", 100000), ("b", 200000)):
        mine = reads[(reads["host"] == name) & (reads["path"] == str(tmp_path / ("data-" + name)))]
        assert mine["ret"].clip(lower=0).sum() == size
    assert list(t.to_pandas("syscalls", columns=["host"])["host"].unique()) == ["a", "b"]
    assert iotwin.open(traces[0]).hosts() == []
    assert "host" not in iotwin.open(traces[0]).to_pandas("syscalls").columns
