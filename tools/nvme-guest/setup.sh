#!/usr/bin/env bash
# Prepares the emulated-NVMe guest used by tools/nvme-guest/run.sh: installs qemu, a static busybox
# and cpio from Debian, and downloads ONE Debian cloud kernel package (about 26 MB) whose vmlinuz
# has the NVMe driver, BTF, BPF and tracepoints built in. Idempotent: a second run only checks.
#
# Usage: setup.sh [--print-kernel]
#   --print-kernel  print the path of the guest vmlinuz on stdout when done (for scripts)
# Environment:
#   IOTWIN_NVME_GUEST_CACHE       cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/iotwin/nvme-guest)
#   IOTWIN_NVME_GUEST_KERNEL_PKG  exact kernel package to use (default: the newest
#                                 linux-image-6.1.0-NN-cloud-amd64-unsigned apt knows about)
set -euo pipefail

print_kernel=0
for arg in "$@"; do
  case "$arg" in
    --print-kernel) print_kernel=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

log() { echo "nvme-guest setup: $*" >&2; }

cache="${IOTWIN_NVME_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/iotwin/nvme-guest}"
mkdir -p "$cache"
# One setup at a time per cache (tests may run in parallel): the second waits, then finds all done.
exec 9> "$cache/.setup.lock"
flock 9

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    log "apt-get update"
    apt-get update -qq >&2
    apt_updated=1
  fi
}

# --- host packages -------------------------------------------------------------------------------
# busybox-static installs /bin/busybox as a static binary; the dynamic 'busybox' package would not
# run inside the initramfs, so check the package rather than the command.
missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v cpio >/dev/null || missing+=(cpio)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed' ||
  missing+=(busybox-static)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing packages ${missing[*]} and not root: install them first"; exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A stale or absent package list makes install fail on a fresh machine: update and retry once.
  apt_install() {
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" \
      > "$cache/apt-install.log" 2>&1
  }
  if ! apt_install; then
    apt_update_once
    apt_install || { cat "$cache/apt-install.log" >&2; exit 1; }
  fi
fi

# --- guest kernel --------------------------------------------------------------------------------
if [ -s "$cache/vmlinuz" ] && [ -s "$cache/kernel-package" ]; then
  log "kernel $(cat "$cache/kernel-package") already in $cache"
else
  newest_cloud_kernel() {
    apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$' 2>/dev/null |
      awk '{print $1}' | sort -V | tail -n 1
  }
  work="$(mktemp -d "$cache/download.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  # Exactly one package by its full name: a glob would match gigabytes of kernel variants. A
  # stale package list can name a version the mirror no longer has: then update and choose again.
  pkg=""
  for attempt in 1 2; do
    pkg="${IOTWIN_NVME_GUEST_KERNEL_PKG:-$(newest_cloud_kernel)}"
    if [ -n "$pkg" ]; then
      log "downloading $pkg (one package, about 26 MB)"
      if (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "$pkg" >&2); then break; fi
    fi
    pkg=""
    [ "$attempt" = 1 ] && apt_update_once
  done
  [ -n "$pkg" ] || { log "could not download a linux-image-6.1.0-*-cloud-amd64-unsigned package"; exit 1; }
  deb="$(ls "$work"/*.deb)"
  deb_bytes="$(stat -c %s "$deb")"
  dpkg-deb -x "$deb" "$work/root"
  vmlinuz="$(ls "$work"/root/boot/vmlinuz-* | head -n 1)"
  config="$(ls "$work"/root/boot/config-* | head -n 1)"
  # The harness relies on these being built in (=y), not modules: the initramfs has no modules.
  for opt in CONFIG_BLK_DEV_NVME CONFIG_SERIAL_8250 CONFIG_DEBUG_INFO_BTF CONFIG_BPF_SYSCALL \
             CONFIG_BPF_EVENTS CONFIG_FTRACE_SYSCALLS CONFIG_BLK_DEV_INITRD CONFIG_DEVTMPFS; do
    grep -q "^$opt=y" "$config" || { log "$pkg: $opt is not =y; this kernel cannot be used"; exit 1; }
  done
  cp "$vmlinuz" "$work/vmlinuz" && mv "$work/vmlinuz" "$cache/vmlinuz"
  cp "$config" "$cache/config"
  echo "$deb_bytes" > "$cache/download-bytes"
  echo "$pkg" > "$cache/kernel-package"
  log "kernel $pkg ready ($deb_bytes bytes downloaded)"
fi

if [ "$print_kernel" = 1 ]; then echo "$cache/vmlinuz"; fi
