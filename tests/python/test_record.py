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
