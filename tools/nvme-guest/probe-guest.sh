#!/bin/sh
# Guest script for run.sh (runs as /test.sh): captures the NVMe commands of nvme_guest_probe twice,
# through tracefs text and through a static libbpf program, and runs a static iotwin when one is
# in the initramfs. Every result goes to $IOTWIN_OUT for the host to check:
#   lba_size                 the namespace's logical block size from sysfs
#   max_sectors_kb           the largest request the block layer sends it
#   nvme_*.format            the NVMe tracepoint formats of this kernel
#   probe-tracefs.log        what the probe did during the tracefs capture
#   tracefs.txt              /sys/kernel/tracing/trace with nvme_setup_cmd + nvme_complete_rq on
#   probe-bpf.log, bpf.txt   the same for the BPF capture (nvme_guest_bpf output)
#   iotwin-*.txt             `iotwin --version` / `iotwin check` output and exit status
# Exit status: 0 when both captures ran and the probe succeeded both times.
set -u
out="${IOTWIN_OUT:?}"
tracing=/sys/kernel/tracing
dev=/dev/nvme0n1
status=0

[ -b "$dev" ] || { echo "probe-guest: $dev missing"; exit 10; }
cat "/sys/block/${dev#/dev/}/queue/logical_block_size" > "$out/lba_size"
cat "/sys/block/${dev#/dev/}/queue/max_sectors_kb" > "$out/max_sectors_kb"
for event in nvme_setup_cmd nvme_complete_rq nvme_sq; do
  cat "$tracing/events/nvme/$event/format" > "$out/$event.format" 2>/dev/null
done

# 1. tracefs: enable the two events, clear the buffer, run the probe, save the text.
echo 0 > "$tracing/tracing_on"
echo > "$tracing/trace"
echo 1 > "$tracing/events/nvme/nvme_setup_cmd/enable"
echo 1 > "$tracing/events/nvme/nvme_complete_rq/enable"
echo 1 > "$tracing/tracing_on"
nvme_guest_probe --dev "$dev" --log "$out/probe-tracefs.log" > /dev/null || {
  echo "probe-guest: probe failed under tracefs"; status=11; }
echo 0 > "$tracing/tracing_on"
cat "$tracing/trace" > "$out/tracefs.txt"
echo 0 > "$tracing/events/nvme/nvme_setup_cmd/enable"
echo 0 > "$tracing/events/nvme/nvme_complete_rq/enable"
echo > "$tracing/trace"
echo "probe-guest: tracefs capture: $(grep -c nvme_setup_cmd "$out/tracefs.txt") setup events"

# 2. BPF: classic tracepoint + tp_btf + completion tracepoint, loaded by static libbpf.
nvme_guest_bpf -- nvme_guest_probe --dev "$dev" --log "$out/probe-bpf.log" \
  > "$out/bpf.txt" 2> "$out/bpf.err"
bpf_status=$?
echo "$bpf_status" > "$out/bpf.status"
grep -E '^(load|attach|summary)' "$out/bpf.txt" | sed 's/^/probe-guest: bpf: /'
[ "$bpf_status" = 0 ] || { echo "probe-guest: nvme_guest_bpf exited $bpf_status"; status=12; }

# 3. A static iotwin, when the host put one in (not a failure of this script when absent).
if command -v iotwin > /dev/null; then
  iotwin --version > "$out/iotwin-version.txt" 2>&1
  echo "exit=$?" >> "$out/iotwin-version.txt"
  iotwin check > "$out/iotwin-check.txt" 2>&1
  echo "exit=$?" >> "$out/iotwin-check.txt"
  echo "probe-guest: iotwin --version: $(head -n 1 "$out/iotwin-version.txt")"
  echo "probe-guest: iotwin check: $(tail -n 1 "$out/iotwin-check.txt")"
fi
exit "$status"
