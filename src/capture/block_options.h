// Options of the block, NVMe and interference layers of `iotwin record` (docs/block-layer.md).
// Kept apart from block_bpf.h so that the recorder's options need no BPF headers.
#pragma once

namespace iotwin::capture {

struct BlockOptions {
  bool block = true;  // BLOCK records (--no-block)
  bool nvme = true;   // NVME records where the kernel has the NVMe driver (--no-nvme)
  // SCHED records: off-CPU and interrupt intervals of threads with I/O in flight (--sched /
  // --no-sched). On by default: it costs one hash lookup per context switch and interrupt,
  // measured in docs/block-layer.md.
  bool sched = true;
};

}  // namespace iotwin::capture
