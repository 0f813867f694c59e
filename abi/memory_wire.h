/* memory_wire.h: what the memory layer (memory.bpf.c) shares with user space
 * (src/capture/memory_bpf.cc, memory_tracker.cc) besides finished trace records.
 *
 * - iot_mem_thread: the per-thread state map. Page faults are recorded when
 *   the next fault of the same thread starts (or when user space sweeps an
 *   idle entry), because whether a fault was major and how many pages
 *   fault-around mapped is only known after the fault began; runs of
 *   contiguous page-cache insertions, removals and dirtied pages are
 *   coalesced here too. User space reads the layout to flush idle entries.
 * - IOT_WIRE_PAGE_BASELINE: the content of a page at the moment a store
 *   through a shared mapping dirtied it (--subpage), for the sub-page
 *   tracker's shadow copy. Never written to a trace.
 * - statistics counters (IOT_MEM_STAT_*).
 *
 * Include after vmlinux.h (BPF) or <stdint.h> (C++), after iotwin_abi.h.
 */
#ifndef IOTWIN_MEMORY_WIRE_H
#define IOTWIN_MEMORY_WIRE_H

#include "iotwin_abi.h"

/* Wire-only ring record types of the memory layer (capture_wire.h uses 0x101..). */
#define IOT_WIRE_PAGE_BASELINE 0x110
#define IOT_WIRE_CACHE_STATE 0x111

#define IOT_MEM_PAGE_SIZE 4096

/* A run of contiguous pages of one file with the same fate, in one thread. */
struct iot_mem_run {
	iot_u64 ino;
	iot_u64 start; /* first page index */
	iot_u64 ts;    /* first event of the run */
	iot_u32 dev;
	iot_u32 nr;    /* pages; 0: no run */
	iot_u16 cpu;
	iot_u16 pad[3];
};

/* The runs a thread accumulates. */
#define IOT_MEM_RUN_ADD 0   /* page-cache insertions: PAGE_CACHE IOT_PC_ADD */
#define IOT_MEM_RUN_DEL 1   /* page-cache removals: PAGE_CACHE IOT_PC_DELETE */
#define IOT_MEM_RUN_DIRTY 2 /* pages dirtied: WRITEBACK IOT_WB_DIRTY_FOLIO */
#define IOT_MEM_RUN_WAIT 3  /* waits on pages under write-back: WRITEBACK IOT_WB_WAIT */
#define IOT_MEM_RUNS 4

/* The VMAs of a thread's last faults, to skip bpf_find_vma while the thread
 * keeps faulting in the same mappings (the helper costs microseconds with
 * interrupts off and fails when the mmap lock is contended). Checked against
 * the VMA itself before each use. A few entries, because loaders alternate
 * between the file mapping and their heap. */
#define IOT_MEM_VMA_CACHE 4
struct iot_mem_vma_cache {
	iot_u64 vma; /* kernel address of the VMA, 0: none */
	iot_u64 file; /* its vm_file, 0: anonymous memory */
	iot_u64 mm;
	iot_u64 start;
	iot_u64 end;
	iot_u64 pgoff;
	iot_u64 flags;
	iot_u64 ino;
	iot_u64 mapping;
	iot_u64 inode;
	iot_u32 dev;
	iot_u8 regular;
	iot_u8 pad[3];
};

/* Per traced thread (key: tid). `pf.hdr.type` is 0 when no fault is pending. */
struct iot_mem_thread {
	struct iot_page_fault pf; /* the thread's latest file-backed fault, not yet emitted */
	iot_u64 vm_start;         /* its VMA (the sub-page tracker opens the file through it) */
	iot_u64 vm_end;
	iot_u64 mapping;          /* the file's address_space (kernel address, for folio lookups) */
	struct iot_mem_run runs[4]; /* indexed by IOT_MEM_RUN_* */
	iot_u64 ra_ino;           /* the last readahead window recorded (to drop the */
	iot_u64 ra_start;         /* duplicate a fallback inside page_cache_ra_order */
	iot_u64 ra_end;           /* reports again through page_cache_ra_unbounded) */
	iot_u32 ra_dev;
	iot_u32 tgid;
	iot_u64 last_ts; /* last update: user space flushes entries idle for a while */
	struct iot_mem_vma_cache vc[IOT_MEM_VMA_CACHE];
	iot_u32 vc_next; /* the entry replaced next */
	/* 1: `pf` is a fault whose VMA could not be looked up yet (mmap lock
	 * contended): only addr, ts, cpu, tgid, tid and the write/exec flags are
	 * set (ino 0). It is resolved at the thread's next fault, or by user space
	 * from /proc/PID/maps; meanwhile a fault-around window on a file is kept. */
	iot_u32 unresolved;
	iot_u64 ur_ino;
	iot_u64 ur_start;
	iot_u64 ur_last;
	iot_u32 ur_dev;
	/* ... and the first contiguous run of pages this thread inserted into the
	 * page cache meanwhile, [ur_add_start, ur_add_end) of ur_add_ino: the
	 * fault's own readahead when it was major (ur_add_end 0: none). */
	iot_u32 ur_add_dev;
	iot_u64 ur_add_ino;
	iot_u64 ur_add_start;
	iot_u64 ur_add_end;
};

/* Whether an unresolved fault, now resolved to pf.ino/pf.pgoff, had its own
 * page inserted by its thread while it was pending: then it was major. */
static inline int iot_mem_unresolved_was_major(const struct iot_mem_thread *t)
{
	return t->ur_add_end != 0 && t->ur_add_ino == t->pf.ino && t->ur_add_dev == t->pf.dev &&
	       t->ur_add_start <= t->pf.pgoff && t->pf.pgoff < t->ur_add_end;
}

/* A run ends when the next page is not contiguous, belongs to another file,
 * the run holds this many pages, or started this long ago: a record then
 * stands for one burst, not for minutes of streaming. */
#define IOT_MEM_RUN_MAX_PAGES 4096
#define IOT_MEM_RUN_MAX_NS 1000000ull

#define IOT_MEM_BASELINE_HAS_DATA 1 /* data holds the page before the store */
struct iot_wire_page_baseline {
	struct iot_rec_hdr hdr;
	iot_u16 flags; /* IOT_MEM_BASELINE_* */
	iot_u16 pad;
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 pgoff;
	iot_u64 vm_start; /* the storing process's mapping of the file */
	iot_u64 vm_end;
	iot_u64 vm_pgoff; /* file page index at vm_start */
	iot_u32 dev;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 pad2;
	iot_u8 data[IOT_MEM_PAGE_SIZE];
};
/* The page-cache residency of a file at the first event of a traced thread on
 * it: a CACHE_STATE record without its path (user space names the file). */
struct iot_wire_cache_state {
	struct iot_cache_state cs; /* path_id 0 */
	iot_u32 tgid;
	iot_u32 pad;
};

/* Pages of one dirtied folio copied at most (the rest are counted). */
#define IOT_MEM_BASELINE_MAX_PAGES 16

/* Counters in the per-CPU map iot_mem_stats. */
#define IOT_MEM_STAT_VMA_BUSY 0        /* bpf_find_vma -EBUSY: lookup retried later */
#define IOT_MEM_STAT_VMA_NONE 1        /* no VMA at the address (stack growth, bad access) */
#define IOT_MEM_STAT_ANON_FAULTS 2     /* faults of traced threads on anonymous memory (dropped) */
#define IOT_MEM_STAT_SPECIAL_FAULTS 3  /* faults on mappings of devices and other non-files */
#define IOT_MEM_STAT_INODES_FULL 4     /* interesting-inode set full */
#define IOT_MEM_STAT_THREADS_FULL 5    /* per-thread map full: events emitted uncoalesced */
#define IOT_MEM_STAT_BASELINES 6       /* pages copied for the sub-page tracker */
#define IOT_MEM_STAT_BASELINE_NOADDR 7 /* page address unknown: baseline without data */
#define IOT_MEM_STAT_BASELINE_CAP 8    /* folio pages beyond IOT_MEM_BASELINE_MAX_PAGES */
#define IOT_MEM_STAT_CALIBRATED 9      /* page-address calibrations that agreed */
#define IOT_MEM_STAT_STATE_FULL 10     /* cache-state set full: a file's state not recorded */
#define IOT_MEM_STAT_VMA_CACHED 11     /* faults whose VMA came from the thread's cache */
#define IOT_MEM_STAT_VMA_LATE 12       /* lookups that succeeded when retried */
#define IOT_MEM_STAT_VMA_LOST 13       /* retried lookups that failed again: fault lost (drop) */
#define IOT_MEM_STAT_VMA_HELPER 14     /* lookups that fell back to bpf_find_vma */
#define IOT_MEM_STAT_UNTOUCHED_REMOVED 15 /* pages removed in traced threads of files they never touched (drop_caches, reclaim): left out */
#define IOT_MEM_STAT_MAX 16

#endif /* IOTWIN_MEMORY_WIRE_H */
