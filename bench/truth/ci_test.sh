#!/usr/bin/env bash
# ctest truth_ci: bench/truth/run.sh --size ci (two short fio jobs and dd on a loop device).
# Fails when a figure is out of tolerance (unless listed in truth.py's EXPECTED_TO_FAIL, which
# it prints) or when fio, fincore, losetup or mkfs.ext4 is missing (test packages,
# tools/debian-packages.txt): a check that cannot run is not a pass.
# Skips (77) without root or BPF unless IOTWIN_REQUIRE_BPF=1, like the runtime tests.
set -euo pipefail
build="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $(id -u) -ne 0 || ! -e /sys/kernel/btf/vmlinux ]]; then
  [[ "${IOTWIN_REQUIRE_BPF:-0}" == 1 ]] && { echo "truth_ci: needs root and BPF" >&2; exit 1; }
  echo "truth_ci: skipped (needs root and BPF)"; exit 77
fi
for tool in fio fincore losetup mkfs.ext4 /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "truth_ci: $tool missing (tools/bootstrap.sh test)" >&2; exit 1; }
done
IOTWIN_BUILD_DIR="$build" "$here/run.sh" --size ci
