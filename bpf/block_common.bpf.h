/* block_common.bpf.h: the state the block layer follows I/O with, shared by
 * block.bpf.c (bios and requests), nvme.bpf.c (NVMe commands of followed
 * requests) and sched.bpf.c (interference with threads whose I/O is in
 * flight). block.bpf.c's maps are the originals; the loader hands them to the
 * other two objects with bpf_map__reuse_fd (src/capture/block_bpf.cc).
 *
 * Which block I/O is followed (docs/block-layer.md, "What is captured"):
 *  1. a bio queued (Q) by a thread of a traced process;
 *  2. a bio queued by anyone else (flusher kworkers, other processes) whose
 *     first page is a page-cache page of an interesting inode: one a traced
 *     thread dirtied or read through the page cache (iot_mem_inodes, shared
 *     with the memory layer);
 *  3. a bio split from a followed bio (X);
 *  4. a request holding a followed bio (found by walking its bio list at its
 *     first event: insert, issue, NVMe setup or completion);
 *  5. a bio-less flush request answering a followed PREFLUSH bio on the same
 *     disk, and a bio-less (passthrough) request issued by a traced thread;
 *  6. a bio queued by a kernel thread (the journal, jbd2) on a disk where a
 *     traced thread is inside fsync (ext4_sync_file_enter..exit): the
 *     journal commit the fsync waits for.
 * Everything else on the machine is dropped in the kernel after one or two
 * hash lookups, so unrelated I/O never reaches the ring.
 *
 * Identities: each followed bio and request gets a sequence number (unique in
 * the trace); records carry these, never kernel pointers, so a request
 * structure reused for the next I/O is a new identity.
 */
#ifndef IOTWIN_BLOCK_COMMON_BPF_H
#define IOTWIN_BLOCK_COMMON_BPF_H

#include "common.bpf.h"
#include "block_wire.h"
#include "inodes.bpf.h"

#define IOT_PAGE_SHIFT 12

/* Set by user space before load (each object has its own copy). */
const volatile __u8 iot_blk_emit_records = 1; /* 0: follow I/O for NVMe/sched, emit no BLOCK */
const volatile __u8 iot_blk_track_threads = 1; /* keep per-thread in-flight counts (sched) */

/* A followed bio, from Q (or X) until its request completes. */
struct iot_blk_bio {
	__u64 id;
	__u64 start; /* sector range when followed: a stale entry of a freed and */
	__u64 end;   /* reused bio never matches a new bio outside it */
	__u64 ino;   /* file of the first page, 0 if none */
	__u64 pgoff; /* its page index */
	__u32 ino_dev;
	__u32 tgid; /* submitter, when a traced process; else 0 */
	__u32 tid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* struct bio * */
	__type(value, struct iot_blk_bio);
} iot_blk_bios SEC(".maps");

/* A followed request, from its first event to its final completion. */
struct iot_blk_rq {
	__u64 id;
	__u64 bio_id; /* the followed bio that made it followed (0: none) */
	__u64 ino;
	__u64 pgoff;
	__u32 ino_dev;
	__u32 tgid;
	__u32 tid;
	__u32 counted; /* counted in iot_blk_threads[tid].inflight */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* struct request * */
	__type(value, struct iot_blk_rq);
} iot_blk_rqs SEC(".maps");

/* Identity sequences, one per CPU (no atomic read-modify-write needed:
 * the BPF target of the build is the baseline instruction set). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} iot_blk_seq SEC(".maps");

/* Threads of traced processes with followed requests in flight (tid ->), for
 * sched.bpf.c; an entry lives until the count is 0 and the thread is on CPU. */
struct iot_blk_thread {
	__s32 inflight;
	__u32 tgid;
	__u64 off_ts; /* switched out at, while I/O was in flight; 0 on CPU */
	__u32 prev_state;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct iot_blk_thread);
} iot_blk_threads SEC(".maps");

/* Followed PREFLUSH bios not yet answered by a flush request, per disk. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* disk dev_t */
	__type(value, __s32);
} iot_blk_flush SEC(".maps");

/* Disks with a traced fsync in progress (disk dev_t -> count), the calls in
 * progress (tid -> disk), and their total (slot 0), checked first. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __s32);
} iot_blk_sync_disks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} iot_blk_sync_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s32);
} iot_blk_sync_any SEC(".maps");

/* Logical block size per disk (from sysfs, filled by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} iot_blk_lba SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOT_BLK_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} iot_blk_stats SEC(".maps");

static __always_inline void iot_blk_stat(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&iot_blk_stats, &which);
	if (n)
		*n += 1;
}

static __always_inline __u64 iot_blk_next_id(void)
{
	__u32 zero = 0;
	__u64 *seq = bpf_map_lookup_elem(&iot_blk_seq, &zero);
	if (!seq)
		return 0;
	*seq += 1;
	/* unique in the trace: the CPU in the top 16 bits, its count below */
	return ((__u64)(bpf_get_smp_processor_id() + 1) << 48) | (*seq & 0xffffffffffffull);
}

static __always_inline __u32 iot_disk_dev(struct gendisk *disk)
{
	if (!disk)
		return 0;
	__u32 major = BPF_CORE_READ(disk, major);
	__u32 minor = BPF_CORE_READ(disk, first_minor);
	return (major << 20) | minor;
}

static __always_inline __u32 iot_rq_dev(struct request *rq)
{
	return iot_disk_dev(BPF_CORE_READ(rq, q, disk));
}

/* The disk (not the partition) a bio is for. */
static __always_inline __u32 iot_bio_disk_dev(struct bio *bio)
{
	return iot_disk_dev(BPF_CORE_READ(bio, bi_bdev, bd_disk));
}

static __always_inline __u32 iot_bio_dev(struct bio *bio)
{
	return BPF_CORE_READ(bio, bi_bdev, bd_dev);
}

/* REQ_OP_* and REQ_* bits of this kernel (their values moved between
 * versions) -> IOT_BLKF_*. */
static __always_inline __u32 iot_blk_flags(__u32 opf)
{
	__u32 op = opf & 0xff; /* REQ_OP_MASK */
	__u32 f = 0;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_READ))
		f = IOT_BLKF_READ;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE))
		f = IOT_BLKF_WRITE;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_FLUSH))
		f = IOT_BLKF_FLUSH;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_DISCARD))
		f = IOT_BLKF_DISCARD;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_SECURE_ERASE))
		f = IOT_BLKF_SECURE_ERASE;
	else if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE_ZEROES))
		f = IOT_BLKF_WRITE_ZEROES;
	else
		f = IOT_BLKF_OTHER;
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))
		f |= IOT_BLKF_PREFLUSH;
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA)))
		f |= IOT_BLKF_FUA;
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC)))
		f |= IOT_BLKF_SYNC;
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_META)))
		f |= IOT_BLKF_META;
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD)))
		f |= IOT_BLKF_READAHEAD;
	return f;
}

static __always_inline bool iot_blk_op_is_flush(__u32 opf)
{
	return (opf & 0xff) == bpf_core_enum_value(enum req_op, REQ_OP_FLUSH);
}

static __always_inline bool iot_inode_interesting(__u64 ino, __u32 dev)
{
	struct iot_inode_key k = {.ino = ino, .dev = dev};
	return bpf_map_lookup_elem(&iot_mem_inodes, &k) != NULL;
}

static __always_inline void iot_inode_mark(__u64 ino, __u32 dev)
{
	struct iot_inode_key k = {.ino = ino, .dev = dev};
	if (bpf_map_lookup_elem(&iot_mem_inodes, &k))
		return;
	__u8 one = 1;
	if (bpf_map_update_elem(&iot_mem_inodes, &k, &one, BPF_NOEXIST) == -7 /* E2BIG */)
		iot_blk_stat(IOT_BLK_STAT_INODES_FULL);
}

/* In-flight count of a traced thread's followed requests (sched.bpf.c). */
static __always_inline void iot_thread_io(__u32 tid, __u32 tgid, int delta)
{
	if (!iot_blk_track_threads || !tid)
		return;
	struct iot_blk_thread *t = bpf_map_lookup_elem(&iot_blk_threads, &tid);
	if (!t) {
		if (delta < 0)
			return;
		struct iot_blk_thread n = {.tgid = tgid};
		bpf_map_update_elem(&iot_blk_threads, &tid, &n, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&iot_blk_threads, &tid);
		if (!t) {
			iot_blk_stat(IOT_BLK_STAT_THREADS_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&t->inflight, delta);
	if (t->inflight <= 0 && !t->off_ts)
		bpf_map_delete_elem(&iot_blk_threads, &tid);
}

/* The followed request `rq`, or NULL. With `adopt`, a request seen for the
 * first time is followed when it holds a followed bio (rule 4) or is a
 * bio-less flush or passthrough request (rule 5). */
static __always_inline struct iot_blk_rq *iot_rq_follow(struct request *rq, bool adopt)
{
	__u64 key = (__u64)rq;
	struct iot_blk_rq *r = bpf_map_lookup_elem(&iot_blk_rqs, &key);
	if (r || !adopt)
		return r;

	struct iot_blk_rq n = {};
	__u32 how = IOT_BLK_STAT_MAX;
	struct bio *first = BPF_CORE_READ(rq, bio);
	struct bio *bio = first;
	for (int i = 0; i < IOT_BLK_WALK; i++) {
		if (!bio)
			break;
		__u64 bk = (__u64)bio;
		struct iot_blk_bio *b = bpf_map_lookup_elem(&iot_blk_bios, &bk);
		if (b) {
			__u64 s = BPF_CORE_READ(bio, bi_iter.bi_sector);
			if (s >= b->start && s < b->end) {
				n.bio_id = b->id;
				n.ino = b->ino;
				/* a bio the block layer split has moved on from its first page */
				n.pgoff = b->pgoff + (((s - b->start) << 9) >> 12);
				n.ino_dev = b->ino_dev;
				n.tgid = b->tgid;
				n.tid = b->tid;
				how = IOT_BLK_STAT_RQ_BIO;
				break;
			}
		}
		bio = BPF_CORE_READ(bio, bi_next);
		if (i == IOT_BLK_WALK - 1 && bio)
			iot_blk_stat(IOT_BLK_STAT_WALK_LIMIT);
	}
	if (how == IOT_BLK_STAT_MAX && !first) {
		__u32 opf = BPF_CORE_READ(rq, cmd_flags);
		if (iot_blk_op_is_flush(opf)) {
			__u32 dev = iot_rq_dev(rq);
			__s32 *pending = bpf_map_lookup_elem(&iot_blk_flush, &dev);
			if (pending && *pending > 0) {
				/* one flush request answers every PREFLUSH pending when
				 * it was started (the flush machinery coalesces them) */
				*pending = 0;
				how = IOT_BLK_STAT_RQ_FLUSH;
			}
		}
		if (how == IOT_BLK_STAT_MAX) {
			__u64 pid_tgid = bpf_get_current_pid_tgid();
			if (iot_tgid_traced(pid_tgid >> 32)) {
				n.tgid = pid_tgid >> 32;
				n.tid = (__u32)pid_tgid;
				how = IOT_BLK_STAT_RQ_CONTEXT;
			}
		}
	}
	if (how == IOT_BLK_STAT_MAX)
		return NULL;
	n.id = iot_blk_next_id();
	n.counted = n.tgid != 0 && iot_blk_track_threads;
	if (bpf_map_update_elem(&iot_blk_rqs, &key, &n, BPF_ANY)) {
		iot_blk_stat(IOT_BLK_STAT_RQS_FULL);
		return NULL;
	}
	iot_blk_stat(how);
	if (n.counted)
		iot_thread_io(n.tid, n.tgid, 1);
	return bpf_map_lookup_elem(&iot_blk_rqs, &key);
}

#endif /* IOTWIN_BLOCK_COMMON_BPF_H */
