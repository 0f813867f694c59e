#!/usr/bin/env python3
"""Keeps what `./tools/bootstrap.sh demo` installs and builds minimal.

  demo_packages.py SOURCE_DIR BUILD_DIR

Checks, on a build directory where the demo's targets were built:
  1. the demo's targets (tools/bootstrap.sh: demo_targets) are built from nothing under tests/ or
     bench/ and link neither GoogleTest nor Google Benchmark;
  2. every package of purpose `build` in tools/debian-packages.txt owns a file that building those
     targets uses (a compiler, a tool a build step runs, a header a compile read, a library a link
     named, a program configuring ran), or is an empty transitional package whose direct
     dependency does, so a package only the tests use cannot creep into the demo's list.
Exit 0 when both hold; 1 with one line per problem otherwise; 77 (skip) without dpkg.
"""
import os
import re
import shutil
import subprocess
import sys

# Files a package provides that dpkg does not list (made by its maintainer scripts).
GENERATED_FILES = {"/etc/ssl/certs/ca-certificates.crt": "ca-certificates",
                   "/usr/bin/c++": "g++", "/usr/bin/cc": "gcc"}
TEST_ONLY_LIBRARIES = ("gtest", "gmock", "libbenchmark")


def run(cmd, cwd=None):
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


def demo_targets(src):
    text = open(os.path.join(src, "tools/bootstrap.sh")).read()
    m = re.search(r"^demo_targets=\(([^)]*)\)", text, re.M)
    if not m:
        sys.exit("tools/bootstrap.sh: no demo_targets=(...) line")
    return m.group(1).split()


def build_packages(src):
    """(package, command or None) of each `build` entry."""
    path = os.path.join(src, "tools/debian-packages.txt")
    pkgs = []
    for line in open(path):
        fields = line.split("#", 1)[0].split()
        if len(fields) == 2 and fields[1] == "build":
            pkg, _, cmd = fields[0].partition("|")
            pkgs.append((pkg, cmd or None))
    return pkgs


def used_files(build, targets):
    """Absolute paths the demo targets' build steps and configure step use."""
    commands = run(["ninja", "-C", build, "-t", "commands"] + targets)
    used = set()
    objects = []
    for line in commands.splitlines():
        for word in re.split(r"[\s=;\"']+", line):
            if word.startswith("-l") and len(word) > 2:
                for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
                    lib = os.path.join(d, "lib%s.so" % word[2:])
                    if os.path.exists(lib):
                        used.add(lib)
            elif word.startswith("/"):
                used.add(word)
            elif word.endswith(".o"):
                objects.append(word)
        prog = line.split()[0] if line.split() else ""
        if prog and not prog.startswith("/") and shutil.which(prog):
            used.add(shutil.which(prog))
    deps = run(["ninja", "-C", build, "-t", "deps"] + objects) if objects else ""
    for line in deps.splitlines():
        if line.startswith("    /"):
            used.add(line.strip())
    cache = open(os.path.join(build, "CMakeCache.txt")).read()
    for key in ("CMAKE_COMMAND", "CMAKE_MAKE_PROGRAM", "PKG_CONFIG_EXECUTABLE", "IOTWIN_NPM",
                "CMAKE_CXX_COMPILER", "CMAKE_C_COMPILER"):
        m = re.search(r"^%s:[A-Z]+=(/\S+)$" % key, cache, re.M)
        if m:
            used.add(m.group(1))
    # npm fetches over TLS with the system's CA bundle.
    if re.search(r"^IOTWIN_NPM:FILEPATH=/", cache, re.M) and os.path.exists(
            "/etc/ssl/certs/ca-certificates.crt"):
        used.add("/etc/ssl/certs/ca-certificates.crt")
    return commands, used


def owners(paths):
    """path -> package, through dpkg -S; tries the path, its resolved form and /usr-less forms."""
    candidates = {}
    for p in paths:
        forms = {p, os.path.realpath(p)}
        for f in list(forms):
            if f.startswith("/usr/lib/") or f.startswith("/usr/bin/") or f.startswith("/usr/sbin/"):
                forms.add(f[4:])
        for f in forms:
            candidates.setdefault(f, p)
    owned = {}
    names = sorted(candidates)
    for i in range(0, len(names), 500):
        out = subprocess.run(["dpkg", "-S"] + names[i:i + 500], capture_output=True, text=True).stdout
        for line in out.splitlines():
            pkgs, _, path = line.partition(": ")
            if path in candidates:
                for pkg in pkgs.split(", "):
                    owned.setdefault(pkg.split(":")[0], set()).add(path)
    for path, pkg in GENERATED_FILES.items():
        if path in paths:
            owned.setdefault(pkg, set()).add(path)
    return owned


def is_empty(pkg):
    """True for a transitional or meta package: no files but documentation and lintian notes."""
    out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout
    for path in out.splitlines():
        if os.path.isdir(path) or path.startswith(("/usr/share/doc", "/usr/share/lintian")):
            continue
        return False
    return True


def direct_dependencies(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", pkg], capture_output=True,
                         text=True).stdout
    deps = set()
    for clause in out.split(","):
        for alt in clause.split("|"):
            name = alt.strip().split(" ")[0].split(":")[0]
            if name:
                deps.add(name)
    return deps


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, build = (os.path.abspath(a) for a in sys.argv[1:])
    if not shutil.which("dpkg"):
        print("skip: no dpkg")
        return 77
    targets = demo_targets(src)
    problems = []
    commands, used = used_files(build, targets)
    for marker in (src + "/tests/", src + "/bench/") + TEST_ONLY_LIBRARIES:
        for line in commands.splitlines():
            if marker in line:
                problems.append("demo targets %s: a build step uses %r: %s" %
                                (" ".join(targets), marker, line[:160]))
                break
    owned = owners(used)
    for pkg, cmd in build_packages(src):
        if pkg in owned:
            continue
        # PACKAGE|COMMAND stands for COMMAND from any source (the bootstrap skips the package then).
        if cmd and shutil.which(cmd) and {shutil.which(cmd), os.path.realpath(shutil.which(cmd))} & used:
            continue
        if is_empty(pkg) and any(d in owned for d in direct_dependencies(pkg)):
            continue
        problems.append("tools/debian-packages.txt: %s is marked `build` but building and running "
                        "the demo (%s) uses none of its files: "
                        "give it the purpose that needs it" % (pkg, " ".join(targets)))
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print("ok: %d build packages, each used by the demo build; %d build steps, none from tests "
              "or benchmarks" % (len(build_packages(src)), len(commands.splitlines())))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
