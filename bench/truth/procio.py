#!/usr/bin/python3
"""Run a command and write the kernel's own accounting of it, read around its lifetime.

    procio.py OUT.json [--dev NAME] -- CMD ARGS...

OUT.json holds the child's pid and exit status, its /proc/PID/io (syscr, syscw, rchar, wchar,
read_bytes, write_bytes, cancelled_write_bytes), read after it exited but before it is reaped,
and with --dev the /proc/diskstats line of block device NAME (e.g. loop3) just before the spawn
and just after the exit, with CLOCK_MONOTONIC times: sources that iotwin does not compute.
/proc/PID/io sums the thread group's threads; children the command forks are not included
(their accounting goes with them), so drive programs that do their I/O in one process (fio
with thread=1). Exits with the command's status.
"""
import json
import os
import sys
import time


def diskstats(dev):
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 3 and fields[2] == dev:
                return [int(x) for x in fields[3:]]
    raise SystemExit(f"procio.py: no device {dev} in /proc/diskstats")


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.stderr.write("usage: procio.py OUT.json [--dev NAME] -- CMD ARGS...\n")
        return 2
    out, args = args[0], args[1:]
    dev = None
    if args[0] == "--dev":
        dev, args = args[1], args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        sys.stderr.write("usage: procio.py OUT.json [--dev NAME] -- CMD ARGS...\n")
        return 2
    argv = args[1:]
    result = {}
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
