#!/usr/bin/env bash
# The Debian package (cpack -G DEB in the build directory) installs and runs: built from the
# build tree, its dependencies resolved by apt without changing this machine (--simulate),
# unpacked into an empty root where `iotwin check` runs, `iotwin-record(1)` renders, the
# completion is in place and `import iotwin` reads a trace.
# Usage: package_install.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/iotwin-package-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "package_install: $*" >&2
  exit 1
}

cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$work"/out/iotwin_*.deb)
echo "package: $deb ($(stat -c %s "$deb") bytes)"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libbpf1 libzstd1 libxxhash0 liburing2 libaio1 libsodium23; do
  [[ $depends == *"$lib "* || $depends == *"$lib," || $depends == *"$lib" ]] || fail "Depends lacks $lib"
done
apt-get install --simulate --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log" >&2; fail "apt cannot resolve its dependencies"; }

root=$work/root
mkdir "$root"
dpkg-deb -x "$deb" "$root"
for f in usr/bin/iotwin usr/bin/iotwin-workload usr/share/man/man1/iotwin.1 \
  usr/share/man/man1/iotwin-record.1 usr/share/bash-completion/completions/iotwin \
  usr/share/zsh/vendor-completions/_iotwin; do
  [ -e "$root/$f" ] || fail "the package lacks /$f"
done
"$root/usr/bin/iotwin" -V
"$root/usr/bin/iotwin" check >"$work/check.txt" 2>&1 || { cat "$work/check.txt" >&2; fail "iotwin check failed"; }
grep -q "syscall" "$work/check.txt" || fail "iotwin check printed no syscall layer"
man -l "$root/usr/share/man/man1/iotwin-record.1" 2>/dev/null | grep -q "OVERHEAD" ||
  fail "iotwin-record(1) does not render with an OVERHEAD section"

module=$(ls -d "$root"/usr/lib/python3/dist-packages/iotwin 2>/dev/null || true)
if [ -n "$module" ]; then
  "$root/usr/bin/iotwin-workload" --help >/dev/null
  trace=$work/t.iotwin
  "$root/usr/bin/iotwin" record -o "$trace" --no-status -- \
    "$root/usr/bin/iotwin-workload" kv-offload --dir "$work/kv" --chunks 4 --gets 8 >/dev/null 2>&1 ||
    fail "recording with the packaged binaries failed"
  PYTHONPATH=$root/usr/lib/python3/dist-packages /usr/bin/python3 -c '
import sys, iotwin
t = iotwin.open(sys.argv[1])
rows = t.to_numpy("syscalls")
assert len(rows) > 0, "no syscall rows"
print("python: %d syscall rows from the packaged module" % len(rows))' "$trace" ||
    fail "the packaged Python module cannot read a trace"
fi
echo "package_install: ok"
