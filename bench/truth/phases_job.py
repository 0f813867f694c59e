#!/usr/bin/python3
"""Two phases marked by the program itself, with its own /proc/diskstats at their boundaries
(the ground-truth harness's phases row; needs Debian's python3-numpy).

    phases_job.py DIR DEVNAME OUT.json [MiB]

Phase "write": np.save of MiB (default 16) MiB of float32, fsynced. Phase "read": the file,
evicted from the page cache before the phase (POSIX_FADV_DONTNEED: this file only), read back
whole by np.load. Each phase is an intent begin..end pair written to $IOTWIN_MARKER as the
iotwin Python module writes them (docs/record.md, "Intent"); DEVNAME's /proc/diskstats line is
read right after the begin marker and right before the end marker, so that the device's own
counts cover no more than the phase's window. OUT.json: {label: {"before": [...], "after":
[...]}}, the diskstats fields after the name.
"""
import json
import os
import sys

import numpy as np

_marker_fd = None


def mark(kind, label):
    global _marker_fd
    if _marker_fd is None:
        path = os.environ.get("IOTWIN_MARKER", "")
        _marker_fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC) if path else -1
    if _marker_fd >= 0:
        os.write(_marker_fd, f"{kind} {label}\n".encode())


def diskstats(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if fields[2] == dev:
                return [int(x) for x in fields[3:]]
    raise SystemExit(f"phases_job.py: no {dev} in /proc/diskstats")


def phase(label, dev, out, work):
    mark("B", label)
    before = diskstats(dev)
    work()
    after = diskstats(dev)
    mark("E", label)
    out[label] = {"before": before, "after": after}


def main():
    data, dev, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    mib = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "layers.npy")
    out = {}

    def write():
        np.save(path, np.arange((mib << 20) // 4, dtype=np.float32))
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    def read():
        assert np.load(path).nbytes == mib << 20

    phase("write", dev, out, write)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    phase("read", dev, out, read)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
