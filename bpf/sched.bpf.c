// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* sched.bpf.c: interference with I/O in flight (ReLayTracer's per-request
 * view). For a thread of a traced process that has followed block requests
 * in flight (iot_blk_threads, kept by block.bpf.c and nvme.bpf.c):
 *  - IOT_SCHED_OFFCPU: each interval it spent off CPU (sched_switch out to
 *    back in); vec = prev_state, or 0 when it was preempted (runnable
 *    all along); 2: waiting uninterruptibly, typically for that very I/O;
 *  - IOT_SCHED_HARDIRQ / IOT_SCHED_SOFTIRQ: each hard or soft interrupt that
 *    ran on its CPU while it was the current task (vec = irq / vector).
 * The correlation clips these to each request's lifetime.
 *
 * Cost for everything else: one hash lookup per context switch side and per
 * interrupt (the table holds only threads with I/O in flight).
 */
#include "block_common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* An interrupt that started while a thread with I/O in flight was current. */
struct iot_irq_slot {
	__u64 ts;
	__u32 tgid;
	__u32 tid;
	__u32 vec;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* 0 hard, 1 soft */
	__type(key, __u32);
	__type(value, struct iot_irq_slot);
} iot_sched_irq SEC(".maps");

static __always_inline void iot_sched_emit(__u16 kind, __u64 ts, __u64 dur, __u32 tgid, __u32 tid,
					   __u32 vec)
{
	struct iot_sched r = {};
	r.hdr.type = IOT_REC_SCHED;
	r.hdr.size = sizeof(r);
	r.kind = kind;
	r.cpu = bpf_get_smp_processor_id();
	r.ts = ts;
	r.dur = dur;
	r.tgid = tgid;
	r.tid = tid;
	r.vec = vec;
	iot_output(&r, sizeof(r), IOT_SRC_SCHED);
}

/* Each program is written once and wrapped as tp_btf and as raw_tp (the _raw
 * twin): task fields are read with BPF_CORE_READ, which serves both. */
static __always_inline int iot_sched_switched(bool preempt, struct task_struct *prev,
					      struct task_struct *next, unsigned int prev_state)
{
	__u32 prev_tid = BPF_CORE_READ(prev, pid);
	struct iot_blk_thread *t = bpf_map_lookup_elem(&iot_blk_threads, &prev_tid);
	__u64 now = 0;
	if (t && t->inflight > 0) {
		now = bpf_ktime_get_ns();
		t->off_ts = now;
		/* preempted: runnable whatever state it was about to enter */
		t->prev_state = preempt ? 0 : prev_state;
	}
	__u32 next_tid = BPF_CORE_READ(next, pid);
	t = bpf_map_lookup_elem(&iot_blk_threads, &next_tid);
	if (t && t->off_ts) {
		if (!now)
			now = bpf_ktime_get_ns();
		iot_sched_emit(IOT_SCHED_OFFCPU, t->off_ts, now - t->off_ts, t->tgid, next_tid,
			       t->prev_state);
		t->off_ts = 0;
		if (t->inflight <= 0)
			bpf_map_delete_elem(&iot_blk_threads, &next_tid);
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(iot_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return iot_sched_switched(preempt, prev, next, prev_state);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(iot_sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	return iot_sched_switched(preempt, prev, next, prev_state);
}

static __always_inline void iot_irq_enter(__u32 slot, __u32 vec)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	if (!tid)
		return; /* the idle task */
	struct iot_blk_thread *t = bpf_map_lookup_elem(&iot_blk_threads, &tid);
	if (!t || t->inflight <= 0)
		return;
	struct iot_irq_slot *s = bpf_map_lookup_elem(&iot_sched_irq, &slot);
	if (!s)
		return;
	s->ts = bpf_ktime_get_ns();
	s->tgid = pid_tgid >> 32;
	s->tid = tid;
	s->vec = vec;
}

static __always_inline void iot_irq_exit(__u32 slot, __u16 kind)
{
	struct iot_irq_slot *s = bpf_map_lookup_elem(&iot_sched_irq, &slot);
	if (!s || !s->ts)
		return;
	__u64 now = bpf_ktime_get_ns();
	iot_sched_emit(kind, s->ts, now - s->ts, s->tgid, s->tid, s->vec);
	s->ts = 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(iot_irq_entry, int irq, struct irqaction *action)
{
	iot_irq_enter(0, irq);
	return 0;
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(iot_irq_entry_raw, int irq, struct irqaction *action)
{
	iot_irq_enter(0, irq);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(iot_irq_exit_prog, int irq, struct irqaction *action, int ret)
{
	iot_irq_exit(0, IOT_SCHED_HARDIRQ);
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(iot_irq_exit_prog_raw, int irq, struct irqaction *action, int ret)
{
	iot_irq_exit(0, IOT_SCHED_HARDIRQ);
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(iot_softirq_entry, unsigned int vec)
{
	iot_irq_enter(1, vec);
	return 0;
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(iot_softirq_entry_raw, unsigned int vec)
{
	iot_irq_enter(1, vec);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(iot_softirq_exit, unsigned int vec)
{
	iot_irq_exit(1, IOT_SCHED_SOFTIRQ);
	return 0;
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(iot_softirq_exit_raw, unsigned int vec)
{
	iot_irq_exit(1, IOT_SCHED_SOFTIRQ);
	return 0;
}
