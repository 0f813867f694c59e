/* common.bpf.h: maps and helpers shared by every capture object.
 *
 * Each .bpf.c object declares these maps; user space creates them once (with
 * the first object it loads, syscall.bpf.c) and hands the same map fds to the
 * other objects with bpf_map__reuse_fd() before they load, so all programs
 * write one ring buffer, consult one traced-process set and count drops in
 * one table (src/capture/capture_bpf.cc).
 */
#ifndef IOTWIN_COMMON_BPF_H
#define IOTWIN_COMMON_BPF_H

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "capture_wire.h"

/* The one ring buffer for all events of all CPUs; its size is set at load
 * (a power of two, 64 MiB by default). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} iot_events SEC(".maps");

/* Traced processes (tgid -> 1): the root command and --pid targets, added by
 * user space; descendants, added in the kernel at fork (proc.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} iot_traced_tgids SEC(".maps");

/* Events lost, per CPU, indexed by IOT_SRC_*: never silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOT_SRC_MAX + 1);
	__type(key, __u32);
	__type(value, __u64);
} iot_drops SEC(".maps");

/* Set by user space before load (each object has its own copy). */
const volatile __u64 iot_filter_cgroup_id = 0; /* non-zero: trace this cgroup v2 id */
const volatile __u32 iot_self_tgid = 0;        /* the tracer, never traced */
const volatile __u64 iot_wake_bytes = 256 << 10; /* wake the consumer past this backlog */

static __always_inline bool iot_tgid_traced(__u32 tgid)
{
	if (iot_filter_cgroup_id) {
		/* cgroup mode: current is the task whose event this is. */
		return tgid != iot_self_tgid &&
		       bpf_get_current_cgroup_id() == iot_filter_cgroup_id;
	}
	return bpf_map_lookup_elem(&iot_traced_tgids, &tgid) != NULL;
}

static __always_inline void iot_count_drop(__u32 source)
{
	__u64 *n = bpf_map_lookup_elem(&iot_drops, &source);
	if (n)
		*n += 1;
}

/* Events per CPU since the last look at the ring's backlog, one cache line
 * each (a plain global indexed by CPU: no helper call, no sharing). */
#define IOT_MAX_CPUS 1024
#define IOT_WAKE_CHECK_EVERY 32
#define IOT_TICK_STRIDE 8 /* u64s per CPU: 64 bytes */
__u64 iot_ticks[IOT_MAX_CPUS * IOT_TICK_STRIDE];

/* Waking the consumer per event would cost more than the event itself: wake
 * it only once enough data waits (looked at every IOT_WAKE_CHECK_EVERY
 * events of a CPU); otherwise it finds the data on its next short poll. */
static __always_inline __u64 iot_wake_flags(void)
{
	/* Masked rather than compared: clang indexes with the unchecked 64-bit
	 * copy of the helper's result, which kernels before ~6.8 reject
	 * ("unbounded memory access"; Debian 12's 6.1). CPUs past 1024 share a
	 * counter, which only changes how often the backlog is looked at. */
	__u32 cpu = bpf_get_smp_processor_id() & (IOT_MAX_CPUS - 1);
	if ((++iot_ticks[cpu * IOT_TICK_STRIDE] % IOT_WAKE_CHECK_EVERY) != 0)
		return BPF_RB_NO_WAKEUP;
	return bpf_ringbuf_query(&iot_events, BPF_RB_AVAIL_DATA) >= iot_wake_bytes
		       ? BPF_RB_FORCE_WAKEUP
		       : BPF_RB_NO_WAKEUP;
}

/* Copies a finished record into the ring, counting a drop when it is full. */
static __always_inline void iot_output(void *rec, __u64 size, __u32 source)
{
	if (bpf_ringbuf_output(&iot_events, rec, size, iot_wake_flags()))
		iot_count_drop(source);
}

#define IOT_S_IFMT 0170000
#define IOT_S_IFREG 0100000
#define IOT_S_IFBLK 0060000

#endif /* IOTWIN_COMMON_BPF_H */
