// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* nvme.bpf.c: the NVMe driver layer. One IOT_REC_NVME record when the driver
 * sets up the command of a followed request (nvme_setup_cmd), one when it
 * completes (nvme_complete_rq), and one per submission-queue head update the
 * completion reports (nvme_sq), all carrying the request identity rq_id that
 * the BLOCK records of the same request carry (docs/block-layer.md).
 *
 * Optional: loaded only when the running kernel has the NVMe tracepoints
 * (driver built in, or nvme_core loaded; the loader looks in the kernel's
 * BTF first). The build host may have no NVMe driver at all, so its
 * vmlinux.h lacks the NVMe types: the command is read by the offsets the NVMe
 * base specification fixes (a 64-byte submission queue entry), and the two
 * driver structures used are declared below with only the fields read, which
 * CO-RE relocates by name against the running kernel's BTF.
 *
 * The setup runs before the block layer's issue event (nvme_queue_rq sets up
 * the command, then starts the request), so it may be the first event of a
 * request: it adopts requests like block.bpf.c does.
 */
#include "block_common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* drivers/nvme/host/nvme.h */
struct nvme_ctrl___iot {
	int instance;
} __attribute__((preserve_access_index));

union nvme_result___iot {
	__u64 u64;
} __attribute__((preserve_access_index));

/* The driver's per-request data, right after struct request (nvme_req()). */
struct nvme_request___iot {
	void *cmd;
	union nvme_result___iot result;
	__u8 retries;
	__u8 flags;
	__u16 status;
	struct nvme_ctrl___iot *ctrl;
} __attribute__((preserve_access_index));

/* NVMe opcodes whose CDW10-12 are SLBA (64 bits) and NLB-1 (16 bits):
 * write, read, write uncorrectable, compare, write zeroes, verify, copy's
 * destination is different (cdw10-11 SDLBA, cdw12 ranges), zone append. */
static __always_inline bool iot_nvme_lba_range(__u8 opcode)
{
	return opcode == 0x01 || opcode == 0x02 || opcode == 0x04 || opcode == 0x05 ||
	       opcode == 0x08 || opcode == 0x0c || opcode == 0x7d;
}

static __always_inline struct nvme_request___iot *iot_nvme_req(struct request *req)
{
	return (struct nvme_request___iot *)((void *)req + bpf_core_type_size(struct request));
}

/* nvme_req_qid(): 0 for the admin queue (no namespace behind it). */
static __always_inline __u16 iot_nvme_qid(struct request *req)
{
	if (!BPF_CORE_READ(req, q, queuedata))
		return 0;
	return BPF_CORE_READ(req, mq_hctx, queue_num) + 1;
}

static __always_inline void iot_nvme_init(struct iot_nvme *r, __u16 phase, struct request *req,
					  struct iot_blk_rq *f)
{
	__builtin_memset(r, 0, sizeof(*r));
	r->hdr.type = IOT_REC_NVME;
	r->hdr.size = sizeof(*r);
	r->phase = phase;
	r->cpu = bpf_get_smp_processor_id();
	r->ts = bpf_ktime_get_ns();
	r->rq_id = f->id;
	r->qid = iot_nvme_qid(req);
	r->dev = iot_rq_dev(req);
	if (bpf_core_type_exists(struct nvme_request___iot) &&
	    bpf_core_field_exists(struct nvme_request___iot, ctrl))
		r->ctrl_id = BPF_CORE_READ(iot_nvme_req(req), ctrl, instance);
	__u32 *lba = bpf_map_lookup_elem(&iot_blk_lba, &r->dev);
	r->lba_size = lba ? *lba : BPF_CORE_READ(req, q, limits.logical_block_size);
}

/* Decodes the first 13 dwords of a submission queue entry (NVMe base spec
 * 2.0, figure "Common Command Format"): opcode byte 0, flags byte 1, command
 * id bytes 2-3, namespace id dword 1, CDW10.. from byte 40. Fabrics commands
 * (opcode 0x7f) carry their command type in byte 4 instead of a namespace. */
static __always_inline void iot_nvme_decode(struct iot_nvme *r, const __u32 *dw)
{
	r->opcode = dw[0] & 0xff;
	r->flags = (dw[0] >> 8) & 0xff;
	r->cid = dw[0] >> 16;
	r->cdw10 = dw[10];
	r->cdw11 = dw[11];
	r->cdw12 = dw[12];
	if (r->opcode == 0x7f) {
		r->fctype = dw[1] & 0xff;
		return;
	}
	r->nsid = dw[1];
	if (r->qid != 0 && iot_nvme_lba_range(r->opcode)) {
		r->slba = (__u64)dw[10] | ((__u64)dw[11] << 32);
		r->nlb = (dw[12] & 0xffff) + 1;
	}
}

SEC("tp_btf/nvme_setup_cmd")
int BPF_PROG(iot_nvme_setup, struct request *req, void *cmd)
{
	struct iot_blk_rq *f = iot_rq_follow(req, true);
	if (!f) {
		iot_blk_stat(IOT_BLK_STAT_NVME_UNFOLLOWED);
		return 0;
	}
	__u32 dw[13] = {};
	if (bpf_probe_read_kernel(dw, sizeof(dw), cmd))
		return 0;
	struct iot_nvme r;
	iot_nvme_init(&r, IOT_NVME_SETUP, req, f);
	iot_nvme_decode(&r, dw);
	iot_output(&r, sizeof(r), IOT_SRC_NVME);
	return 0;
}

SEC("tp_btf/nvme_complete_rq")
int BPF_PROG(iot_nvme_complete, struct request *req)
{
	struct iot_blk_rq *f = iot_rq_follow(req, false);
	if (!f)
		return 0;
	struct iot_nvme r;
	iot_nvme_init(&r, IOT_NVME_COMPLETE, req, f);
	if (bpf_core_type_exists(struct nvme_request___iot)) {
		struct nvme_request___iot *nreq = iot_nvme_req(req);
		r.status = BPF_CORE_READ(nreq, status);
		r.result = BPF_CORE_READ(nreq, result.u64);
		r.retries = BPF_CORE_READ(nreq, retries);
		__u32 dw[13] = {};
		void *cmd = BPF_CORE_READ(nreq, cmd);
		if (cmd && !bpf_probe_read_kernel(dw, sizeof(dw), cmd)) {
			__u8 flags = BPF_CORE_READ(nreq, flags);
			iot_nvme_decode(&r, dw);
			r.flags = flags; /* the driver's request flags at completion */
		}
	}
	iot_output(&r, sizeof(r), IOT_SRC_NVME);
	return 0;
}

/* The controller's submission queue head as a completion reported it, and
 * the driver's tail: the queue depth the command saw. */
SEC("tp_btf/nvme_sq")
int BPF_PROG(iot_nvme_sq, struct request *req, __u16 sq_head, int sq_tail)
{
	struct iot_blk_rq *f = iot_rq_follow(req, false);
	if (!f)
		return 0;
	struct iot_nvme r;
	iot_nvme_init(&r, IOT_NVME_SQ, req, f);
	r.cdw10 = sq_head;
	r.cdw11 = (__u32)sq_tail;
	iot_output(&r, sizeof(r), IOT_SRC_NVME);
	return 0;
}
