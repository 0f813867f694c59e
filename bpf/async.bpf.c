// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* async.bpf.c: io_uring requests, one ASYNC_IO record per submit and per
 * completion (io_uring operations never pass the syscall tracepoints).
 *
 * Attach: tp_btf/io_uring_submit_req and tp_btf/io_uring_complete.
 * Submission runs in the submitter (or its SQPOLL thread, which belongs to
 * the same process) after the request was prepared, so for read/write
 * opcodes the io_kiocb's command area holds struct io_rw with the offset
 * (kiocb.ki_pos), buffer and length; a vectored request's iovecs are read
 * from the submitter's memory (SQPOLL's thread shares it) and travel as an
 * IOT_WIRE_ASYNC_EXT record. Completions may run in interrupt or
 * task-work context where `current` is unrelated: they are matched through
 * the ring (io_ring_ctx) a traced process submitted on.
 * libaio requests are read in syscall.bpf.c (io_submit / io_getevents).
 */
#include "common.bpf.h"
#include "iovec.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* IORING_OP_* whose command area is struct io_rw (include/uapi/linux/io_uring.h) */
#define IOT_IORING_OP_READV 1
#define IOT_IORING_OP_WRITEV 2
#define IOT_IORING_OP_READ_FIXED 4
#define IOT_IORING_OP_WRITE_FIXED 5
#define IOT_IORING_OP_READ 22
#define IOT_IORING_OP_WRITE 23

/* Rings of traced processes: io_ring_ctx address -> owning tgid. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} iot_uring_ctxs SEC(".maps");

static __always_inline bool iot_is_rw_opcode(__u8 op)
{
	return op == IOT_IORING_OP_READV || op == IOT_IORING_OP_WRITEV ||
	       op == IOT_IORING_OP_READ_FIXED || op == IOT_IORING_OP_WRITE_FIXED ||
	       op == IOT_IORING_OP_READ || op == IOT_IORING_OP_WRITE;
}

/* IOSQE_BUFFER_SELECT as a req->flags bit: the kernel picks the buffer, the
 * SQE's addr and len are not an iovec array. */
#define IOT_REQ_F_BUFFER_SELECT (1U << 5)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_async_scratch);
} iot_uring_scratch SEC(".maps");

/* The bodies read every field with BPF_CORE_READ, so the same code serves the
 * tp_btf program (typed arguments) and its raw_tp twin (untyped ones). The
 * record is built in per-CPU memory: a vectored request's iovec lengths do not
 * fit the stack. */
static __always_inline int iot_uring_submitted(struct io_kiocb *req)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	if (!iot_tgid_traced(tgid))
		return 0;
	__u32 zero = 0;
	struct iot_async_scratch *s = bpf_map_lookup_elem(&iot_uring_scratch, &zero);
	if (!s)
		return 0;
	__u64 ring = (__u64)BPF_CORE_READ(req, ctx);
	bpf_map_update_elem(&iot_uring_ctxs, &ring, &tgid, BPF_ANY);

	struct iot_async_io *a = &s->ext.a;
	__builtin_memset(a, 0, sizeof(*a));
	a->hdr.type = IOT_REC_ASYNC_IO;
	a->hdr.size = sizeof(*a);
	a->engine = IOT_AIO_ENGINE_URING;
	a->phase = IOT_AIO_SUBMIT;
	a->opcode = BPF_CORE_READ(req, opcode);
	a->ts = bpf_ktime_get_ns();
	a->ctx = ring;
	a->req_id = (__u64)req;
	a->user_data = BPF_CORE_READ(req, cqe.user_data);
	a->fd = BPF_CORE_READ(req, cqe.fd);
	a->flags = (__u32)BPF_CORE_READ(req, flags);
	a->tgid = tgid;
	a->tid = (__u32)pid_tgid;
	a->cpu = bpf_get_smp_processor_id();
	a->ring_flags = BPF_CORE_READ(req, ctx, flags);
	a->aflags = IOT_AIOF_BYTES;
	if (iot_is_rw_opcode(a->opcode) && bpf_core_type_exists(struct io_rw) &&
	    bpf_core_field_exists(struct io_kiocb, cmd)) {
		/* io_kiocb_to_cmd(req, struct io_rw): prepared from the SQE, so addr
		 * and len are the SQE's (READV/WRITEV: iovec array and count). */
		struct io_rw *rw = (struct io_rw *)&req->cmd;
		a->offset = BPF_CORE_READ(rw, kiocb.ki_pos);
		a->rw_flags = BPF_CORE_READ(rw, flags);
		__u32 len = BPF_CORE_READ(rw, len);
		if ((a->opcode == IOT_IORING_OP_READV || a->opcode == IOT_IORING_OP_WRITEV) &&
		    !(a->flags & IOT_REQ_F_BUFFER_SELECT)) {
			__u32 size = iot_async_iovecs(s, BPF_CORE_READ(rw, addr), len);
			iot_output(s, size, IOT_SRC_ASYNC);
			return 0;
		}
		a->length = len;
		if (a->opcode == IOT_IORING_OP_READ_FIXED || a->opcode == IOT_IORING_OP_WRITE_FIXED) {
			a->buf_index = BPF_CORE_READ(req, buf_index);
			a->aflags |= IOT_AIOF_BUF_INDEX;
		}
	}
	iot_output(a, sizeof(*a), IOT_SRC_ASYNC);
	return 0;
}

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(iot_uring_submit, struct io_kiocb *req)
{
	return iot_uring_submitted(req);
}

SEC("raw_tp/io_uring_submit_req")
int BPF_PROG(iot_uring_submit_raw, struct io_kiocb *req)
{
	return iot_uring_submitted(req);
}

static __always_inline int iot_uring_completed(struct io_ring_ctx *ring, void *req,
					       struct io_uring_cqe *cqe)
{
	__u64 key = (__u64)ring;
	__u32 *owner = bpf_map_lookup_elem(&iot_uring_ctxs, &key);
	if (!owner)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct iot_async_io a = {};
	a.hdr.type = IOT_REC_ASYNC_IO;
	a.hdr.size = sizeof(a);
	a.engine = IOT_AIO_ENGINE_URING;
	a.phase = IOT_AIO_COMPLETE;
	a.ts = bpf_ktime_get_ns();
	a.ctx = key;
	a.req_id = (__u64)req;
	a.user_data = BPF_CORE_READ(cqe, user_data);
	a.res = BPF_CORE_READ(cqe, res);
	a.flags = BPF_CORE_READ(cqe, flags);
	a.tgid = *owner;
	/* the completing thread, when it belongs to the owner */
	a.tid = (pid_tgid >> 32) == *owner ? (__u32)pid_tgid : 0;
	a.fd = -1;
	a.cpu = bpf_get_smp_processor_id();
	iot_output(&a, sizeof(a), IOT_SRC_ASYNC);
	return 0;
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(iot_uring_complete, struct io_ring_ctx *ring, void *req, struct io_uring_cqe *cqe)
{
	return iot_uring_completed(ring, req, cqe);
}

SEC("raw_tp/io_uring_complete")
int BPF_PROG(iot_uring_complete_raw, struct io_ring_ctx *ring, void *req, struct io_uring_cqe *cqe)
{
	return iot_uring_completed(ring, req, cqe);
}
