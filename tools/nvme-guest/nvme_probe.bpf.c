// BPF side of nvme_guest_bpf: records every NVMe command the kernel sets up, twice, through the
// classic tracepoint nvme:nvme_setup_cmd and through tp_btf/nvme_setup_cmd, and every completion
// through nvme:nvme_complete_rq. It proves that the guest kernel accepts both attachment kinds on
// the NVMe tracepoints and that CO-RE relocations against the guest's own BTF resolve: the
// structures below name only the fields used, and libbpf finds their offsets in the guest kernel.
//
// No vmlinux.h on purpose: the host kernel that builds this has no NVMe driver loaded, so its BTF
// lacks the NVMe types; the guest kernel (NVMe built in) has them.
// The libbpf headers need the kernel types first.
// clang-format off
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "nvme_probe_event.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

// Counts events the ring buffer had no room for, so the loader can say so instead of hiding it.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

// Tracepoint records as the guest kernel lays them out (relocated by CO-RE by name).
struct trace_event_raw_nvme_setup_cmd {
  int ctrl_id;
  int qid;
  __u8 opcode;
  __u16 cid;
  __u32 nsid;
  __u8 cdw10[24];
} __attribute__((preserve_access_index));

struct trace_event_raw_nvme_complete_rq {
  int ctrl_id;
  int qid;
  int cid;
  __u64 result;
  __u8 retries;
  __u8 flags;
  __u16 status;
} __attribute__((preserve_access_index));

// The NVMe submission queue entry (include/linux/nvme.h): struct nvme_command is a union whose
// members all start with the common header; the read/write view adds slba and length. libbpf
// matches `rw` and `common` inside the anonymous union of the real struct.
struct nvme_common_command {
  __u8 opcode;
  __u16 command_id;
  __le32 nsid;
} __attribute__((preserve_access_index));

struct nvme_rw_command {
  __u8 opcode;
  __u16 command_id;
  __le32 nsid;
  __le64 slba;
  __le16 length;
} __attribute__((preserve_access_index));

struct nvme_command {
  union {
    struct nvme_common_command common;
    struct nvme_rw_command rw;
  };
} __attribute__((preserve_access_index));

static __always_inline void CountDrop(void) {
  __u32 zero = 0;
  __u64* n = bpf_map_lookup_elem(&dropped, &zero);
  if (n) __sync_fetch_and_add(n, 1);
}

static __always_inline int IsReadWrite(__u8 opcode) {
  return opcode == kNvmeOpWrite || opcode == kNvmeOpRead;
}

SEC("tracepoint/nvme/nvme_setup_cmd")
int on_setup_tp(struct trace_event_raw_nvme_setup_cmd* ctx) {
  struct nvme_probe_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    CountDrop();
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->ts_ns = bpf_ktime_get_ns();
  e->source = kSourceTracepoint;
  e->kind = kKindSetup;
  e->qid = BPF_CORE_READ(ctx, qid);
  e->opcode = BPF_CORE_READ(ctx, opcode);
  e->cid = BPF_CORE_READ(ctx, cid);
  e->nsid = BPF_CORE_READ(ctx, nsid);
  if (e->qid != 0 && IsReadWrite(e->opcode)) {
    // cdw10..cdw15 as the tracepoint copies them: SLBA in cdw10-11, NLB-1 in the low 16 bits of
    // cdw12 (NVMe base spec, read/write commands). Little-endian on x86.
    __u8 cdw[12];
    bpf_core_read(cdw, sizeof(cdw), &ctx->cdw10);
    __u64 slba = 0;
    for (int i = 7; i >= 0; i--) slba = (slba << 8) | cdw[i];
    e->slba = slba;
    e->nlb = ((__u32)cdw[8] | ((__u32)cdw[9] << 8)) + 1;
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(on_setup_btf, void* req, struct nvme_command* cmd) {
  struct nvme_probe_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    CountDrop();
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->ts_ns = bpf_ktime_get_ns();
  e->source = kSourceBtf;
  e->kind = kKindSetup;
  // tp_btf has no qid argument; -1 says "unknown" to the loader.
  e->qid = -1;
  e->opcode = BPF_CORE_READ(cmd, common.opcode);
  e->cid = BPF_CORE_READ(cmd, common.command_id);
  e->nsid = BPF_CORE_READ(cmd, common.nsid);
  // Admin commands reuse opcodes 0x01/0x02 (delete/create SQ), but they carry nsid 0; namespace
  // I/O carries the namespace id.
  if (e->nsid != 0 && IsReadWrite(e->opcode)) {
    e->slba = BPF_CORE_READ(cmd, rw.slba);
    e->nlb = (__u32)BPF_CORE_READ(cmd, rw.length) + 1;
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("tracepoint/nvme/nvme_complete_rq")
int on_complete_tp(struct trace_event_raw_nvme_complete_rq* ctx) {
  struct nvme_probe_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    CountDrop();
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->ts_ns = bpf_ktime_get_ns();
  e->source = kSourceTracepoint;
  e->kind = kKindComplete;
  e->qid = BPF_CORE_READ(ctx, qid);
  e->cid = (__u16)BPF_CORE_READ(ctx, cid);
  e->status = BPF_CORE_READ(ctx, status);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
