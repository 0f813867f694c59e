"""iotwin.marker / iotwin.phase: the marker-file lines of docs/record.md, or nothing."""
import os
import subprocess
import sys

import pytest

import iotwin

PROGRAM = """
import iotwin
iotwin.marker("start")
with iotwin.phase("load"):
    iotwin.marker("step", 7)
"""


def run(env):
    return subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, check=True)


def test_markers_written_to_the_marker_file(tmp_path):
    marker = tmp_path / "marker"
    marker.write_bytes(b"")  # iotwin record creates it; the program never does
    run(dict(os.environ, IOTWIN_MARKER=str(marker)))
    assert marker.read_bytes() == b"I start\nB load\nI step 7\nE load\n"


def test_markers_do_nothing_without_iotwin_record(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "IOTWIN_MARKER"}
    run(env)  # no error, nothing to write to
    missing = tmp_path / "not-created"
    run(dict(os.environ, IOTWIN_MARKER=str(missing)))  # unopenable: markers off
    assert not missing.exists()


def test_bad_labels_are_refused():
    for label in ["", "two words", "x" * 201, "caf\u00e9"]:
        with pytest.raises(ValueError):
            iotwin.marker(label)
    with pytest.raises(ValueError):
        iotwin.marker("ok", -1)
