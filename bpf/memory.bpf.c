// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* memory.bpf.c: the memory layer. What a workload does to storage without
 * read/write calls: page faults on file mappings, page-cache insertions,
 * removals and readahead windows, dirtied pages and their write-back
 * (docs/memory-layer.md).
 *
 * Filtering, cheapest first:
 *  - page faults: the traced-process set first (every fault of the machine
 *    passes here), then bpf_find_vma: no vm_file means anonymous memory, which
 *    is dropped in the kernel; only regular files and block devices count.
 *  - page cache and dirtying: events in a traced thread are recorded, and the
 *    file joins the "interesting inodes" set; events elsewhere (other
 *    processes, reclaim, flusher kworkers) are recorded only for interesting
 *    inodes, so unrelated page-cache traffic never reaches the ring. Removals
 *    count for interesting inodes only, in a traced thread too: a workload
 *    writing drop_caches (or reclaiming) removes the pages of every file of
 *    the machine in its own context. The syscall object marks the files
 *    traced threads open before the open returns (iot_mem_inodes is its map),
 *    so a removal right after an open is the workload's.
 *  - write-back runs in kworkers: interesting inodes only.
 *
 * Per traced thread an entry of iot_mem_threads holds the latest file fault
 * until the thread's next fault (or until user space flushes an idle entry):
 * page-cache insertions of the faulting page in that thread during the fault
 * make it major, mm_filemap_map_pages gives its fault-around window. Runs of
 * contiguous pages (inserted, removed, dirtied, waited on) are coalesced there
 * too: one record per burst instead of one per 4 KiB page.
 */
#include "common.bpf.h"
#include "inodes.bpf.h"
#include "memory_wire.h"
#include "mm_helpers.bpf.h"

/* Each program is written once (NAME_body) and wrapped as tp_btf and as raw_tp
 * (NAME_raw): arguments are read with BPF_CORE_READ or probes, which serve both
 * the typed pointers of tp_btf and the untyped ones of raw_tp. */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* What to emit (set by user space before load). Programs of a part that is
 * off are not loaded; these cover programs that serve two parts. */
const volatile __u8 iot_mem_emit_faults = 1;
const volatile __u8 iot_mem_emit_cache = 1;
const volatile __u8 iot_mem_emit_writeback = 1;
const volatile __u8 iot_mem_subpage = 0;
const volatile __u8 iot_mem_emit_state = 1;

#define IOT_VM_SHARED 0x8
#define IOT_VM_MAYSHARE 0x80 /* MAP_SHARED, also read-only ones (which lack VM_SHARED) */
#define IOT_PF_WRITE 0x2  /* x86 error code bits */
#define IOT_PF_INSTR 0x10
#define IOT_PAGE_SHIFT 12
#define IOT_EBUSY 16
#define IOT_EEXIST 17

/* Files whose page-cache state was recorded (first touch by a traced thread,
 * or by user space at --pid attach): (dev, ino) -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct iot_inode_key);
	__type(value, __u8);
} iot_mem_state_done SEC(".maps");

/* Per traced thread; entries are freed by RCU, so a program still holding a
 * pointer while user space deletes an idle entry writes to valid memory. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct iot_mem_thread);
} iot_mem_threads SEC(".maps");

/* Flusher threads: the work they are doing (reason), and whether they are
 * inside the write-back of one interesting inode. */
struct iot_mem_wb {
	__u64 work_ts;
	__u64 work_nr;
	__u32 work_reason; /* WB_REASON_* + 1, 0 no work */
	__u32 work_sync;
	__u32 work_dev;
	__u8 work_emitted;
	__u8 in_inode;
	__u16 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct iot_mem_wb);
} iot_mem_wb_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOT_MEM_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} iot_mem_stats SEC(".maps");

/* Kernel address of a page from its struct page (sub-page baselines): both
 * the page array (vmemmap) and the direct map are linear in the page frame
 * number, so address = page_ptr * (PAGE_SIZE / sizeof(struct page)) + offset
 * (mod 2^64). The offset is learned from buffer heads, which hold both a
 * folio pointer and its address, once several distinct folios agree. */
struct iot_mem_calib {
	__u64 offset;
	__u64 last_folio;
	__u32 agreed;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_mem_calib);
} iot_mem_calib SEC(".maps");
#define IOT_MEM_CALIB_AGREE 4

/* A zeroed thread entry to insert (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_mem_thread);
} iot_mem_scratch SEC(".maps");

static __always_inline void iot_mem_stat(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&iot_mem_stats, &which);
	if (n)
		*n += 1;
}

static __always_inline void iot_inode_ident(struct inode *inode, __u64 *ino, __u32 *dev)
{
	*ino = BPF_CORE_READ(inode, i_ino);
	*dev = BPF_CORE_READ(inode, i_sb, s_dev);
}

static __always_inline bool iot_mem_interesting(__u64 ino, __u32 dev)
{
	struct iot_inode_key k = {.ino = ino, .dev = dev};
	return bpf_map_lookup_elem(&iot_mem_inodes, &k) != NULL;
}

static __always_inline void iot_mem_mark(__u64 ino, __u32 dev)
{
	struct iot_inode_key k = {.ino = ino, .dev = dev};
	if (bpf_map_lookup_elem(&iot_mem_inodes, &k))
		return;
	__u8 one = 1;
	long err = bpf_map_update_elem(&iot_mem_inodes, &k, &one, BPF_NOEXIST);
	if (err && err != -IOT_EEXIST)
		iot_mem_stat(IOT_MEM_STAT_INODES_FULL);
}

/* A traced thread is about to change or read the page cache of a file: the
 * first time for this file, record how many of its pages are cached right now
 * (`adjust`: pages this event already inserted), before the workload's own
 * accesses change it. The map insert is the atomic "first". */
static __always_inline bool iot_mem_first_touch(struct inode *inode, __u64 ino, __u32 dev,
						__u64 adjust, __u32 tgid)
{
	struct iot_inode_key k = {.ino = ino, .dev = dev};
	if (bpf_map_lookup_elem(&iot_mem_state_done, &k))
		return true;
	__u8 one = 1;
	long err = bpf_map_update_elem(&iot_mem_state_done, &k, &one, BPF_NOEXIST);
	if (err) {
		if (err != -IOT_EEXIST) {
			iot_mem_stat(IOT_MEM_STAT_STATE_FULL);
			return false;
		}
		return true;
	}
	iot_mem_mark(ino, dev);
	if (!iot_mem_emit_state)
		return true;
	/* A block device's own page cache (its inode on the bdev pseudo file system, read for
	 * file-system metadata) is no file of the workload's: its size is the whole device. */
	if ((BPF_CORE_READ(inode, i_mode) & IOT_S_IFMT) == IOT_S_IFBLK)
		return true;
	struct iot_wire_cache_state w = {};
	w.cs.hdr.type = IOT_WIRE_CACHE_STATE;
	w.cs.hdr.size = sizeof(w);
	w.cs.ts = bpf_ktime_get_ns();
	w.cs.ino = ino;
	w.cs.dev = dev;
	__u64 size = BPF_CORE_READ(inode, i_size);
	__u64 cached = BPF_CORE_READ(inode, i_mapping, nrpages);
	w.cs.fsize = size;
	w.cs.total_pages = (size + IOT_MEM_PAGE_SIZE - 1) >> IOT_PAGE_SHIFT;
	w.cs.resident_pages = cached > adjust ? cached - adjust : 0;
	w.tgid = tgid;
	iot_output(&w, sizeof(w), IOT_SRC_MEMORY);
	return true;
}

static __always_inline void iot_folio_ident(struct folio *folio, __u64 *ino, __u32 *dev)
{
	struct inode *host = BPF_CORE_READ(folio, mapping, host);
	iot_inode_ident(host, ino, dev);
}

#define IOT_TMPFS_MAGIC 0x01021994
#define IOT_RAMFS_MAGIC 0x858458f6
#define IOT_HUGETLBFS_MAGIC 0x958458f6

/* Whether a page of the inode at `inode` (kernel address) that is missing from the page cache
 * is read from a device when faulted in: not on tmpfs, ramfs or hugetlbfs, where a fault on a
 * missing page allocates it (a minor fault). */
static __always_inline bool iot_mem_reads_device(__u64 inode)
{
	struct inode *i = (void *)inode;
	struct super_block *sb = NULL;
	unsigned long magic = 0;
	if (!inode || bpf_probe_read_kernel(&sb, sizeof(sb), &i->i_sb) || !sb ||
	    bpf_probe_read_kernel(&magic, sizeof(magic), &sb->s_magic))
		return false;
	return magic != IOT_TMPFS_MAGIC && magic != IOT_RAMFS_MAGIC && magic != IOT_HUGETLBFS_MAGIC;
}

/* ---- records ------------------------------------------------------------ */

static __always_inline void iot_mem_emit_run(struct iot_mem_run *r, int kind, __u32 tgid, __u32 tid)
{
	if (!r->nr)
		return;
	if (kind == IOT_MEM_RUN_ADD || kind == IOT_MEM_RUN_DEL) {
		struct iot_page_cache c = {};
		c.hdr.type = IOT_REC_PAGE_CACHE;
		c.hdr.size = sizeof(c);
		c.kind = kind == IOT_MEM_RUN_ADD ? IOT_PC_ADD : IOT_PC_DELETE;
		c.cpu = r->cpu;
		c.ts = r->ts;
		c.ino = r->ino;
		c.index = r->start;
		c.nr_pages = r->nr;
		c.dev = r->dev;
		c.tgid = tgid;
		c.tid = tid;
		iot_output(&c, sizeof(c), IOT_SRC_MEMORY);
	} else {
		struct iot_writeback w = {};
		w.hdr.type = IOT_REC_WRITEBACK;
		w.hdr.size = sizeof(w);
		w.kind = kind == IOT_MEM_RUN_DIRTY ? IOT_WB_DIRTY_FOLIO : IOT_WB_WAIT;
		w.ts = r->ts;
		w.ino = r->ino;
		w.index = r->start;
		w.nr = r->nr;
		w.dev = r->dev;
		w.tgid = tgid;
		w.tid = tid;
		iot_output(&w, sizeof(w), IOT_SRC_MEMORY);
	}
	r->nr = 0;
}

/* Emits everything a thread entry holds: its pending fault, then its runs. */
static __always_inline void iot_mem_flush(struct iot_mem_thread *t, __u32 tid)
{
	if (t->pf.hdr.type) {
		if (iot_mem_emit_faults)
			iot_output(&t->pf, sizeof(t->pf), IOT_SRC_MEMORY);
		t->pf.hdr.type = 0;
	}
	for (int k = 0; k < IOT_MEM_RUNS; k++)
		iot_mem_emit_run(&t->runs[k], k, t->tgid, tid);
}

static __always_inline struct iot_mem_thread *iot_mem_thread_get(__u32 tid, __u32 tgid)
{
	struct iot_mem_thread *t = bpf_map_lookup_elem(&iot_mem_threads, &tid);
	if (t)
		return t;
	__u32 zero = 0;
	struct iot_mem_thread *s = bpf_map_lookup_elem(&iot_mem_scratch, &zero);
	if (!s)
		return NULL;
	__builtin_memset(s, 0, sizeof(*s));
	s->tgid = tgid;
	long err = bpf_map_update_elem(&iot_mem_threads, &tid, s, BPF_NOEXIST);
	/* -EEXIST: user space's sweep put the thread's entry back meanwhile (it had taken it, then
	 * saw the thread active); use that one. */
	if (err && err != -IOT_EEXIST) {
		iot_mem_stat(IOT_MEM_STAT_THREADS_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&iot_mem_threads, &tid);
}

/* Adds `nr` pages at `index` to a thread's run of `kind`, emitting the run
 * first when the pages do not continue it. Without a thread entry the event
 * becomes a record of its own. */
static __always_inline void iot_mem_run_add(struct iot_mem_thread *t, int kind, __u64 ino,
					    __u32 dev, __u64 index, __u32 nr, __u64 now,
					    __u32 tgid, __u32 tid)
{
	struct iot_mem_run single = {};
	struct iot_mem_run *r = t ? &t->runs[kind & 3] : &single;
	if (r->nr && r->ino == ino && r->dev == dev && index == r->start + r->nr &&
	    r->nr + nr <= IOT_MEM_RUN_MAX_PAGES && now - r->ts < IOT_MEM_RUN_MAX_NS) {
		r->nr += nr;
	} else {
		iot_mem_emit_run(r, kind, tgid, tid);
		r->ino = ino;
		r->dev = dev;
		r->start = index;
		r->nr = nr;
		r->ts = now;
		r->cpu = bpf_get_smp_processor_id();
	}
	if (t)
		t->last_ts = now;
	else
		iot_mem_emit_run(r, kind, tgid, tid);
}

/* ---- page faults -------------------------------------------------------- */

/* What a fault needs of the VMA at kernel address `vma` (read with probes). */
static __always_inline void iot_mem_vma_fill(__u64 vma, struct iot_mem_vma_cache *v)
{
	struct vm_area_struct *a = (void *)vma;
	v->vma = vma;
	bpf_probe_read_kernel(&v->file, sizeof(v->file), &a->vm_file);
	bpf_probe_read_kernel(&v->mm, sizeof(v->mm), &a->vm_mm);
	bpf_probe_read_kernel(&v->start, sizeof(v->start), &a->vm_start);
	bpf_probe_read_kernel(&v->end, sizeof(v->end), &a->vm_end);
	bpf_probe_read_kernel(&v->pgoff, sizeof(v->pgoff), &a->vm_pgoff);
	bpf_core_read(&v->flags, sizeof(v->flags), &a->vm_flags);
	if (!v->file)
		return;
	struct file *f = (void *)v->file;
	bpf_probe_read_kernel(&v->mapping, sizeof(v->mapping), &f->f_mapping);
	bpf_probe_read_kernel(&v->inode, sizeof(v->inode), &f->f_inode);
	struct inode *inode = (void *)v->inode;
	__u16 mode = BPF_CORE_READ(inode, i_mode) & IOT_S_IFMT;
	v->regular = mode == IOT_S_IFREG || mode == IOT_S_IFBLK;
	__u64 ino;
	__u32 dev;
	iot_inode_ident(inode, &ino, &dev);
	v->ino = ino;
	v->dev = dev;
}

static long iot_mem_vma_cb(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
	__u64 addr = 0;
	bpf_probe_read_kernel(&addr, sizeof(addr), &vma);
	iot_mem_vma_fill(addr, data);
	return 0;
}

/* vm_area_struct's "detached" flag (per-VMA locks, Linux 6.4 to 6.14; since
 * "mm: replace vm_lock and detached flag with a reference count", Linux 6.15,
 * vm_refcnt is 0 for a detached VMA). */
struct vm_area_struct___detached {
	bool detached;
} __attribute__((preserve_access_index));

/* Whether the VMA at `vma` is still in its address space. VMAs are freed by RCU
 * (SLAB_TYPESAFE_BY_RCU since 6.15): an unmapped VMA that no new mapping has
 * reused keeps its range, file and offset, and would pass every other check;
 * the kernel's own lock_vma_under_rcu checks the same thing. Kernels without
 * per-VMA locks (6.1-6.3) say nothing: the maple tree is asked instead. */
static __always_inline bool iot_mem_vma_attached(__u64 vma, __u64 mm, __u64 address)
{
	struct vm_area_struct *a = (void *)vma;
	if (bpf_core_field_exists(a->vm_refcnt)) {
		__u32 refs = 0;
		bpf_core_read(&refs, sizeof(refs), &a->vm_refcnt);
		return refs != 0;
	}
	struct vm_area_struct___detached *old = (void *)vma;
	if (bpf_core_field_exists(old->detached)) {
		bool detached = true;
		bpf_core_read(&detached, sizeof(detached), &old->detached);
		return !detached;
	}
	return iot_mt_find_vma(mm, address) == vma;
}

/* Whether the cached VMA still is the mapping at `address` in `mm`: the VMA
 * read back (structures are RCU-freed, so the read is of some VMA) must still
 * be attached and hold the same range, file and offset, in the same address
 * space, and the file the same inode: a thread that unmaps one file and maps
 * another of the same size at the same address can get the freed VMA (still
 * unchanged, or reused) and struct file back. */
static __always_inline bool iot_mem_vma_valid(struct iot_mem_vma_cache *c, __u64 address, __u64 mm)
{
	if (!c->vma || address < c->start || address >= c->end || c->mm != mm)
		return false;
	if (!iot_mem_vma_attached(c->vma, mm, address))
		return false;
	struct vm_area_struct *vma = (void *)c->vma;
	__u64 start = 0, end = 0, file = 0, pgoff = 0, vm_mm = 0;
	bpf_probe_read_kernel(&start, sizeof(start), &vma->vm_start);
	bpf_probe_read_kernel(&end, sizeof(end), &vma->vm_end);
	bpf_probe_read_kernel(&file, sizeof(file), &vma->vm_file);
	bpf_probe_read_kernel(&pgoff, sizeof(pgoff), &vma->vm_pgoff);
	bpf_probe_read_kernel(&vm_mm, sizeof(vm_mm), &vma->vm_mm);
	if (start != c->start || end != c->end || file != c->file || pgoff != c->pgoff ||
	    vm_mm != mm)
		return false;
	if (!file)
		return true;
	__u64 inode = 0;
	bpf_probe_read_kernel(&inode, sizeof(inode), &((struct file *)file)->f_inode);
	if (inode != c->inode)
		return false;
	__u64 ino;
	__u32 dev;
	iot_inode_ident((void *)inode, &ino, &dev);
	return ino == c->ino && dev == c->dev;
}

#define IOT_PMD_PAGES 512 /* pages one page table maps (x86-64, 4 KiB pages) */

/* Sets the pages the thread's pending fault mapped to [lo, hi], clipped to its
 * VMA and to the page table of the faulting address (the kernel maps no
 * further), if that still holds the faulting page. */
static __always_inline void iot_mem_window(struct iot_mem_thread *t, __u64 lo, __u64 hi)
{
	__u64 pgoff = t->pf.pgoff;
	__u64 vm_first = pgoff - ((t->pf.addr - t->vm_start) >> IOT_PAGE_SHIFT);
	__u64 vm_last = vm_first + ((t->vm_end - t->vm_start) >> IOT_PAGE_SHIFT) - 1;
	/* The page table's first page may lie before the file's start (a mapping that is not
	 * aligned to a page table): no page of the file comes before page 0. */
	__u64 pt_back = (t->pf.addr >> IOT_PAGE_SHIFT) & (IOT_PMD_PAGES - 1);
	__u64 pt_first = pgoff >= pt_back ? pgoff - pt_back : 0;
	__u64 pt_last = pgoff - pt_back + IOT_PMD_PAGES - 1;
	if (lo < vm_first)
		lo = vm_first;
	if (lo < pt_first)
		lo = pt_first;
	if (hi > vm_last)
		hi = vm_last;
	if (hi > pt_last)
		hi = pt_last;
	if (lo > pgoff || hi < pgoff)
		return;
	t->pf.around_start = lo;
	t->pf.nr_pages = hi - lo + 1;
}

/* A PMD-sized folio holding the faulting page, placed so that one page-table
 * entry can map it, is mapped whole by the fault (filemap_map_pmd or
 * do_set_pmd), with no fault-around event. */
static __always_inline void iot_mem_pmd_folio(struct iot_mem_thread *t, __u64 first, __u32 nr)
{
	if (nr < IOT_PMD_PAGES || first > t->pf.pgoff || t->pf.pgoff >= first + nr)
		return;
	/* the faulting address is anywhere in its page: its page's start counts */
	__u64 page_addr = t->pf.addr & ~(__u64)(IOT_MEM_PAGE_SIZE - 1);
	__u64 first_addr = page_addr - ((t->pf.pgoff - first) << IOT_PAGE_SHIFT);
	if (first_addr & ((IOT_PMD_PAGES << IOT_PAGE_SHIFT) - 1))
		return;
	iot_mem_window(t, first, first + nr - 1);
}

/* The VMA at `address`: from the thread's cache, else bpf_find_vma (cached). */
static __always_inline long iot_mem_lookup_vma(struct iot_mem_thread *t, struct task_struct *task,
					       __u64 mm, __u64 address, struct iot_mem_vma_cache *v)
{
	if (t) {
		for (int i = 0; i < IOT_MEM_VMA_CACHE; i++) {
			if (iot_mem_vma_valid(&t->vc[i], address, mm)) {
				*v = t->vc[i];
				iot_mem_stat(IOT_MEM_STAT_VMA_CACHED);
				return 0;
			}
		}
	}
	long err;
	__u64 vma = iot_mt_find_vma(mm, address);
	__u64 start = 0, end = 0, vm_mm = 0;
	if (vma) {
		struct vm_area_struct *a = (void *)vma;
		bpf_probe_read_kernel(&start, sizeof(start), &a->vm_start);
		bpf_probe_read_kernel(&end, sizeof(end), &a->vm_end);
		bpf_probe_read_kernel(&vm_mm, sizeof(vm_mm), &a->vm_mm);
	}
	if (vma && start <= address && address < end && vm_mm == mm) {
		iot_mem_vma_fill(vma, v);
		err = 0;
	} else {
		iot_mem_stat(IOT_MEM_STAT_VMA_HELPER);
		err = bpf_find_vma(task, address, iot_mem_vma_cb, v, 0);
	}
	if (!err && t) {
		t->vc[t->vc_next & (IOT_MEM_VMA_CACHE - 1)] = *v;
		t->vc_next++;
	}
	return err;
}

static __always_inline void iot_mem_vma_failed(long err)
{
	if (err == -IOT_EBUSY) {
		/* the fault may have been on a file: it is lost */
		iot_mem_stat(IOT_MEM_STAT_VMA_LOST);
		iot_count_drop(IOT_SRC_MEMORY);
	} else {
		iot_mem_stat(IOT_MEM_STAT_VMA_NONE);
	}
}

/* Fills the file, page and shared flag of `pf` from its VMA; false (counted)
 * when the VMA is anonymous memory or not a regular file. */
static __always_inline bool iot_mem_file_fault(struct iot_mem_vma_cache *v,
					       struct iot_page_fault *pf, __u32 tgid)
{
	if (!v->file) {
		iot_mem_stat(IOT_MEM_STAT_ANON_FAULTS);
		return false;
	}
	if (!v->regular) {
		iot_mem_stat(IOT_MEM_STAT_SPECIAL_FAULTS);
		return false;
	}
	iot_mem_mark(v->ino, v->dev);
	iot_mem_first_touch((struct inode *)v->inode, v->ino, v->dev, 0, tgid);
	if (v->flags & (IOT_VM_SHARED | IOT_VM_MAYSHARE))
		pf->flags |= IOT_PFF_SHARED;
	pf->ino = v->ino;
	pf->dev = v->dev;
	pf->pgoff = ((pf->addr - v->start) >> IOT_PAGE_SHIFT) + v->pgoff;
	return true;
}

/* A fault whose VMA lookup failed, retried at the thread's next fault (the
 * mapping is normally still there). Its fault-around window is known when one
 * was seen on the same file; it was major when its page was among those its
 * thread inserted while it was pending. */
static __always_inline void iot_mem_resolve(struct iot_mem_thread *t, __u32 tgid)
{
	t->unresolved = 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 mm = 0;
	bpf_probe_read_kernel(&mm, sizeof(mm), &task->mm);
	struct iot_mem_vma_cache v = {};
	long err = iot_mem_lookup_vma(t, task, mm, t->pf.addr, &v);
	if (err) {
		iot_mem_vma_failed(err);
		t->pf.hdr.type = 0;
		return;
	}
	if (!iot_mem_file_fault(&v, &t->pf, tgid)) {
		t->pf.hdr.type = 0;
		return;
	}
	iot_mem_stat(IOT_MEM_STAT_VMA_LATE);
	t->pf.nr_pages = 0; /* unknown, unless: */
	t->pf.around_start = t->pf.pgoff;
	if (t->ur_ino == t->pf.ino && t->ur_dev == t->pf.dev && t->ur_start <= t->pf.pgoff &&
	    t->pf.pgoff <= t->ur_last) {
		t->pf.around_start = t->ur_start;
		t->pf.nr_pages = t->ur_last - t->ur_start + 1;
	}
	if (iot_mem_unresolved_was_major(t))
		t->pf.flags |= IOT_PFF_MAJOR;
}

static __always_inline int iot_mem_fault_body(unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	if (!iot_tgid_traced(tgid))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* The thread's previous fault is over: record it (and its runs). */
	struct iot_mem_thread *t = iot_mem_thread_get(tid, tgid);
	if (t) {
		if (t->pf.hdr.type && t->unresolved)
			iot_mem_resolve(t, tgid);
		iot_mem_flush(t, tid);
	}

	struct task_struct *task = bpf_get_current_task_btf();
	__u64 mm = 0;
	bpf_probe_read_kernel(&mm, sizeof(mm), &task->mm);

	struct iot_page_fault pf = {};
	pf.hdr.type = IOT_REC_PAGE_FAULT;
	pf.hdr.size = sizeof(pf);
	pf.flags = ((error_code & IOT_PF_WRITE) ? IOT_PFF_WRITE : 0) |
		   ((error_code & IOT_PF_INSTR) ? IOT_PFF_EXEC : 0);
	pf.cpu = bpf_get_smp_processor_id();
	pf.ts = now;
	pf.addr = address;
	pf.tgid = tgid;
	pf.tid = tid;

	struct iot_mem_vma_cache v = {};
	long err = iot_mem_lookup_vma(t, task, mm, address, &v);
	if (err == -IOT_EBUSY && t) {
		/* mmap lock contended: try again at the thread's next fault */
		iot_mem_stat(IOT_MEM_STAT_VMA_BUSY);
		t->pf = pf;
		t->unresolved = 1;
		t->ur_ino = 0;
		t->ur_add_end = 0;
		t->last_ts = now;
		return 0;
	}
	if (err) {
		iot_mem_vma_failed(err);
		return 0;
	}
	if (!iot_mem_file_fault(&v, &pf, tgid))
		return 0;
	pf.nr_pages = 1;
	pf.around_start = pf.pgoff;
	__u64 first = 0;
	__u32 nr = 0;
	const bool cached = iot_mem_emit_faults && iot_page_folio(v.mapping, pf.pgoff, &first, &nr);
	/* Not in the page cache as the fault begins: filemap_fault finds no folio and has it read,
	 * which the kernel counts as a major fault, whichever thread's readahead then inserts the
	 * page (two threads faulting at once into one readahead window each insert pages the other
	 * waits for). Its own insertion (iot_mem_pc_add) marks it major too. */
	if (iot_mem_emit_faults && !cached && iot_mem_reads_device(v.inode))
		pf.flags |= IOT_PFF_MAJOR;

	if (!t) {
		/* no room to wait for the outcome: record what is known now */
		if (iot_mem_emit_faults)
			iot_output(&pf, sizeof(pf), IOT_SRC_MEMORY);
		return 0;
	}
	t->pf = pf;
	t->unresolved = 0;
	t->vm_start = v.start;
	t->vm_end = v.end;
	t->mapping = v.mapping;
	t->last_ts = now;
	if (cached)
		iot_mem_pmd_folio(t, first, nr);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(iot_mem_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return iot_mem_fault_body(address, regs, error_code);
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(iot_mem_fault_raw, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	return iot_mem_fault_body(address, regs, error_code);
}

/* The thread entry `t` if its pending fault is on (ino, dev), else NULL. */
static __always_inline struct iot_mem_thread *iot_mem_pending_on(struct iot_mem_thread *t,
								  __u64 ino, __u32 dev)
{
	if (!t || !t->pf.hdr.type || t->pf.ino != ino || t->pf.dev != dev)
		return NULL;
	return t;
}

/* The pending fault of thread `tid`, if it is on (ino, dev). */
static __always_inline struct iot_mem_thread *iot_mem_faulting(__u32 tid, __u64 ino, __u32 dev)
{
	return iot_mem_pending_on(bpf_map_lookup_elem(&iot_mem_threads, &tid), ino, dev);
}

/* Fault-around: the pages [start, last] of the file already in the page
 * cache were mapped without faults of their own; large folios at either end
 * are mapped whole (as far as the VMA and the page table reach). */
static __always_inline int iot_mem_map_pages_body(struct address_space *mapping, unsigned long start,
	     unsigned long last)
{
	if (!mapping)
		return 0;
	/* every fault-around of the machine passes here: threads without a pending
	 * fault leave first */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iot_mem_thread *t = bpf_map_lookup_elem(&iot_mem_threads, &tid);
	if (!t || !t->pf.hdr.type)
		return 0;
	__u64 ino;
	__u32 dev;
	struct inode *host = BPF_CORE_READ(mapping, host);
	iot_inode_ident(host, &ino, &dev);
	if (t->unresolved) {
		/* the file is known, the page not yet: keep the window for later */
		t->ur_ino = ino;
		t->ur_dev = dev;
		t->ur_start = start;
		t->ur_last = last;
		return 0;
	}
	if (t->pf.ino != ino || t->pf.dev != dev || t->pf.pgoff < start || t->pf.pgoff > last)
		return 0;
	__u64 lo = start, hi = last, first;
	__u32 nr;
	if (iot_page_folio(t->mapping, start, &first, &nr) && first < lo)
		lo = first;
	if (iot_page_folio(t->mapping, last, &first, &nr) && first + nr - 1 > hi)
		hi = first + nr - 1;
	iot_mem_window(t, lo, hi);
	t->last_ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/mm_filemap_map_pages")
int BPF_PROG(iot_mem_map_pages, struct address_space *mapping, unsigned long start,
	     unsigned long last)
{
	return iot_mem_map_pages_body(mapping, start, last);
}

SEC("raw_tp/mm_filemap_map_pages")
int BPF_PROG(iot_mem_map_pages_raw, struct address_space *mapping, unsigned long start,
	     unsigned long last)
{
	return iot_mem_map_pages_body(mapping, start, last);
}

/* ---- page cache --------------------------------------------------------- */

/* A page-cache insertion by a thread whose pending fault is unresolved (its
 * file and page not known yet): the first contiguous run of them is kept, for
 * iot_mem_unresolved_was_major() once the fault is resolved. Readahead inserts
 * its window in ascending order, so a major fault's own read is one run. */
static __always_inline void iot_mem_note_unresolved_add(struct iot_mem_thread *t, __u64 ino,
							__u32 dev, __u64 index, __u32 nr)
{
	if (!t || !t->pf.hdr.type || !t->unresolved)
		return;
	if (t->ur_add_end == 0) {
		t->ur_add_ino = ino;
		t->ur_add_dev = dev;
		t->ur_add_start = index;
		t->ur_add_end = index + nr;
	} else if (t->ur_add_ino == ino && t->ur_add_dev == dev && t->ur_add_end == index) {
		t->ur_add_end = index + nr;
	}
}

static __always_inline int iot_mem_pc_add_body(struct folio *folio)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 ino;
	__u32 dev;
	iot_folio_ident(folio, &ino, &dev);
	__u64 index = BPF_CORE_READ(folio, index);
	__u32 nr = iot_folio_nr(folio);
	__u64 now = bpf_ktime_get_ns();
	struct iot_mem_thread *t = NULL;
	if (iot_tgid_traced(tgid)) {
		iot_mem_first_touch(BPF_CORE_READ(folio, mapping, host), ino, dev, nr, tgid);
		/* one lookup: the thread's entry, whether its pending fault is on
		 * this file or still unresolved */
		struct iot_mem_thread *pending = bpf_map_lookup_elem(&iot_mem_threads, &tid);
		t = iot_mem_pending_on(pending, ino, dev);
		/* the faulting page itself had to be read: a major fault */
		if (t && index <= t->pf.pgoff && t->pf.pgoff < index + nr) {
			t->pf.flags |= IOT_PFF_MAJOR;
			iot_mem_pmd_folio(t, index, nr);
		}
		if (!t)
			iot_mem_note_unresolved_add(pending, ino, dev, index, nr);
		if (!iot_mem_emit_cache)
			return 0;
		if (!t)
			t = iot_mem_thread_get(tid, tgid);
		if (!t || !t->runs[IOT_MEM_RUN_ADD].nr || t->runs[IOT_MEM_RUN_ADD].ino != ino)
			iot_mem_mark(ino, dev);
	} else if (!iot_mem_emit_cache || !iot_mem_interesting(ino, dev)) {
		return 0;
	}
	iot_mem_run_add(t, IOT_MEM_RUN_ADD, ino, dev, index, nr, now, tgid, tid);
	return 0;
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(iot_mem_pc_add, struct folio *folio)
{
	return iot_mem_pc_add_body(folio);
}

SEC("raw_tp/mm_filemap_add_to_page_cache")
int BPF_PROG(iot_mem_pc_add_raw, struct folio *folio)
{
	return iot_mem_pc_add_body(folio);
}

static __always_inline int iot_mem_pc_delete_body(struct folio *folio)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 ino;
	__u32 dev;
	iot_folio_ident(folio, &ino, &dev);
	struct iot_mem_thread *t = NULL;
	if (iot_tgid_traced(tgid)) {
		/* Files the workload never opened, mapped or read: left out, counted. */
		if (!iot_mem_interesting(ino, dev)) {
			__u32 which = IOT_MEM_STAT_UNTOUCHED_REMOVED;
			__u64 *n = bpf_map_lookup_elem(&iot_mem_stats, &which);
			if (n)
				*n += iot_folio_nr(folio);
			return 0;
		}
		iot_mem_first_touch(BPF_CORE_READ(folio, mapping, host), ino, dev, 0, tgid);
		if (!iot_mem_emit_cache)
			return 0;
		t = iot_mem_thread_get(tid, tgid);
	} else if (!iot_mem_emit_cache || !iot_mem_interesting(ino, dev)) {
		return 0;
	}
	iot_mem_run_add(t, IOT_MEM_RUN_DEL, ino, dev, BPF_CORE_READ(folio, index),
			iot_folio_nr(folio), bpf_ktime_get_ns(), tgid, tid);
	return 0;
}

SEC("tp_btf/mm_filemap_delete_from_page_cache")
int BPF_PROG(iot_mem_pc_delete, struct folio *folio)
{
	return iot_mem_pc_delete_body(folio);
}

SEC("raw_tp/mm_filemap_delete_from_page_cache")
int BPF_PROG(iot_mem_pc_delete_raw, struct folio *folio)
{
	return iot_mem_pc_delete_body(folio);
}

/* A readahead window [start, start + nr) of a file. page_cache_ra_order may
 * fall back to page_cache_ra_unbounded for the same pages: a window inside
 * the thread's last one is that fallback and is not recorded twice. */
static __always_inline void iot_mem_readahead(struct inode *inode, __u64 start, __u64 nr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 ino;
	__u32 dev;
	iot_inode_ident(inode, &ino, &dev);
	struct iot_mem_thread *t = NULL;
	if (iot_tgid_traced(tgid)) {
		iot_mem_first_touch(inode, ino, dev, 0, tgid);
		if (!iot_mem_emit_cache)
			return;
		t = iot_mem_thread_get(tid, tgid);
		if (t && t->ra_ino == ino && t->ra_dev == dev && start >= t->ra_start &&
		    start + nr <= t->ra_end)
			return;
	} else if (!iot_mem_emit_cache || !iot_mem_interesting(ino, dev)) {
		return;
	}
	/* the window is part of the file only up to its end (past it, nothing is read) */
	__u64 size = BPF_CORE_READ(inode, i_size);
	__u64 pages = (size + IOT_MEM_PAGE_SIZE - 1) >> IOT_PAGE_SHIFT;
	if (start >= pages)
		return;
	if (start + nr > pages)
		nr = pages - start;

	__u64 now = bpf_ktime_get_ns();
	if (t) {
		/* insertions before this window belong to an earlier one */
		iot_mem_emit_run(&t->runs[IOT_MEM_RUN_ADD], IOT_MEM_RUN_ADD, tgid, tid);
		t->ra_ino = ino;
		t->ra_dev = dev;
		t->ra_start = start;
		t->ra_end = start + nr;
		t->last_ts = now;
	}
	struct iot_page_cache c = {};
	c.hdr.type = IOT_REC_PAGE_CACHE;
	c.hdr.size = sizeof(c);
	c.kind = IOT_PC_READAHEAD;
	c.cpu = bpf_get_smp_processor_id();
	c.ts = now;
	c.ino = ino;
	c.index = start;
	c.nr_pages = nr;
	c.dev = dev;
	c.tgid = tgid;
	c.tid = tid;
	iot_output(&c, sizeof(c), IOT_SRC_MEMORY);
}

static __always_inline int iot_mem_ra_unbounded_body(struct inode *inode, unsigned long index,
	     unsigned long nr_to_read, unsigned long lookahead_size)
{
	iot_mem_readahead(inode, index, nr_to_read);
	return 0;
}

SEC("tp_btf/page_cache_ra_unbounded")
int BPF_PROG(iot_mem_ra_unbounded, struct inode *inode, unsigned long index,
	     unsigned long nr_to_read, unsigned long lookahead_size)
{
	return iot_mem_ra_unbounded_body(inode, index, nr_to_read, lookahead_size);
}

SEC("raw_tp/page_cache_ra_unbounded")
int BPF_PROG(iot_mem_ra_unbounded_raw, struct inode *inode, unsigned long index,
	     unsigned long nr_to_read, unsigned long lookahead_size)
{
	return iot_mem_ra_unbounded_body(inode, index, nr_to_read, lookahead_size);
}

static __always_inline int iot_mem_ra_order_body(struct inode *inode, unsigned long index,
	     struct file_ra_state *ra)
{
	iot_mem_readahead(inode, BPF_CORE_READ(ra, start), BPF_CORE_READ(ra, size));
	return 0;
}

SEC("tp_btf/page_cache_ra_order")
int BPF_PROG(iot_mem_ra_order, struct inode *inode, unsigned long index,
	     struct file_ra_state *ra)
{
	return iot_mem_ra_order_body(inode, index, ra);
}

SEC("raw_tp/page_cache_ra_order")
int BPF_PROG(iot_mem_ra_order_raw, struct inode *inode, unsigned long index,
	     struct file_ra_state *ra)
{
	return iot_mem_ra_order_body(inode, index, ra);
}

/* read() of pages already cached leaves no other trace here: the first read
 * of a file by a traced thread still records its cache state. This program
 * runs once per read call of every process, so its common case (a read of the
 * file this CPU last saw recorded) is a per-CPU array lookup (inlined, no
 * helper call) and a few loads: a file stays in iot_mem_state_done once there,
 * so for it there is nothing to do whoever reads, and the memo never goes
 * stale. It holds the mapping's address and the file's identity (an inode freed
 * and reused for another file has another identity). */
struct iot_mem_seen {
	__u64 mapping;
	__u64 ino;
	__u32 dev;
	__u32 pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_mem_seen);
} iot_mem_seen SEC(".maps");

/* typed: tp_btf, whose arguments are BTF pointers read with plain loads; raw_tp
 * reads them with probes. */
static __always_inline int iot_mem_get_pages_body(struct address_space *mapping, const bool typed)
{
	if (!mapping)
		return 0;
	struct inode *host;
	__u64 ino;
	__u32 dev;
	if (typed) {
		host = mapping->host;
		if (!host)
			return 0;
		ino = host->i_ino;
		dev = host->i_sb->s_dev;
	} else {
		host = BPF_CORE_READ(mapping, host);
		iot_inode_ident(host, &ino, &dev);
	}
	__u32 zero = 0;
	struct iot_mem_seen *seen = bpf_map_lookup_elem(&iot_mem_seen, &zero);
	if (!seen)
		return 0;
	if (seen->mapping == (__u64)mapping && seen->ino == ino && seen->dev == dev)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!iot_tgid_traced(tgid))
		return 0;
	if (!iot_mem_first_touch(host, ino, dev, 0, tgid))
		return 0;
	seen->mapping = (__u64)mapping;
	seen->ino = ino;
	seen->dev = dev;
	return 0;
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(iot_mem_get_pages, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	return iot_mem_get_pages_body(mapping, true);
}

SEC("raw_tp/mm_filemap_get_pages")
int BPF_PROG(iot_mem_get_pages_raw, struct address_space *mapping, unsigned long index,
	     unsigned long last_index)
{
	return iot_mem_get_pages_body(mapping, false);
}

/* ---- dirtying and sub-page baselines ------------------------------------ */

/* The head buffer of a buffer-head file system's folio (ext4, ...) holds the
 * folio's kernel address. `folio_ptr` is the folio pointer as a number. */
static __always_inline __u64 iot_bh_address(struct folio *folio, __u64 folio_ptr)
{
	void *priv = BPF_CORE_READ(folio, private);
	if (!priv)
		return 0;
	struct buffer_head *bh = priv;
	__u64 bh_folio = 0, data = 0, bsize = 0;
	bpf_probe_read_kernel(&bh_folio, sizeof(bh_folio), &bh->b_folio);
	bpf_probe_read_kernel(&data, sizeof(data), &bh->b_data);
	bpf_probe_read_kernel(&bsize, sizeof(bsize), &bh->b_size);
	if (bh_folio != folio_ptr || !data || (data & (IOT_MEM_PAGE_SIZE - 1)) || !bsize ||
	    bsize > 65536)
		return 0;
	return data;
}

static __always_inline __u64 iot_page_factor(void)
{
	__u64 size = bpf_core_type_size(struct page);
	if (!size || size > IOT_MEM_PAGE_SIZE || IOT_MEM_PAGE_SIZE % size)
		return 0;
	return IOT_MEM_PAGE_SIZE / size;
}

/* Learns the page-address offset from any buffer-head folio being dirtied. */
static __always_inline void iot_mem_calibrate(struct folio *folio, __u64 folio_ptr)
{
	__u32 zero = 0;
	struct iot_mem_calib *c = bpf_map_lookup_elem(&iot_mem_calib, &zero);
	__u64 factor = iot_page_factor();
	if (!c || c->agreed >= IOT_MEM_CALIB_AGREE || !factor || folio_ptr == c->last_folio)
		return;
	__u64 data = iot_bh_address(folio, folio_ptr);
	if (!data)
		return;
	__u64 offset = data - folio_ptr * factor;
	if (c->agreed && offset == c->offset) {
		c->agreed++;
		iot_mem_stat(IOT_MEM_STAT_CALIBRATED);
	} else {
		c->offset = offset;
		c->agreed = 1;
	}
	c->last_folio = folio_ptr;
}

static __always_inline __u64 iot_folio_address(struct folio *folio, __u64 folio_ptr)
{
	__u64 a = iot_bh_address(folio, folio_ptr);
	if (a)
		return a;
	__u32 zero = 0;
	struct iot_mem_calib *c = bpf_map_lookup_elem(&iot_mem_calib, &zero);
	__u64 factor = iot_page_factor();
	if (!c || c->agreed < IOT_MEM_CALIB_AGREE || !factor)
		return 0;
	return folio_ptr * factor + c->offset;
}

/* A store through a shared mapping is dirtying this folio, before the store
 * happens (page_mkwrite): copy its pages for the sub-page tracker. */
static __always_inline void iot_mem_baseline(struct folio *folio, __u64 folio_ptr,
					     struct iot_mem_thread *t, __u64 index, __u32 nr,
					     __u64 now, __u32 tgid, __u32 tid)
{
	__u64 addr = iot_folio_address(folio, folio_ptr);
	if (nr > IOT_MEM_BASELINE_MAX_PAGES)
		iot_mem_stat(IOT_MEM_STAT_BASELINE_CAP);
	__u64 vm_pgoff = t->pf.pgoff - ((t->pf.addr - t->vm_start) >> IOT_PAGE_SHIFT);
	for (__u32 i = 0; i < IOT_MEM_BASELINE_MAX_PAGES; i++) {
		if (i >= nr)
			break;
		struct iot_wire_page_baseline *b = bpf_ringbuf_reserve(&iot_events, sizeof(*b), 0);
		if (!b) {
			iot_count_drop(IOT_SRC_MEMORY);
			break;
		}
		b->hdr.type = IOT_WIRE_PAGE_BASELINE;
		b->hdr.size = sizeof(*b);
		b->flags = 0;
		b->pad = 0;
		b->ts = now;
		b->ino = t->pf.ino;
		b->pgoff = index + i;
		b->vm_start = t->vm_start;
		b->vm_end = t->vm_end;
		b->vm_pgoff = vm_pgoff;
		b->dev = t->pf.dev;
		b->tgid = tgid;
		b->tid = tid;
		b->pad2 = 0;
		if (addr && !bpf_probe_read_kernel(b->data, IOT_MEM_PAGE_SIZE,
						   (void *)(addr + (__u64)i * IOT_MEM_PAGE_SIZE)))
			b->flags = IOT_MEM_BASELINE_HAS_DATA;
		else
			iot_mem_stat(IOT_MEM_STAT_BASELINE_NOADDR);
		bpf_ringbuf_submit(b, iot_wake_flags());
		iot_mem_stat(IOT_MEM_STAT_BASELINES);
	}
}

/* folio_ptr: the folio's address as a number, read from the context by the
 * wrappers (a value the verifier does not track as a pointer). */
static __always_inline int iot_mem_dirty_folio_body(struct folio *folio, struct address_space *mapping,
						    __u64 folio_ptr)
{
	if (iot_mem_subpage)
		iot_mem_calibrate(folio, folio_ptr);
	if (!mapping) /* the kernel declares it nullable */
		return 0;

	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 ino;
	__u32 dev;
	struct inode *host = BPF_CORE_READ(mapping, host);
	iot_inode_ident(host, &ino, &dev);
	__u64 index = BPF_CORE_READ(folio, index);
	__u32 nr = iot_folio_nr(folio);
	__u64 now = bpf_ktime_get_ns();
	struct iot_mem_thread *t = NULL;
	if (iot_tgid_traced(tgid)) {
		iot_mem_first_touch(host, ino, dev, 0, tgid);
		if (iot_mem_subpage) {
			t = iot_mem_faulting(tid, ino, dev);
			if (t && (t->pf.flags & (IOT_PFF_WRITE | IOT_PFF_SHARED)) ==
					 (IOT_PFF_WRITE | IOT_PFF_SHARED) &&
			    index <= t->pf.pgoff && t->pf.pgoff < index + nr)
				iot_mem_baseline(folio, folio_ptr, t, index, nr, now, tgid, tid);
		}
		if (!iot_mem_emit_writeback)
			return 0;
		if (!t)
			t = iot_mem_thread_get(tid, tgid);
		if (!t || !t->runs[IOT_MEM_RUN_DIRTY].nr || t->runs[IOT_MEM_RUN_DIRTY].ino != ino)
			iot_mem_mark(ino, dev);
	} else if (!iot_mem_emit_writeback || !iot_mem_interesting(ino, dev)) {
		return 0;
	}
	iot_mem_run_add(t, IOT_MEM_RUN_DIRTY, ino, dev, index, nr, now, tgid, tid);
	return 0;
}

SEC("tp_btf/writeback_dirty_folio")
int BPF_PROG(iot_mem_dirty_folio, struct folio *folio, struct address_space *mapping)
{
	__u64 folio_ptr = 0;
	bpf_probe_read_kernel(&folio_ptr, sizeof(folio_ptr), &ctx[0]);
	return iot_mem_dirty_folio_body(folio, mapping, folio_ptr);
}

SEC("raw_tp/writeback_dirty_folio")
int BPF_PROG(iot_mem_dirty_folio_raw, struct folio *folio, struct address_space *mapping)
{
	__u64 folio_ptr = 0;
	bpf_probe_read_kernel(&folio_ptr, sizeof(folio_ptr), &ctx[0]);
	return iot_mem_dirty_folio_body(folio, mapping, folio_ptr);
}

/* ---- write-back ----------------------------------------------------------- */

static __always_inline void iot_wb_emit(__u16 kind, __u16 reason, __u64 ts, __u64 ino,
					__u32 dev, __u64 index, __u64 nr, __u32 sync_mode)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct iot_writeback w = {};
	w.hdr.type = IOT_REC_WRITEBACK;
	w.hdr.size = sizeof(w);
	w.kind = kind;
	w.reason = reason;
	w.ts = ts;
	w.ino = ino;
	w.index = index;
	w.nr = nr;
	w.dev = dev;
	w.tgid = pid_tgid >> 32;
	w.tid = (__u32)pid_tgid;
	w.sync_mode = sync_mode;
	iot_output(&w, sizeof(w), IOT_SRC_MEMORY);
}

/* I_DIRTY_* of this kernel -> 1 sync, 2 datasync, 4 pages, 8 time (the bits
 * moved in 6.x; older kernels use the #define values). */
static __always_inline __u32 iot_dirty_bits(__u64 kernel_flags)
{
	__u64 sync = 1, datasync = 2, pages = 4, time = 1 << 11;
	if (bpf_core_enum_value_exists(enum inode_state_flags_t, I_DIRTY_SYNC)) {
		sync = bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_SYNC);
		datasync = bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_DATASYNC);
		pages = bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_PAGES);
		time = bpf_core_enum_value(enum inode_state_flags_t, I_DIRTY_TIME);
	}
	return ((kernel_flags & sync) ? 1 : 0) | ((kernel_flags & datasync) ? 2 : 0) |
	       ((kernel_flags & pages) ? 4 : 0) | ((kernel_flags & time) ? 8 : 0);
}

/* An inode becomes dirty: recorded when it gains a dirty bit it did not have
 * (nr = the new bits), not on every timestamp update. */
static __always_inline int iot_mem_dirty_inode_body(struct inode *inode, int flags)
{
	__u64 ino;
	__u32 dev;
	iot_inode_ident(inode, &ino, &dev);
	bool traced = iot_tgid_traced(bpf_get_current_pid_tgid() >> 32);
	if (!traced && !iot_mem_interesting(ino, dev))
		return 0;
	__u64 state = 0;
	__u32 size = bpf_core_field_size(inode->i_state);
	bpf_probe_read_kernel(&state, size <= 8 ? size : 8, &inode->i_state);
	__u32 fresh = iot_dirty_bits((__u64)(unsigned int)flags & ~state);
	if (!fresh)
		return 0;
	iot_wb_emit(IOT_WB_DIRTY_INODE, 0, bpf_ktime_get_ns(), ino, dev, 0, fresh, 0);
	return 0;
}

SEC("tp_btf/writeback_mark_inode_dirty")
int BPF_PROG(iot_mem_dirty_inode, struct inode *inode, int flags)
{
	return iot_mem_dirty_inode_body(inode, flags);
}

SEC("raw_tp/writeback_mark_inode_dirty")
int BPF_PROG(iot_mem_dirty_inode_raw, struct inode *inode, int flags)
{
	return iot_mem_dirty_inode_body(inode, flags);
}

/* The reason of a write-back: the flusher work this thread is doing, else
 * what the writeback_control says. */
static __always_inline __u16 iot_wb_reason(struct iot_mem_wb *w, struct writeback_control *wbc)
{
	if (w && w->work_reason)
		return w->work_reason;
	if (BPF_CORE_READ_BITFIELD_PROBED(wbc, for_sync))
		return WB_REASON_SYNC + 1;
	if (BPF_CORE_READ_BITFIELD_PROBED(wbc, for_kupdate))
		return WB_REASON_PERIODIC + 1;
	if (BPF_CORE_READ_BITFIELD_PROBED(wbc, for_background))
		return WB_REASON_BACKGROUND + 1;
	return 0;
}

/* Write-back of one inode by the flusher, or by sync_inode / write_inode_now
 * in the caller's context. */
static __always_inline int iot_mem_wb_inode_start_body(struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	__u64 ino;
	__u32 dev;
	iot_inode_ident(inode, &ino, &dev);
	if (!iot_mem_interesting(ino, dev))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iot_mem_wb *w = bpf_map_lookup_elem(&iot_mem_wb_threads, &tid);
	__u16 reason = iot_wb_reason(w, wbc);
	__u32 sync_mode = BPF_CORE_READ(wbc, sync_mode);
	if (w && w->work_reason && !w->work_emitted) {
		/* the flusher work that reached this file */
		iot_wb_emit(IOT_WB_WORK_START, w->work_reason, w->work_ts, 0, w->work_dev, 0,
			    w->work_nr, w->work_sync);
		w->work_emitted = 1;
	}
	if (w) {
		w->in_inode = 1;
	} else {
		struct iot_mem_wb fresh = {.in_inode = 1};
		bpf_map_update_elem(&iot_mem_wb_threads, &tid, &fresh, BPF_ANY);
	}
	iot_wb_emit(IOT_WB_INODE_START, reason, bpf_ktime_get_ns(), ino, dev,
		    BPF_CORE_READ(wbc, range_start) >> IOT_PAGE_SHIFT, nr_to_write, sync_mode);
	return 0;
}

SEC("tp_btf/writeback_single_inode_start")
int BPF_PROG(iot_mem_wb_inode_start, struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	return iot_mem_wb_inode_start_body(inode, wbc, nr_to_write);
}

SEC("raw_tp/writeback_single_inode_start")
int BPF_PROG(iot_mem_wb_inode_start_raw, struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	return iot_mem_wb_inode_start_body(inode, wbc, nr_to_write);
}

static __always_inline int iot_mem_wb_inode_done_body(struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	__u64 ino;
	__u32 dev;
	iot_inode_ident(inode, &ino, &dev);
	if (!iot_mem_interesting(ino, dev))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iot_mem_wb *w = bpf_map_lookup_elem(&iot_mem_wb_threads, &tid);
	__u16 reason = iot_wb_reason(w, wbc);
	if (w) {
		w->in_inode = 0;
		if (!w->work_reason)
			bpf_map_delete_elem(&iot_mem_wb_threads, &tid);
	}
	long left = BPF_CORE_READ(wbc, nr_to_write);
	__u64 wrote = (long)nr_to_write > left ? (long)nr_to_write - left : 0;
	iot_wb_emit(IOT_WB_INODE_DONE, reason, bpf_ktime_get_ns(), ino, dev,
		    BPF_CORE_READ(wbc, range_start) >> IOT_PAGE_SHIFT, wrote,
		    BPF_CORE_READ(wbc, sync_mode));
	return 0;
}

SEC("tp_btf/writeback_single_inode")
int BPF_PROG(iot_mem_wb_inode_done, struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	return iot_mem_wb_inode_done_body(inode, wbc, nr_to_write);
}

SEC("raw_tp/writeback_single_inode")
int BPF_PROG(iot_mem_wb_inode_done_raw, struct inode *inode, struct writeback_control *wbc,
	     unsigned long nr_to_write)
{
	return iot_mem_wb_inode_done_body(inode, wbc, nr_to_write);
}

/* Flusher work: remembered per kworker; recorded only when it writes back an
 * interesting inode (see iot_mem_wb_inode_start). */
static __always_inline int iot_mem_wb_work_start_body(struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iot_mem_wb w = {};
	w.work_ts = bpf_ktime_get_ns();
	w.work_nr = BPF_CORE_READ(work, nr_pages);
	w.work_reason = BPF_CORE_READ(work, reason) + 1;
	w.work_sync = BPF_CORE_READ(work, sync_mode);
	w.work_dev = BPF_CORE_READ(work, sb, s_dev);
	bpf_map_update_elem(&iot_mem_wb_threads, &tid, &w, BPF_ANY);
	return 0;
}

SEC("tp_btf/writeback_start")
int BPF_PROG(iot_mem_wb_work_start, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	return iot_mem_wb_work_start_body(wb, work);
}

SEC("raw_tp/writeback_start")
int BPF_PROG(iot_mem_wb_work_start_raw, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	return iot_mem_wb_work_start_body(wb, work);
}

static __always_inline int iot_mem_wb_work_done_body(struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct iot_mem_wb *w = bpf_map_lookup_elem(&iot_mem_wb_threads, &tid);
	if (!w)
		return 0;
	if (w->work_emitted) {
		__s64 left = BPF_CORE_READ(work, nr_pages);
		__u64 done = (__s64)w->work_nr > left ? w->work_nr - left : 0;
		iot_wb_emit(IOT_WB_WORK_DONE, w->work_reason, bpf_ktime_get_ns(), 0, w->work_dev, 0,
			    done, w->work_sync);
	}
	bpf_map_delete_elem(&iot_mem_wb_threads, &tid);
	return 0;
}

SEC("tp_btf/writeback_written")
int BPF_PROG(iot_mem_wb_work_done, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	return iot_mem_wb_work_done_body(wb, work);
}

SEC("raw_tp/writeback_written")
int BPF_PROG(iot_mem_wb_work_done_raw, struct bdi_writeback *wb, struct wb_writeback_work *work)
{
	return iot_mem_wb_work_done_body(wb, work);
}

/* A thread waits for a page under write-back (fsync/msync waiting for its
 * I/O, or a store into a page being written). */
static __always_inline int iot_mem_wb_wait_body(struct folio *folio, struct address_space *mapping)
{
	if (!folio || !mapping)
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, tid = (__u32)pid_tgid;
	__u64 ino;
	__u32 dev;
	struct inode *host = BPF_CORE_READ(mapping, host);
	iot_inode_ident(host, &ino, &dev);
	struct iot_mem_thread *t = NULL;
	if (iot_tgid_traced(tgid)) {
		iot_mem_first_touch(host, ino, dev, 0, tgid);
		t = iot_mem_thread_get(tid, tgid);
	} else if (!iot_mem_interesting(ino, dev)) {
		return 0;
	}
	iot_mem_run_add(t, IOT_MEM_RUN_WAIT, ino, dev, BPF_CORE_READ(folio, index),
			iot_folio_nr(folio), bpf_ktime_get_ns(), tgid, tid);
	return 0;
}

SEC("tp_btf/folio_wait_writeback")
int BPF_PROG(iot_mem_wb_wait, struct folio *folio, struct address_space *mapping)
{
	return iot_mem_wb_wait_body(folio, mapping);
}

SEC("raw_tp/folio_wait_writeback")
int BPF_PROG(iot_mem_wb_wait_raw, struct folio *folio, struct address_space *mapping)
{
	return iot_mem_wb_wait_body(folio, mapping);
}

/* fsync/msync/sync_file_range write back through ->writepages directly, not
 * through writeback_single_inode: on ext4 its tracepoints show that write-back
 * in the application's context (skipped inside a flusher's inode write-back,
 * which is recorded already). */
static __always_inline bool iot_mem_app_writeback(struct inode *inode, __u64 *ino, __u32 *dev)
{
	iot_inode_ident(inode, ino, dev);
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (!iot_tgid_traced(pid_tgid >> 32) && !iot_mem_interesting(*ino, *dev))
		return false;
	__u32 tid = (__u32)pid_tgid;
	struct iot_mem_wb *w = bpf_map_lookup_elem(&iot_mem_wb_threads, &tid);
	return !(w && w->in_inode);
}

static __always_inline int iot_mem_ext4_writepages_body(struct inode *inode, struct writeback_control *wbc)
{
	__u64 ino;
	__u32 dev;
	if (!iot_mem_app_writeback(inode, &ino, &dev))
		return 0;
	iot_wb_emit(IOT_WB_INODE_START, iot_wb_reason(NULL, wbc), bpf_ktime_get_ns(), ino, dev,
		    BPF_CORE_READ(wbc, range_start) >> IOT_PAGE_SHIFT, BPF_CORE_READ(wbc, nr_to_write),
		    BPF_CORE_READ(wbc, sync_mode));
	return 0;
}

SEC("tp_btf/ext4_writepages")
int BPF_PROG(iot_mem_ext4_writepages, struct inode *inode, struct writeback_control *wbc)
{
	return iot_mem_ext4_writepages_body(inode, wbc);
}

SEC("raw_tp/ext4_writepages")
int BPF_PROG(iot_mem_ext4_writepages_raw, struct inode *inode, struct writeback_control *wbc)
{
	return iot_mem_ext4_writepages_body(inode, wbc);
}

static __always_inline int iot_mem_ext4_writepages_result_body(struct inode *inode, struct writeback_control *wbc,
	     int ret, int pages_written)
{
	__u64 ino;
	__u32 dev;
	if (!iot_mem_app_writeback(inode, &ino, &dev))
		return 0;
	iot_wb_emit(IOT_WB_INODE_DONE, iot_wb_reason(NULL, wbc), bpf_ktime_get_ns(), ino, dev,
		    BPF_CORE_READ(wbc, range_start) >> IOT_PAGE_SHIFT,
		    pages_written > 0 ? pages_written : 0, BPF_CORE_READ(wbc, sync_mode));
	return 0;
}

SEC("tp_btf/ext4_writepages_result")
int BPF_PROG(iot_mem_ext4_writepages_result, struct inode *inode, struct writeback_control *wbc,
	     int ret, int pages_written)
{
	return iot_mem_ext4_writepages_result_body(inode, wbc, ret, pages_written);
}

SEC("raw_tp/ext4_writepages_result")
int BPF_PROG(iot_mem_ext4_writepages_result_raw, struct inode *inode, struct writeback_control *wbc,
	     int ret, int pages_written)
{
	return iot_mem_ext4_writepages_result_body(inode, wbc, ret, pages_written);
}
