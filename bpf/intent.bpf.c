// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* intent.bpf.c: application intent from uprobes (`--uprobe BIN:FUNC=label`).
 *
 * Attach: uprobe and uretprobe on each named function, by user space, with a
 * BPF cookie holding the label's string id and the intent kind (entry =
 * BEGIN, return = END). The marker-file channel lives in syscall.bpf.c.
 */
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int iot_uprobe_hit(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!iot_tgid_traced(pid_tgid >> 32))
		return 0;
	struct iot_wire_intent r = {};
	r.hdr.type = IOT_WIRE_INTENT;
	r.hdr.size = sizeof(r);
	r.source = IOT_INTENT_SRC_UPROBE;
	r.ts = bpf_ktime_get_ns();
	r.tgid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	r.cookie = bpf_get_attach_cookie(ctx);
	iot_output(&r, sizeof(r), IOT_SRC_INTENT);
	return 0;
}

SEC("uprobe")
int iot_uprobe_entry(struct pt_regs *ctx)
{
	return iot_uprobe_hit(ctx);
}

SEC("uretprobe")
int iot_uprobe_return(struct pt_regs *ctx)
{
	return iot_uprobe_hit(ctx);
}
