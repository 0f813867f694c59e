// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* block.bpf.c: the block layer. One IOT_REC_BLOCK record per phase of a
 * followed bio or request: Q queue, X split, M/F merge, A remap, G get
 * request, I insert, D issue, C complete, requeue, request merge, and bio
 * completion for bio-based devices (docs/block-layer.md).
 *
 * Attach: tp_btf/block_* (no tracefs needed). Which I/O is followed is
 * explained in block_common.bpf.h; everything else is dropped after one or
 * two hash lookups.
 *
 * Context: Q, X, M/F and G run in the submitting task, so they carry its
 * tgid/tid and comm. I and D run wherever the queue is run (the submitter,
 * a kworker, another process): they carry the tid only when it is the
 * submitter's. C runs in interrupt or softirq context and never carries a
 * tid: the request identity links it to its submitter.
 */
#include "block_common.bpf.h"

/* Each program is written once (NAME_body) and wrapped as tp_btf and as raw_tp
 * (NAME_raw): arguments are read with BPF_CORE_READ, which serves both the
 * typed pointers of tp_btf and the untyped ones of raw_tp. */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define IOT_S_IFREG_BITS 0100000

static __always_inline void iot_blk_init(struct iot_block *r, __u16 phase)
{
	__builtin_memset(r, 0, sizeof(*r));
	r->hdr.type = IOT_REC_BLOCK;
	r->hdr.size = sizeof(*r);
	r->phase = phase;
	r->cpu = bpf_get_smp_processor_id();
	r->ts = bpf_ktime_get_ns();
}

static __always_inline void iot_blk_current(struct iot_block *r)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	r->tgid = pid_tgid >> 32;
	r->tid = (__u32)pid_tgid;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
}

static __always_inline void iot_blk_emit(struct iot_block *r)
{
	if (iot_blk_emit_records)
		iot_output(r, sizeof(*r), IOT_SRC_BLOCK);
}

static __always_inline void iot_blk_from_bio(struct iot_block *r, struct bio *bio)
{
	r->sector = BPF_CORE_READ(bio, bi_iter.bi_sector);
	r->bytes = BPF_CORE_READ(bio, bi_iter.bi_size);
	r->nr_sector = r->bytes >> 9;
	r->dev = iot_bio_dev(bio);
	r->flags = iot_blk_flags(BPF_CORE_READ(bio, bi_opf));
}

static __always_inline void iot_blk_from_entry(struct iot_block *r, struct iot_blk_bio *b)
{
	r->bio_id = b->id;
	r->ino = b->ino;
	r->pgoff = b->pgoff;
	r->ino_dev = b->ino_dev;
}

/* The file of the bio's first page: the page-cache page's inode, when it is a
 * regular file on the file system of the bio's own disk. Anonymous pages
 * (O_DIRECT into malloc'd memory, swap), block-device metadata and user pages
 * of an unrelated mapped file are left without a file: O_DIRECT I/O is
 * attributed through the syscall that issued it instead. */
static __always_inline void iot_bio_file(struct bio *bio, struct iot_blk_bio *b)
{
	struct bio_vec *vecs = BPF_CORE_READ(bio, bi_io_vec);
	if (!vecs || !BPF_CORE_READ(bio, bi_iter.bi_size))
		return;
	__u32 idx = BPF_CORE_READ(bio, bi_iter.bi_idx);
	__u32 done = BPF_CORE_READ(bio, bi_iter.bi_bvec_done);
	struct bio_vec bv = {};
	if (bpf_probe_read_kernel(&bv, sizeof(bv),
				  (void *)vecs + (__u64)idx * bpf_core_type_size(struct bio_vec)))
		return;
	if (!bv.bv_page)
		return;
	__u64 page_size = bpf_core_type_size(struct page);
	__u64 page = (__u64)bv.bv_page + (((__u64)bv.bv_offset + done) >> IOT_PAGE_SHIFT) * page_size;
	/* a tail page of a large folio points to its head with bit 0 set */
	__u64 head_word = BPF_CORE_READ((struct page *)page, compound_head);
	__u64 head = (head_word & 1) ? head_word - 1 : page;
	struct folio *folio = (struct folio *)head;
	struct address_space *mapping = BPF_CORE_READ(folio, mapping);
	if (!mapping || ((__u64)mapping & 3)) /* none, anonymous, movable or KSM */
		return;
	struct inode *host = BPF_CORE_READ(mapping, host);
	if (!host)
		return;
	__u16 mode = BPF_CORE_READ(host, i_mode);
	if ((mode & IOT_S_IFMT) != IOT_S_IFREG_BITS)
		return;
	struct super_block *sb = BPF_CORE_READ(host, i_sb);
	__u32 sb_dev = BPF_CORE_READ(sb, s_dev);
	struct gendisk *sb_disk = BPF_CORE_READ(sb, s_bdev, bd_disk);
	struct gendisk *bio_disk = BPF_CORE_READ(bio, bi_bdev, bd_disk);
	if (sb_dev != iot_bio_dev(bio) && (!sb_disk || sb_disk != bio_disk))
		return;
	b->ino = BPF_CORE_READ(host, i_ino);
	b->ino_dev = sb_dev;
	__u64 index = BPF_CORE_READ(folio, index);
	b->pgoff = index + (page - head) / (page_size ? page_size : 64);
}

#define IOT_PF_KTHREAD 0x00200000

/* Rule 6: a kernel thread's bio on a disk where a traced fsync is running. */
static __always_inline bool iot_sync_window(struct bio *bio)
{
	__u32 zero = 0;
	__s32 *any = bpf_map_lookup_elem(&iot_blk_sync_any, &zero);
	if (!any || *any <= 0)
		return false;
	struct task_struct *task = bpf_get_current_task_btf();
	if (!(task->flags & IOT_PF_KTHREAD))
		return false;
	__u32 disk = iot_bio_disk_dev(bio);
	__s32 *n = bpf_map_lookup_elem(&iot_blk_sync_disks, &disk);
	return n && *n > 0;
}

static __always_inline int iot_blk_bio_queue_body(struct bio *bio)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	bool traced = iot_tgid_traced(pid_tgid >> 32);
	struct iot_blk_bio b = {};
	iot_bio_file(bio, &b);
	__u32 why = traced ? IOT_BLK_STAT_BIO_TRACED : IOT_BLK_STAT_BIO_INODE;
	if (!traced) {
		if (!b.ino || !iot_inode_interesting(b.ino, b.ino_dev)) {
			if (!iot_sync_window(bio))
				return 0;
			why = IOT_BLK_STAT_BIO_SYNC;
		}
	} else {
		b.tgid = pid_tgid >> 32;
		b.tid = (__u32)pid_tgid;
		/* its later write-back (by the flusher) is the workload's too */
		if (b.ino)
			iot_inode_mark(b.ino, b.ino_dev);
	}
	b.id = iot_blk_next_id();
	b.start = BPF_CORE_READ(bio, bi_iter.bi_sector);
	__u32 size = BPF_CORE_READ(bio, bi_iter.bi_size);
	b.end = b.start + (size >> 9) + 1; /* an empty (flush) bio still has its sector */
	__u64 key = (__u64)bio;
	if (bpf_map_update_elem(&iot_blk_bios, &key, &b, BPF_ANY)) {
		iot_blk_stat(IOT_BLK_STAT_BIOS_FULL);
		return 0;
	}
	iot_blk_stat(why);

	__u32 opf = BPF_CORE_READ(bio, bi_opf);
	if (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH))) {
		/* the flush request that answers it has no bio to recognise it by */
		__u32 disk = iot_bio_disk_dev(bio);
		__s32 *pending = bpf_map_lookup_elem(&iot_blk_flush, &disk);
		if (pending) {
			__sync_fetch_and_add(pending, 1);
		} else {
			__s32 one = 1;
			bpf_map_update_elem(&iot_blk_flush, &disk, &one, BPF_ANY);
		}
	}

	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_QUEUE);
	iot_blk_from_bio(&r, bio);
	iot_blk_from_entry(&r, &b);
	r.aux = BPF_CORE_READ(bio, bi_ioprio);
	iot_blk_current(&r);
	iot_blk_emit(&r);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(iot_blk_bio_queue, struct bio *bio)
{
	return iot_blk_bio_queue_body(bio);
}

SEC("raw_tp/block_bio_queue")
int BPF_PROG(iot_blk_bio_queue_raw, struct bio *bio)
{
	return iot_blk_bio_queue_body(bio);
}

static __always_inline struct iot_blk_bio *iot_bio_followed(struct bio *bio)
{
	__u64 key = (__u64)bio;
	struct iot_blk_bio *b = bpf_map_lookup_elem(&iot_blk_bios, &key);
	if (!b)
		return NULL;
	__u64 s = BPF_CORE_READ(bio, bi_iter.bi_sector);
	if (s < b->start || s >= b->end)
		return NULL; /* a stale entry of a freed bio */
	return b;
}

/* One record for a bio phase of a followed bio (M, F, G). */
static __always_inline int iot_blk_bio_phase(struct bio *bio, __u16 phase)
{
	struct iot_blk_bio *b = iot_bio_followed(bio);
	if (!b)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, phase);
	iot_blk_from_bio(&r, bio);
	iot_blk_from_entry(&r, b);
	iot_blk_current(&r);
	iot_blk_emit(&r);
	return 0;
}

static __always_inline int iot_blk_backmerge_body(struct bio *bio)
{
	return iot_blk_bio_phase(bio, IOT_BLK_BACKMERGE);
}

SEC("tp_btf/block_bio_backmerge")
int BPF_PROG(iot_blk_backmerge, struct bio *bio)
{
	return iot_blk_backmerge_body(bio);
}

SEC("raw_tp/block_bio_backmerge")
int BPF_PROG(iot_blk_backmerge_raw, struct bio *bio)
{
	return iot_blk_backmerge_body(bio);
}

static __always_inline int iot_blk_frontmerge_body(struct bio *bio)
{
	return iot_blk_bio_phase(bio, IOT_BLK_FRONTMERGE);
}

SEC("tp_btf/block_bio_frontmerge")
int BPF_PROG(iot_blk_frontmerge, struct bio *bio)
{
	return iot_blk_frontmerge_body(bio);
}

SEC("raw_tp/block_bio_frontmerge")
int BPF_PROG(iot_blk_frontmerge_raw, struct bio *bio)
{
	return iot_blk_frontmerge_body(bio);
}

static __always_inline int iot_blk_getrq_body(struct bio *bio)
{
	return iot_blk_bio_phase(bio, IOT_BLK_GETRQ);
}

SEC("tp_btf/block_getrq")
int BPF_PROG(iot_blk_getrq, struct bio *bio)
{
	return iot_blk_getrq_body(bio);
}

SEC("raw_tp/block_getrq")
int BPF_PROG(iot_blk_getrq_raw, struct bio *bio)
{
	return iot_blk_getrq_body(bio);
}

/* `split` is the new front part; the bio it was cut from continues at
 * new_sector and is its bi_private (bio_chain). */
static __always_inline int iot_blk_split_body(struct bio *split, unsigned int new_sector)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 parent_key = (__u64)BPF_CORE_READ(split, bi_private);
	struct iot_blk_bio *p = parent_key ? bpf_map_lookup_elem(&iot_blk_bios, &parent_key) : NULL;
	struct iot_blk_bio n = {};
	__u64 start = BPF_CORE_READ(split, bi_iter.bi_sector);
	__u32 size = BPF_CORE_READ(split, bi_iter.bi_size);
	if (p && start >= p->start && start < p->end) {
		n = *p;
		if (n.ino)
			n.pgoff = p->pgoff + (((start - p->start) << 9) >> IOT_PAGE_SHIFT);
	} else if (iot_tgid_traced(pid_tgid >> 32)) {
		p = NULL;
		n.tgid = pid_tgid >> 32;
		n.tid = (__u32)pid_tgid;
	} else {
		return 0;
	}
	__u64 parent_id = p ? p->id : 0;
	n.id = iot_blk_next_id();
	n.start = start;
	n.end = start + (size >> 9) + 1;
	__u64 key = (__u64)split;
	if (bpf_map_update_elem(&iot_blk_bios, &key, &n, BPF_ANY)) {
		iot_blk_stat(IOT_BLK_STAT_BIOS_FULL);
		return 0;
	}
	iot_blk_stat(IOT_BLK_STAT_BIO_SPLIT);
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_SPLIT);
	iot_blk_from_bio(&r, split);
	iot_blk_from_entry(&r, &n);
	r.parent_id = parent_id;
	r.aux = new_sector;
	iot_blk_current(&r);
	iot_blk_emit(&r);
	return 0;
}

SEC("tp_btf/block_split")
int BPF_PROG(iot_blk_split, struct bio *split, unsigned int new_sector)
{
	return iot_blk_split_body(split, new_sector);
}

SEC("raw_tp/block_split")
int BPF_PROG(iot_blk_split_raw, struct bio *split, unsigned int new_sector)
{
	return iot_blk_split_body(split, new_sector);
}

/* A partition (or stacked device) remapped the bio: from `from` on `dev`. */
static __always_inline int iot_blk_bio_remap_body(struct bio *bio, dev_t dev, sector_t from)
{
	__u64 key = (__u64)bio;
	struct iot_blk_bio *b = bpf_map_lookup_elem(&iot_blk_bios, &key);
	if (!b || from < b->start || from >= b->end)
		return 0;
	__u64 now = BPF_CORE_READ(bio, bi_iter.bi_sector);
	b->end = now + (b->end - b->start);
	b->start = now;
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_REMAP);
	iot_blk_from_bio(&r, bio);
	iot_blk_from_entry(&r, b);
	r.aux = from;
	iot_blk_current(&r);
	iot_blk_emit(&r);
	return 0;
}

SEC("tp_btf/block_bio_remap")
int BPF_PROG(iot_blk_bio_remap, struct bio *bio, dev_t dev, sector_t from)
{
	return iot_blk_bio_remap_body(bio, dev, from);
}

SEC("raw_tp/block_bio_remap")
int BPF_PROG(iot_blk_bio_remap_raw, struct bio *bio, dev_t dev, sector_t from)
{
	return iot_blk_bio_remap_body(bio, dev, from);
}

/* Bio completion: reported by the kernel only for bio-based devices (dm, md,
 * zram...); request-based completions are C. */
static __always_inline int iot_blk_bio_complete_body(struct request_queue *q, struct bio *bio)
{
	struct iot_blk_bio *b = iot_bio_followed(bio);
	if (!b)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_BIO_COMPLETE);
	iot_blk_from_bio(&r, bio);
	iot_blk_from_entry(&r, b);
	r.error = -(__s32)BPF_CORE_READ(bio, bi_status);
	iot_blk_emit(&r);
	__u64 key = (__u64)bio;
	bpf_map_delete_elem(&iot_blk_bios, &key);
	return 0;
}

SEC("tp_btf/block_bio_complete")
int BPF_PROG(iot_blk_bio_complete, struct request_queue *q, struct bio *bio)
{
	return iot_blk_bio_complete_body(q, bio);
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(iot_blk_bio_complete_raw, struct request_queue *q, struct bio *bio)
{
	return iot_blk_bio_complete_body(q, bio);
}

/* ---- requests ------------------------------------------------------------ */

static __always_inline void iot_blk_from_rq(struct iot_block *r, struct request *rq,
					    struct iot_blk_rq *f)
{
	__u64 sector = BPF_CORE_READ(rq, __sector);
	r->sector = sector == (__u64)-1 ? 0 : sector;
	r->bytes = BPF_CORE_READ(rq, __data_len);
	r->nr_sector = r->bytes >> 9;
	r->dev = iot_rq_dev(rq);
	r->flags = iot_blk_flags(BPF_CORE_READ(rq, cmd_flags));
	r->rq_id = f->id;
	r->bio_id = f->bio_id;
	r->ino = f->ino;
	r->pgoff = f->pgoff;
	r->ino_dev = f->ino_dev;
}

/* I and D: the tid only when the submitter itself runs the queue. */
static __always_inline int iot_blk_rq_phase(struct request *rq, __u16 phase, bool adopt)
{
	struct iot_blk_rq *f = iot_rq_follow(rq, adopt);
	if (!f)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, phase);
	iot_blk_from_rq(&r, rq, f);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (f->tid && (__u32)pid_tgid == f->tid)
		iot_blk_current(&r);
	iot_blk_emit(&r);
	return 0;
}

static __always_inline int iot_blk_rq_insert_body(struct request *rq)
{
	return iot_blk_rq_phase(rq, IOT_BLK_INSERT, true);
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(iot_blk_rq_insert, struct request *rq)
{
	return iot_blk_rq_insert_body(rq);
}

SEC("raw_tp/block_rq_insert")
int BPF_PROG(iot_blk_rq_insert_raw, struct request *rq)
{
	return iot_blk_rq_insert_body(rq);
}

static __always_inline int iot_blk_rq_issue_body(struct request *rq)
{
	return iot_blk_rq_phase(rq, IOT_BLK_ISSUE, true);
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(iot_blk_rq_issue, struct request *rq)
{
	return iot_blk_rq_issue_body(rq);
}

SEC("raw_tp/block_rq_issue")
int BPF_PROG(iot_blk_rq_issue_raw, struct request *rq)
{
	return iot_blk_rq_issue_body(rq);
}

static __always_inline int iot_blk_rq_requeue_body(struct request *rq)
{
	return iot_blk_rq_phase(rq, IOT_BLK_REQUEUE, false);
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(iot_blk_rq_requeue, struct request *rq)
{
	return iot_blk_rq_requeue_body(rq);
}

SEC("raw_tp/block_rq_requeue")
int BPF_PROG(iot_blk_rq_requeue_raw, struct request *rq)
{
	return iot_blk_rq_requeue_body(rq);
}

static __always_inline int iot_blk_rq_remap_body(struct request *rq, dev_t dev, sector_t from)
{
	struct iot_blk_rq *f = iot_rq_follow(rq, false);
	if (!f)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_REMAP);
	iot_blk_from_rq(&r, rq, f);
	r.aux = from;
	iot_blk_emit(&r);
	return 0;
}

SEC("tp_btf/block_rq_remap")
int BPF_PROG(iot_blk_rq_remap, struct request *rq, dev_t dev, sector_t from)
{
	return iot_blk_rq_remap_body(rq, dev, from);
}

SEC("raw_tp/block_rq_remap")
int BPF_PROG(iot_blk_rq_remap_raw, struct request *rq, dev_t dev, sector_t from)
{
	return iot_blk_rq_remap_body(rq, dev, from);
}

/* Forgets a request and its bios (they complete with it). */
static __always_inline void iot_rq_forget(struct request *rq, struct iot_blk_rq *f)
{
	if (f->counted)
		iot_thread_io(f->tid, f->tgid, -1);
	struct bio *bio = BPF_CORE_READ(rq, bio);
	for (int i = 0; i < IOT_BLK_WALK; i++) {
		if (!bio)
			break;
		__u64 bk = (__u64)bio;
		bpf_map_delete_elem(&iot_blk_bios, &bk);
		bio = BPF_CORE_READ(bio, bi_next);
	}
	__u64 key = (__u64)rq;
	bpf_map_delete_elem(&iot_blk_rqs, &key);
}

/* `rq` was merged into another request and is freed without completing; its
 * bios now belong to the other one, which is followed for them. */
static __always_inline int iot_blk_rq_merge_body(struct request *rq)
{
	struct iot_blk_rq *f = iot_rq_follow(rq, false);
	if (!f)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_RQ_MERGE);
	iot_blk_from_rq(&r, rq, f);
	iot_blk_emit(&r);
	if (f->counted)
		iot_thread_io(f->tid, f->tgid, -1);
	__u64 key = (__u64)rq;
	bpf_map_delete_elem(&iot_blk_rqs, &key);
	return 0;
}

SEC("tp_btf/block_rq_merge")
int BPF_PROG(iot_blk_rq_merge, struct request *rq)
{
	return iot_blk_rq_merge_body(rq);
}

SEC("raw_tp/block_rq_merge")
int BPF_PROG(iot_blk_rq_merge_raw, struct request *rq)
{
	return iot_blk_rq_merge_body(rq);
}

static __always_inline __s32 iot_blk_errno(__u8 status)
{
	/* blk_status_to_errno for the codes stable since 4.13 */
	switch (status) {
	case 0: return 0;
	case 1: return -95;  /* NOTSUPP: EOPNOTSUPP */
	case 2: return -110; /* TIMEOUT: ETIMEDOUT */
	case 3: return -28;  /* NOSPC: ENOSPC */
	case 4: return -67;  /* TRANSPORT: ENOLINK */
	case 5: return -121; /* TARGET: EREMOTEIO */
	case 6: return -52;  /* NEXUS / RESV_CONFLICT: EBADE */
	case 7: return -61;  /* MEDIUM: ENODATA */
	case 8: return -84;  /* PROTECTION: EILSEQ */
	case 9: return -12;  /* RESOURCE: ENOMEM */
	case 12: return -11; /* AGAIN: EAGAIN */
	default: return -5;  /* EIO */
	}
}

/* Completion of nr_bytes of the request (partial completions happen). The
 * request is also adopted here: a request finished by the flush machinery
 * without being issued has no earlier event. */
static __always_inline int iot_blk_rq_complete_body(struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	struct iot_blk_rq *f = iot_rq_follow(rq, true);
	if (!f)
		return 0;
	struct iot_block r;
	iot_blk_init(&r, IOT_BLK_COMPLETE);
	iot_blk_from_rq(&r, rq, f);
	__u32 remaining = r.bytes;
	r.bytes = nr_bytes;
	r.nr_sector = nr_bytes >> 9;
	r.error = iot_blk_errno(error);
	r.aux = remaining; /* bytes the request had left before this completion */
	iot_blk_emit(&r);
	if (nr_bytes >= remaining)
		iot_rq_forget(rq, f);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(iot_blk_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return iot_blk_rq_complete_body(rq, error, nr_bytes);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(iot_blk_rq_complete_raw, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	return iot_blk_rq_complete_body(rq, error, nr_bytes);
}

/* The memory layer marks the files traced threads dirty; when it does not run,
 * this does, so that their write-back by the flusher is followed. */
static __always_inline int iot_blk_mark_dirty_body(struct inode *inode, int flags)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!iot_tgid_traced(pid_tgid >> 32))
		return 0;
	if ((BPF_CORE_READ(inode, i_mode) & IOT_S_IFMT) != IOT_S_IFREG_BITS)
		return 0;
	iot_inode_mark(BPF_CORE_READ(inode, i_ino), BPF_CORE_READ(inode, i_sb, s_dev));
	return 0;
}

SEC("tp_btf/writeback_mark_inode_dirty")
int BPF_PROG(iot_blk_mark_dirty, struct inode *inode, int flags)
{
	return iot_blk_mark_dirty_body(inode, flags);
}

SEC("raw_tp/writeback_mark_inode_dirty")
int BPF_PROG(iot_blk_mark_dirty_raw, struct inode *inode, int flags)
{
	return iot_blk_mark_dirty_body(inode, flags);
}

/* ext4's fsync (fsync, fdatasync, msync MS_SYNC) in a traced thread opens a
 * window on its disk in which kernel threads' bios are followed (rule 6). */
static __always_inline void iot_sync_window_add(__u32 disk, int delta)
{
	__u32 zero = 0;
	__s32 *any = bpf_map_lookup_elem(&iot_blk_sync_any, &zero);
	if (any)
		__sync_fetch_and_add(any, delta);
	__s32 *n = bpf_map_lookup_elem(&iot_blk_sync_disks, &disk);
	if (n) {
		__sync_fetch_and_add(n, delta);
	} else if (delta > 0) {
		__s32 one = 1;
		bpf_map_update_elem(&iot_blk_sync_disks, &disk, &one, BPF_ANY);
	}
}

static __always_inline int iot_blk_fsync_enter_body(struct file *file, int datasync)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!iot_tgid_traced(pid_tgid >> 32))
		return 0;
	__u32 tid = (__u32)pid_tgid;
	__u32 disk = iot_disk_dev(BPF_CORE_READ(file, f_inode, i_sb, s_bdev, bd_disk));
	if (!disk || bpf_map_update_elem(&iot_blk_sync_calls, &tid, &disk, BPF_NOEXIST))
		return 0;
	iot_sync_window_add(disk, 1);
	return 0;
}

SEC("tp_btf/ext4_sync_file_enter")
int BPF_PROG(iot_blk_fsync_enter, struct file *file, int datasync)
{
	return iot_blk_fsync_enter_body(file, datasync);
}

SEC("raw_tp/ext4_sync_file_enter")
int BPF_PROG(iot_blk_fsync_enter_raw, struct file *file, int datasync)
{
	return iot_blk_fsync_enter_body(file, datasync);
}

static __always_inline int iot_blk_fsync_exit_body(struct inode *inode, int ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 *disk = bpf_map_lookup_elem(&iot_blk_sync_calls, &tid);
	if (!disk)
		return 0;
	iot_sync_window_add(*disk, -1);
	bpf_map_delete_elem(&iot_blk_sync_calls, &tid);
	return 0;
}

SEC("tp_btf/ext4_sync_file_exit")
int BPF_PROG(iot_blk_fsync_exit, struct inode *inode, int ret)
{
	return iot_blk_fsync_exit_body(inode, ret);
}

SEC("raw_tp/ext4_sync_file_exit")
int BPF_PROG(iot_blk_fsync_exit_raw, struct inode *inode, int ret)
{
	return iot_blk_fsync_exit_body(inode, ret);
}
