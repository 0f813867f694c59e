// One NVMe event as nvme_probe.bpf.c sends it to nvme_guest_bpf through the ring buffer.
#ifndef IOTWIN_TOOLS_NVME_GUEST_NVME_PROBE_EVENT_H_
#define IOTWIN_TOOLS_NVME_GUEST_NVME_PROBE_EVENT_H_

#include <linux/types.h>

enum {
  kSourceTracepoint = 1,  // tracepoint/nvme/... (classic, fields from the trace record)
  kSourceBtf = 2,         // tp_btf/nvme_setup_cmd (fields from the struct nvme_command argument)
};
enum { kKindSetup = 1, kKindComplete = 2 };
enum { kNvmeOpFlush = 0x00, kNvmeOpWrite = 0x01, kNvmeOpRead = 0x02 };

struct nvme_probe_event {
  __u64 ts_ns;
  __u64 slba;  // read/write only
  __u32 nlb;   // read/write only: number of logical blocks (1-based)
  __u32 nsid;
  __s32 qid;  // -1 where the attachment point does not give it
  __u16 cid;
  __u16 status;  // completions: NVMe status field
  __u8 source;
  __u8 kind;
  __u8 opcode;
  __u8 pad[5];
};

#endif  // IOTWIN_TOOLS_NVME_GUEST_NVME_PROBE_EVENT_H_
