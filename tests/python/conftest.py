"""Shared set-up of the Python module's tests (run by ctest: tests/python/CMakeLists.txt)."""
import os
import shutil
import subprocess

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "runtime: needs root and BPF (`iotwin record`)")


def _tool(env, name):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        pytest.skip("%s not set and %s not on PATH" % (env, name))
    return path


@pytest.fixture(scope="session")
def iotwin_bin():
    return _tool("IOTWIN_BIN", "iotwin")


@pytest.fixture(scope="session")
def synth_trace_bin():
    return _tool("IOTWIN_SYNTH_TRACE", "synth_trace")


@pytest.fixture(scope="session")
def strace_trace(tmp_path_factory, iotwin_bin):
    """A small trace imported from strace text: paths with commas and <>, flags, a proc table,
    fd snapshots, iovecs."""
    src = os.path.join(os.path.dirname(__file__), "..", "golden", "export_csv", "input.log")
    out = str(tmp_path_factory.mktemp("strace") / "t.iotwin")
    subprocess.run([iotwin_bin, "import", "--format", "strace", src, "-o", out], check=True,
                   capture_output=True)
    return out


@pytest.fixture(scope="session")
def synth_trace(tmp_path_factory, synth_trace_bin):
    """A synthetic trace of 30000 events: system calls, page faults, page cache, block."""
    out = str(tmp_path_factory.mktemp("synth") / "s.iotwin")
    subprocess.run([synth_trace_bin, out, "30000"], check=True, capture_output=True)
    return out
