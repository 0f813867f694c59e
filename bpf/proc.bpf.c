// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* proc.bpf.c: the process tree of the traced workload.
 *
 * Attach: sched_process_fork, sched_process_exec and sched_process_exit, as
 * tp_btf or, where that cannot load or attach, as raw_tp (the same bodies:
 * every task field is read with BPF_CORE_READ, which works on the typed
 * arguments of tp_btf and the untyped ones of raw_tp alike; these events are
 * rare, so the probes cost nothing that matters). Fork runs in the parent before the child is
 * first scheduled, so a child of a traced process is in iot_traced_tgids
 * before it can make its first system call: nothing is missed at start-up.
 * A process leaves the set when its last thread exits.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* clone(2) flags, derived from what the child shares with its parent (the
 * fork tracepoint does not carry them). */
#define IOT_CLONE_VM 0x00000100
#define IOT_CLONE_FS 0x00000200
#define IOT_CLONE_FILES 0x00000400
#define IOT_CLONE_THREAD 0x00010000

struct iot_exec_scratch {
	struct iot_wire_exec ex;
	char filename[IOT_STRING_MAX + 1];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_exec_scratch);
} iot_exec_scratch SEC(".maps");

static __always_inline void iot_proc_init(struct iot_proc *r, __u16 kind, struct task_struct *t)
{
	__builtin_memset(r, 0, sizeof(*r));
	r->hdr.type = IOT_REC_PROC;
	r->hdr.size = sizeof(*r);
	r->kind = kind;
	r->ts = bpf_ktime_get_ns();
	r->tgid = BPF_CORE_READ(t, tgid);
	r->tid = BPF_CORE_READ(t, pid);
}

static __always_inline int iot_proc_forked(struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!iot_tgid_traced(ptgid))
		return 0;
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	bool thread = ctgid == ptgid;
	if (!thread) {
		__u8 one = 1;
		if (bpf_map_update_elem(&iot_traced_tgids, &ctgid, &one, BPF_ANY))
			iot_count_drop(IOT_SRC_PROC); /* the child will go untraced */
	}
	struct iot_proc r;
	iot_proc_init(&r, thread ? IOT_PROC_THREAD : IOT_PROC_FORK, parent);
	/* the current task is the one that called clone */
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	r.tid = (__u32)pid_tgid;
	r.child_tgid = ctgid;
	r.child_tid = BPF_CORE_READ(child, pid);
	__u64 flags = 0;
	if (BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm))
		flags |= IOT_CLONE_VM;
	if (BPF_CORE_READ(child, files) == BPF_CORE_READ(parent, files))
		flags |= IOT_CLONE_FILES;
	if (BPF_CORE_READ(child, fs) == BPF_CORE_READ(parent, fs))
		flags |= IOT_CLONE_FS;
	if (thread)
		flags |= IOT_CLONE_THREAD;
	r.clone_flags = flags;
	bpf_core_read_str(r.comm, sizeof(r.comm), &child->comm);
	iot_output(&r, sizeof(r), IOT_SRC_PROC);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(iot_proc_fork, struct task_struct *parent, struct task_struct *child)
{
	return iot_proc_forked(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(iot_proc_fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return iot_proc_forked(parent, child);
}

static __always_inline int iot_proc_execed(struct task_struct *p, pid_t old_pid,
					   struct linux_binprm *bprm)
{
	if (!iot_tgid_traced(BPF_CORE_READ(p, tgid)))
		return 0;
	__u32 zero = 0;
	struct iot_exec_scratch *s = bpf_map_lookup_elem(&iot_exec_scratch, &zero);
	if (!s)
		return 0;
	iot_proc_init(&s->ex.proc, IOT_PROC_EXEC, p);
	s->ex.proc.child_tid = old_pid; /* the thread that called exec */
	bpf_get_current_comm(s->ex.proc.comm, sizeof(s->ex.proc.comm));
	long n = bpf_probe_read_kernel_str(s->filename, sizeof(s->filename),
					   BPF_CORE_READ(bprm, filename));
	__u32 len = 0;
	s->ex.filename_flags = 0;
	if (n > IOT_STRING_MAX) {
		len = IOT_STRING_MAX;
		s->ex.filename_flags = IOT_STRF_TRUNCATED;
	} else if (n > 0) {
		len = n - 1;
	}
	s->ex.filename_len = len;
	s->ex.pad = 0;
	__u32 size = sizeof(s->ex) + (len & 8191);
	s->ex.proc.hdr.type = IOT_WIRE_EXEC;
	s->ex.proc.hdr.size = size;
	if (size > sizeof(*s))
		return 0;
	iot_output(s, size, IOT_SRC_PROC);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(iot_proc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return iot_proc_execed(p, old_pid, bprm);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(iot_proc_exec_raw, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return iot_proc_execed(p, old_pid, bprm);
}

static __always_inline void iot_proc_exited(struct task_struct *p, bool group_dead)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!iot_tgid_traced(tgid))
		return;
	struct iot_proc r;
	iot_proc_init(&r, IOT_PROC_EXIT, p);
	int exit_code = BPF_CORE_READ(p, exit_code);
	r.exit_code = exit_code;
	if (group_dead)
		r.flags |= IOT_PROCF_GROUP_DEAD;
	if (exit_code & 0x7f)
		r.flags |= IOT_PROCF_KILLED;
	bpf_core_read_str(r.comm, sizeof(r.comm), &p->comm);
	iot_output(&r, sizeof(r), IOT_SRC_PROC);
	if (group_dead)
		bpf_map_delete_elem(&iot_traced_tgids, &tgid);
}

/* Kernels whose sched_process_exit passes group_dead (6.16+). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(iot_proc_exit, struct task_struct *p, bool group_dead)
{
	iot_proc_exited(p, group_dead);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(iot_proc_exit_raw, struct task_struct *p, bool group_dead)
{
	iot_proc_exited(p, group_dead);
	return 0;
}

/* Older kernels: the group is dead once its live count reached zero, which
 * do_exit() decrements before the tracepoint. */
static __always_inline bool iot_proc_group_dead(struct task_struct *p)
{
	return BPF_CORE_READ(p, signal, live.counter) == 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(iot_proc_exit_legacy, struct task_struct *p)
{
	iot_proc_exited(p, iot_proc_group_dead(p));
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(iot_proc_exit_legacy_raw, struct task_struct *p)
{
	iot_proc_exited(p, iot_proc_group_dead(p));
	return 0;
}
