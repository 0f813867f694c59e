#!/usr/bin/python3
"""Run a command and write the kernel's own accounting of it, read around its lifetime.

    procio.py OUT.json [--dev NAME] [--resident PATH]... -- CMD ARGS...

OUT.json holds the child's pid and exit status, its /proc/PID/io (syscr, syscw, rchar, wchar,
read_bytes, write_bytes, cancelled_write_bytes), read after it exited but before it is reaped,
and with --dev the /proc/diskstats line of block device NAME (e.g. loop3) just before the spawn
and just after the exit, with CLOCK_MONOTONIC times, and with --resident the page-cache pages
of each PATH at the same two moments (mincore, like fincore): sources that iotwin does not
compute.
/proc/PID/io sums the thread group's threads; children the command forks are not included
(their accounting goes with them), so drive programs that do their I/O in one process (fio
with thread=1). Exits with the command's status.
"""
import json
import os
import sys
import time

USAGE = "usage: procio.py OUT.json [--dev NAME] [--resident PATH]... -- CMD ARGS...\n"


def diskstats(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 3 and fields[2] == dev:
                return [int(x) for x in fields[3:]]
    raise SystemExit(f"procio.py: no device {dev} in /proc/diskstats")


def resident_pages(path):
    """Pages of PATH in the page cache now: mincore(2) over a shared read-only mapping (what
    fincore does; no page is faulted in)."""
    import ctypes
    size = os.path.getsize(path)
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
        try:
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(b & 1 for b in vec)


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.stderr.write(USAGE)
        return 2
    out, args = args[0], args[1:]
    dev, watch = None, []
    while args and args[0] in ("--dev", "--resident") and len(args) > 1:
        if args[0] == "--dev":
            dev = args[1]
        else:
            watch.append(args[1])
        args = args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        sys.stderr.write(USAGE)
        return 2
    argv = args[1:]
    result = {}
    result["resident_before"] = {path: resident_pages(path) for path in watch}
    if dev:
        result["diskstats_before"] = diskstats(dev)
        result["t_before_ns"] = time.monotonic_ns()
    # posix_spawn (vfork and exec): the child runs no Python code, so its calls are the
    # command's from its execve on.
    pid = os.posix_spawn(argv[0], argv, os.environ)
    # WNOWAIT leaves the child a zombie: its /proc/PID/io still holds the whole group's totals.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    if dev:
        result["t_after_ns"] = time.monotonic_ns()
        result["diskstats_after"] = diskstats(dev)
    result["resident_after"] = {path: resident_pages(path) for path in watch}
    io = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            key, value = line.split(":")
            io[key.strip()] = int(value)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    result.update({"pid": pid, "exit": code, "argv": argv, "io": io})
    with open(out, "w") as f:
        json.dump(result, f)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
