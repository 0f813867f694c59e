#!/usr/bin/env bash
# Boots a throw-away qemu guest with an emulated NVMe controller, runs a test script in it and
# brings the script's result files back. The guest is a Debian cloud kernel (NVMe, BTF, BPF and
# tracepoints built in; prepared by setup.sh) with an initramfs holding a static busybox, the
# given static binaries and the script. Nothing on the host is touched except the --out directory
# and a temporary work directory: the NVMe namespace is a sparse image file.
#
# Usage: run.sh --script SCRIPT.sh --out DIR [--binary PATH...] [--file PATH...]
#               [--disk-mb N] [--lba-size 512|4096] [--timeout S] [--mem-mb N]
#               [--kernel VMLINUZ] [--busybox PATH] [--kvm] [--verbose]
#   --binary PATH...  static executables copied to /bin in the guest (repeatable, several paths
#                     may follow one --binary); a dynamically linked one is refused
#   --file PATH...    other files copied to /data in the guest
#   --script FILE     shell script run as /test.sh by busybox sh; its exit status is the guest's
#   --disk-mb N       size of the NVMe namespace (default 64)
#   --lba-size N      logical (and physical) block size of the namespace: 512 or 4096 (default 512)
#   --timeout S       wall-clock limit for the whole boot (default 120); qemu is killed past it
#   --mem-mb N        guest memory (default 512)
#   --out DIR         created if needed; receives console.log, harness.txt and results/
#   --kvm             use KVM instead of software emulation (TCG, the default)
#   --verbose         stream the guest console to stderr
#
# Inside the guest the script finds: /dev/nvme0n1 (the namespace), tracefs at /sys/kernel/tracing,
# debugfs at /sys/kernel/debug, bpffs at /sys/fs/bpf, $IOTWIN_OUT (=/out, write result files
# there), /data (the --file files), PATH=/bin. Its stdout and stderr go to the serial console
# (DIR/console.log).
#
# Results come out over a second serial port (COM2, /dev/ttyS1 in the guest) as a tar.gz archive,
# with its size and SHA-256 announced on the console; the host checks both before extracting. A
# serial port adds no block device to the guest, so the block and NVMe layers see only the
# script's own I/O.
#
# Exit status: the script's exit status when the results came back intact; 124 when the guest ran
# past --timeout; 125 when the harness failed (no or damaged results, qemu error); 2 on bad usage.
# DIR/harness.txt holds key=value lines: exit_status, timed_out, qemu_wall_s, guest_ready_s (guest
# uptime when /test.sh started), guest_script_s, lba_size, disk_mb, kernel, initramfs_bytes.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${IOTWIN_NVME_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iotwin/nvme-guest}"

binaries=()
files=()
script=""
out=""
disk_mb=64
lba_size=512
timeout_s=120
mem_mb=512
kernel="$cache/vmlinuz"
busybox=/bin/busybox
verbose=0
kvm=0

die_usage() { echo "run.sh: $*" >&2; echo "see the header of $0 for usage" >&2; exit 2; }
log() { echo "nvme-guest: $*" >&2; }

list_target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) list_target=binaries; shift ;;
    --file) list_target=files; shift ;;
    --script) script="${2:?}"; list_target=""; shift 2 ;;
    --out) out="${2:?}"; list_target=""; shift 2 ;;
    --disk-mb) disk_mb="${2:?}"; list_target=""; shift 2 ;;
    --lba-size) lba_size="${2:?}"; list_target=""; shift 2 ;;
    --timeout) timeout_s="${2:?}"; list_target=""; shift 2 ;;
    --mem-mb) mem_mb="${2:?}"; list_target=""; shift 2 ;;
    --kernel) kernel="${2:?}"; list_target=""; shift 2 ;;
    --busybox) busybox="${2:?}"; list_target=""; shift 2 ;;
    --verbose) verbose=1; list_target=""; shift ;;
    --kvm) kvm=1; list_target=""; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    --*) die_usage "unknown option $1" ;;
    *)
      case "$list_target" in
        binaries) binaries+=("$1") ;;
        files) files+=("$1") ;;
        *) die_usage "unexpected argument '$1'" ;;
      esac
      shift ;;
  esac
done

[ -n "$script" ] || die_usage "--script is required"
[ -n "$out" ] || die_usage "--out is required"
[ -f "$script" ] || die_usage "script $script not found"
case "$lba_size" in 512|4096) ;; *) die_usage "--lba-size must be 512 or 4096, not $lba_size" ;; esac
[[ "$disk_mb" =~ ^[0-9]+$ ]] && [ "$disk_mb" -ge 1 ] || die_usage "--disk-mb must be a positive integer"
[[ "$timeout_s" =~ ^[0-9]+$ ]] && [ "$timeout_s" -ge 1 ] || die_usage "--timeout must be a positive integer"
[[ "$mem_mb" =~ ^[0-9]+$ ]] && [ "$mem_mb" -ge 128 ] || die_usage "--mem-mb must be at least 128"
[ -s "$kernel" ] || die_usage "guest kernel $kernel missing: run $here/setup.sh first"
command -v qemu-system-x86_64 >/dev/null || die_usage "qemu-system-x86_64 missing: run $here/setup.sh first"
command -v cpio >/dev/null || die_usage "cpio missing: run $here/setup.sh first"

is_static() {
  # A dynamic executable names its program interpreter; the initramfs has no libc to offer it.
  ! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter'
}
[ -x "$busybox" ] && is_static "$busybox" || die_usage "$busybox is not a static busybox (install busybox-static)"
for b in ${binaries[@]+"${binaries[@]}"}; do
  [ -f "$b" ] && [ -x "$b" ] || die_usage "binary $b not found or not executable"
  is_static "$b" || die_usage "binary $b is dynamically linked; the guest has no shared libraries"
done
for f in ${files[@]+"${files[@]}"}; do [ -f "$f" ] || die_usage "file $f not found"; done

mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -rf "$out/results" "$out/console.log" "$out/harness.txt" "$out/results.tar"
work="$(mktemp -d "${TMPDIR:-/tmp}/iotwin-nvme-guest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# --- initramfs -----------------------------------------------------------------------------------
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,out,data,run}
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
for b in ${binaries[@]+"${binaries[@]}"}; do
  # Without debug information: a smaller initramfs boots faster under emulation.
  dest="$root/bin/$(basename "$b")"
  if ! strip --strip-debug -o "$dest" "$b" 2>/dev/null; then cp "$b" "$dest"; fi
done
for f in ${files[@]+"${files[@]}"}; do cp "$f" "$root/data/"; done
cp "$script" "$root/test.sh"
chmod 755 "$root/test.sh"

cat > "$root/init" <<'INIT'
#!/bin/busybox sh
# Generated by tools/nvme-guest/run.sh: mount the pseudo file systems, run /test.sh, send /out back
# over /dev/ttyS1 as a tar archive, power off.
export PATH=/bin IOTWIN_OUT=/out IOTWIN_GUEST=1 HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
mount -t tmpfs tmpfs /tmp
read -r ready _ < /proc/uptime
echo "IOTWIN-GUEST-READY uptime=$ready"
cd /tmp
sh /test.sh < /dev/null
status=$?
read -r done_at _ < /proc/uptime
echo "$status" > /out/exit_status
echo "IOTWIN-GUEST-EXIT status=$status uptime=$done_at"
# The archive goes through a raw tty: no newline translation, no echo. The last close of the
# port waits until the UART has sent every byte, so powering off afterwards loses nothing. The
# archive is gzipped: the serial link moves only about 300 KB/s under TCG.
tar -czf /tmp/results.tar -C /out .
bytes=$(wc -c < /tmp/results.tar)
sum=$(sha256sum /tmp/results.tar)
exec 3<>/dev/ttyS1
stty raw -echo -ixon -ixoff <&3
cat /tmp/results.tar >&3
exec 3>&-
echo "IOTWIN-GUEST-RESULTS bytes=$bytes sha256=${sum%% *}"
poweroff -f
INIT
chmod 755 "$root/init"

initrd="$work/initrd.gz"
(cd "$root" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) > "$initrd"
initrd_bytes="$(stat -c %s "$initrd")"

# --- disks and qemu ------------------------------------------------------------------------------
nvme_img="$work/nvme.img"
truncate -s "${disk_mb}M" "$nvme_img"

# TCG by default: /dev/kvm exists on our VMs but a nested KVM guest hung there without output.
accel=(-accel tcg)
if [ "$kvm" = 1 ]; then accel=(-accel kvm); fi

qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot -monitor none
  "${accel[@]}" -m "$mem_mb" -smp 1
  -kernel "$kernel" -initrd "$initrd"
  -append "console=ttyS0 quiet panic=-1"
  -serial stdio
  -serial "file:$work/results.tar"
  -drive "file=$nvme_img,if=none,id=nvm0,format=raw"
  -device "nvme,id=nvme0,serial=iotwin-nvme0"
  -device "nvme-ns,drive=nvm0,bus=nvme0,nsid=1,logical_block_size=$lba_size,physical_block_size=$lba_size")
printf '%q ' "${qemu[@]}" > "$out/qemu.cmd"
echo >> "$out/qemu.cmd"

[ "$verbose" = 1 ] && log "booting (lba $lba_size, disk ${disk_mb} MiB, timeout ${timeout_s}s)"
start_ns=$(date +%s%N)
set +e
if [ "$verbose" = 1 ]; then
  timeout -k 5 "$timeout_s" "${qemu[@]}" < /dev/null 2>&1 | tee "$out/console.log" >&2
  qemu_rc=${PIPESTATUS[0]}
else
  timeout -k 5 "$timeout_s" "${qemu[@]}" < /dev/null > "$out/console.log" 2>&1
  qemu_rc=$?
fi
set -e
end_ns=$(date +%s%N)
qemu_wall_s=$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')

# --- results -------------------------------------------------------------------------------------
# The console passes through the guest's tty layer: strip the CR it adds before each LF.
console_field() {  # console_field MARKER KEY -> value of KEY= on the last MARKER line
  tr -d '\r' < "$out/console.log" | awk -v m="$1" -v k="$2" '
    $1 == m { for (i = 2; i <= NF; i++) if (index($i, k "=") == 1) v = substr($i, length(k) + 2) }
    END { print v }'
}
guest_ready_s="$(console_field IOTWIN-GUEST-READY uptime)"
guest_done_s="$(console_field IOTWIN-GUEST-EXIT uptime)"
announced_status="$(console_field IOTWIN-GUEST-EXIT status)"
announced_bytes="$(console_field IOTWIN-GUEST-RESULTS bytes)"
announced_sum="$(console_field IOTWIN-GUEST-RESULTS sha256)"

timed_out=0
exit_status=125
problem=""
if [ "$qemu_rc" = 124 ] || [ "$qemu_rc" = 137 ]; then
  timed_out=1
  exit_status=124
  problem="guest ran past ${timeout_s}s and was killed"
elif [ "$qemu_rc" != 0 ]; then
  problem="qemu exited with status $qemu_rc"
elif [ -z "$announced_bytes" ]; then
  problem="the guest never announced its results (see console.log)"
else
  got_bytes="$(stat -c %s "$work/results.tar")"
  got_sum="$(sha256sum "$work/results.tar" | cut -d' ' -f1)"
  if [ "$got_bytes" != "$announced_bytes" ] || [ "$got_sum" != "$announced_sum" ]; then
    problem="results damaged in transfer: got $got_bytes bytes sha256 $got_sum, guest sent $announced_bytes bytes sha256 $announced_sum"
  else
    mkdir -p "$out/results"
    tar -xzf "$work/results.tar" -C "$out/results" --no-same-owner --no-same-permissions
    exit_status="$(cat "$out/results/exit_status" 2>/dev/null || echo "")"
    if ! [[ "$exit_status" =~ ^[0-9]+$ ]] || [ "$exit_status" != "$announced_status" ]; then
      problem="results lack a valid exit_status"
      exit_status=125
    fi
  fi
fi

guest_script_s=""
if [ -n "$guest_ready_s" ] && [ -n "$guest_done_s" ]; then
  guest_script_s=$(awk -v a="$guest_ready_s" -v b="$guest_done_s" 'BEGIN { printf "%.2f", b - a }')
fi
{
  echo "exit_status=$exit_status"
  echo "timed_out=$timed_out"
  echo "qemu_status=$qemu_rc"
  echo "qemu_wall_s=$qemu_wall_s"
  echo "guest_ready_s=$guest_ready_s"
  echo "guest_script_s=$guest_script_s"
  echo "lba_size=$lba_size"
  echo "disk_mb=$disk_mb"
  echo "kernel=$(cat "$cache/kernel-package" 2>/dev/null || echo "$kernel")"
  echo "initramfs_bytes=$initrd_bytes"
  echo "problem=$problem"
} > "$out/harness.txt"

if [ -n "$problem" ]; then
  log "$problem"
  log "last console lines:"
  tr -d '\r' < "$out/console.log" | tail -n 20 | sed 's/^/  | /' >&2
else
  log "guest exit status $exit_status; qemu ${qemu_wall_s}s, guest ready at ${guest_ready_s}s uptime; results in $out/results"
fi
exit "$exit_status"
