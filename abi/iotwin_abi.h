/* iotwin_abi.h: the record layouts shared by the BPF programs, the capture
 * code and the trace file format (the only header kernel and user space share).
 *
 * Every record begins with iot_rec_hdr {type, size}. A record on disk is the
 * struct below, byte for byte, little-endian. Rules that keep old readers
 * working (docs/trace-format.md explains them):
 *   - fields are only ever appended at the end of a record; `size` tells the
 *     reader how many bytes this writer produced; a reader zero-fills fields
 *     beyond `size` and ignores bytes beyond what it knows;
 *   - a reader skips record types it does not know (it counts them);
 *   - fixed-width fields only, largest first within each group, explicit
 *     padding; no enums, bools, pointers or packed structs.
 * Both C (BPF, clang -target bpf) and C++ include this file.
 */
#ifndef IOTWIN_ABI_H
#define IOTWIN_ABI_H

#ifdef __bpf__
/* BPF side: types come from vmlinux.h, included before this header. */
typedef __u8 iot_u8;
typedef __u16 iot_u16;
typedef __u32 iot_u32;
typedef __u64 iot_u64;
typedef __s32 iot_s32;
typedef __s64 iot_s64;
#else
#include <stdint.h>
typedef uint8_t iot_u8;
typedef uint16_t iot_u16;
typedef uint32_t iot_u32;
typedef uint64_t iot_u64;
typedef int32_t iot_s32;
typedef int64_t iot_s64;
#endif

/* ---- record types ------------------------------------------------------ */
#define IOT_REC_STRING 1       /* string table entry (paths, comms, labels) */
#define IOT_REC_SYSCALL 2      /* one file-I/O system call, enter+exit joined */
#define IOT_REC_PROC 3         /* fork/clone/exec/exit, attach snapshots */
#define IOT_REC_FD_SNAPSHOT 4  /* an fd already open when capture attached */
#define IOT_REC_MAP_SNAPSHOT 5 /* a file mapping present when capture attached */
#define IOT_REC_PAGE_FAULT 6   /* a fault on a file-backed mapping */
#define IOT_REC_PAGE_CACHE 7   /* page-cache insertion / removal */
#define IOT_REC_WRITEBACK 8    /* dirtying and write-back */
#define IOT_REC_BLOCK 9        /* one block-layer phase of a bio or request */
#define IOT_REC_NVME 10        /* one NVMe command phase */
#define IOT_REC_ASYNC_IO 11    /* io_uring / libaio request submit or complete */
#define IOT_REC_INTENT 12      /* application intent marker */
#define IOT_REC_LOST 13        /* events lost by a source on a CPU */
#define IOT_REC_CLOCK 14       /* clock anchor: monotonic vs realtime/boottime */
#define IOT_REC_CACHE_STATE 15 /* page-cache residency of a file at start */
#define IOT_REC_SUBPAGE 16     /* changed 8-byte words of a dirtied page */
#define IOT_REC_SCHED 17       /* off-CPU / irq interference interval */
#define IOT_REC_IOVEC 18       /* iovec layout of the preceding vectored call */
#define IOT_REC_FDLIST 19      /* descriptors a call passed or received (SCM_RIGHTS, io_uring files) */
#define IOT_REC_MAX 19

struct iot_rec_hdr {
	iot_u16 type; /* IOT_REC_* */
	iot_u16 size; /* bytes of the whole record, this header included */
};

/* ---- strings ------------------------------------------------------------ */
/* A STRING record precedes, in file order, the first record that names its
 * id. Id 0 means "no string". Bytes follow the fixed part, not NUL-terminated. */
#define IOT_STRING_MAX 4096
struct iot_string {
	struct iot_rec_hdr hdr;
	iot_u32 id;
	iot_u16 len;
	iot_u16 flags; /* IOT_STRF_* */
	/* char bytes[len]; */
};
#define IOT_STRF_TRUNCATED 1 /* the source string was longer than captured */

/* ---- system calls ------------------------------------------------------- */
/* Architecture-neutral operation codes (never raw syscall numbers). */
#define IOT_OP_UNKNOWN 0
#define IOT_OP_OPEN 1
#define IOT_OP_OPENAT 2
#define IOT_OP_OPENAT2 3
#define IOT_OP_CREAT 4
#define IOT_OP_CLOSE 5
#define IOT_OP_CLOSE_RANGE 6
#define IOT_OP_DUP 7
#define IOT_OP_DUP2 8
#define IOT_OP_DUP3 9
#define IOT_OP_FCNTL 10
#define IOT_OP_READ 11
#define IOT_OP_WRITE 12
#define IOT_OP_PREAD64 13
#define IOT_OP_PWRITE64 14
#define IOT_OP_READV 15
#define IOT_OP_WRITEV 16
#define IOT_OP_PREADV 17
#define IOT_OP_PWRITEV 18
#define IOT_OP_PREADV2 19
#define IOT_OP_PWRITEV2 20
#define IOT_OP_LSEEK 21
#define IOT_OP_FSYNC 22
#define IOT_OP_FDATASYNC 23
#define IOT_OP_SYNC_FILE_RANGE 24
#define IOT_OP_SYNCFS 25
#define IOT_OP_FALLOCATE 26
#define IOT_OP_FTRUNCATE 27
#define IOT_OP_TRUNCATE 28
#define IOT_OP_FADVISE64 29
#define IOT_OP_READAHEAD 30
#define IOT_OP_COPY_FILE_RANGE 31
#define IOT_OP_SENDFILE 32
#define IOT_OP_SPLICE 33
#define IOT_OP_MMAP 34
#define IOT_OP_MUNMAP 35
#define IOT_OP_MREMAP 36
#define IOT_OP_MSYNC 37
#define IOT_OP_MADVISE 38
#define IOT_OP_STAT 39
#define IOT_OP_LSTAT 40
#define IOT_OP_FSTAT 41
#define IOT_OP_NEWFSTATAT 42
#define IOT_OP_STATX 43
#define IOT_OP_GETDENTS64 44
#define IOT_OP_MKDIR 45
#define IOT_OP_MKDIRAT 46
#define IOT_OP_UNLINK 47
#define IOT_OP_UNLINKAT 48
#define IOT_OP_RMDIR 49
#define IOT_OP_RENAME 50
#define IOT_OP_RENAMEAT 51
#define IOT_OP_RENAMEAT2 52
#define IOT_OP_LINK 53
#define IOT_OP_LINKAT 54
#define IOT_OP_SYMLINK 55
#define IOT_OP_SYMLINKAT 56
#define IOT_OP_CHDIR 57
#define IOT_OP_FCHDIR 58
#define IOT_OP_IO_SETUP 59
#define IOT_OP_IO_SUBMIT 60
#define IOT_OP_IO_GETEVENTS 61
#define IOT_OP_IO_DESTROY 62
#define IOT_OP_IO_URING_SETUP 63
#define IOT_OP_IO_URING_ENTER 64
#define IOT_OP_IO_URING_REGISTER 65
#define IOT_OP_SYNC 66
#define IOT_OP_IO_PGETEVENTS 67
#define IOT_OP_FLOCK 68
#define IOT_OP_BIND 69    /* AF_UNIX bind to a path: creates a socket file */
#define IOT_OP_RECVMSG 70 /* recvmsg/recvmmsg that received descriptors (SCM_RIGHTS) */
#define IOT_OP_MAX 70

/* One joined system call. Field meaning per op is in docs/trace-format.md:
 * in short, `offset`/`length` are the byte range (length = iovec total for
 * vectored calls), `aux` holds the op's extra scalar (whence, iovcnt, advice,
 * fallocate mode, mmap address hint, the second offset of copy_file_range,
 * a record lock's whence), `fd2` the second descriptor or dirfd, `path_id`/`path2_id` name the paths
 * as the program passed them. File identity is read in the kernel at exit. */
struct iot_syscall {
	struct iot_rec_hdr hdr;
	iot_u16 op;  /* IOT_OP_* */
	iot_u16 cpu; /* CPU at syscall exit */
	iot_u64 ts;  /* enter, CLOCK_MONOTONIC ns */
	iot_u64 dur; /* exit - enter, ns */
	iot_u32 tgid;
	iot_u32 tid;
	iot_s64 ret; /* return value, negative errno on failure */
	iot_s32 fd;  /* first descriptor or dirfd (AT_FDCWD = -100) */
	iot_s32 fd2; /* second descriptor / dirfd, -1 if none */
	iot_u64 offset;
	iot_u64 length;
	iot_u64 aux;
	iot_u32 flags; /* open flags, RWF_*, MAP_*, MS_*, SYNC_FILE_RANGE_*, l_type, LOCK_*, ... */
	iot_u32 mode;  /* open mode, PROT_*, fcntl cmd, ... */
	iot_u64 ino;   /* identity of the file behind fd (or the fd returned) */
	iot_u64 fsize; /* file size seen at exit */
	iot_u32 dev;   /* kernel dev_t of ino's super block (major<<20|minor) */
	iot_u32 path_id;
	iot_u32 path2_id;
	iot_u16 ftype; /* S_IFMT >> 12 of the file, 0 unknown */
	iot_u16 sflags; /* IOT_SCF_* */
};
#define IOT_SCF_PATH_TRUNC 1  /* a path was longer than IOT_STRING_MAX */
#define IOT_SCF_PATH_FAULT 2  /* a path could not be read from user memory */
#define IOT_SCF_NO_FILE 4     /* no file identity could be read */
#define IOT_SCF_INTERRUPTED 8 /* exit never seen (thread died / capture stopped) */
#define IOT_SCF_APPROX_LENGTH 16  /* length not in the source (import): approximate */

/* iovec layout of a vectored call: follows its SYSCALL record, or the SUBMIT
 * ASYNC_IO record of a vectored request (same tid; ts is the record's ts). */
#define IOT_IOVEC_MAX 64
struct iot_iovec {
	struct iot_rec_hdr hdr;
	iot_u32 tid;
	iot_u16 count;    /* iovecs in the call */
	iot_u16 captured; /* lengths that follow (<= IOT_IOVEC_MAX) */
	iot_u32 pad;
	iot_u64 ts;       /* the call's enter time, to pair with it */
	/* iot_u64 len[captured]; */
};

/* Descriptors a call passed or received: follows its SYSCALL record, paired
 * by (tid, ts) as IOVEC. RECVMSG: the descriptors received by SCM_RIGHTS, in
 * the order the control messages hold them; IO_URING_REGISTER: the fd array
 * of IORING_REGISTER_FILES(2) / FILES_UPDATE(2), entry i going to registered
 * slot first + i (-1: an empty slot). Each entry carries the identity of the
 * file behind the descriptor, read in the kernel at exit (IOT_FDLE_IDENT). */
#define IOT_FDLIST_MAX 1024
#define IOT_FDL_RECEIVED 1   /* recvmsg SCM_RIGHTS */
#define IOT_FDL_URING_FILES 2 /* io_uring registered files */
struct iot_fdlist {
	struct iot_rec_hdr hdr;
	iot_u32 tid;
	iot_u16 kind;     /* IOT_FDL_* */
	iot_u16 flags;    /* IOT_FDLF_* */
	iot_u32 count;    /* descriptors in the call */
	iot_u64 ts;       /* the call's enter time, to pair with it */
	iot_u32 captured; /* entries that follow (<= IOT_FDLIST_MAX, <= count) */
	iot_u32 first;    /* IOT_FDL_URING_FILES: registered slot of the first entry */
	/* struct iot_fdlist_entry entries[captured]; */
};
#define IOT_FDLF_FAULT 1 /* the array could not be read: entries past `captured` unknown */
struct iot_fdlist_entry {
	iot_s32 fd;
	iot_u32 dev;     /* identity of the file behind fd (IOT_FDLE_IDENT) */
	iot_u64 ino;
	iot_u32 fflags;  /* the open file's f_flags (O_ACCMODE, O_APPEND, O_DIRECT, ...) */
	iot_u16 ftype;   /* S_IFMT >> 12 */
	iot_u16 eflags;  /* IOT_FDLE_* */
};
#define IOT_FDLE_IDENT 1 /* dev, ino, fflags, ftype were read */

/* ---- processes ---------------------------------------------------------- */
#define IOT_PROC_FORK 1     /* new process: child_tgid/child_tid from tgid/tid */
#define IOT_PROC_THREAD 2   /* new thread in tgid */
#define IOT_PROC_EXEC 3     /* path_id = filename, comm = new comm */
#define IOT_PROC_EXIT 4     /* a thread exited; IOT_PROCF_GROUP_DEAD if last */
#define IOT_PROC_ATTACH 5   /* existing process found at attach; path_id = cwd */
#define IOT_PROC_CWD 6      /* cwd known at this point; path_id */
#define IOT_PROC_START 7    /* the traced root command started */
struct iot_proc {
	struct iot_rec_hdr hdr;
	iot_u16 kind; /* IOT_PROC_* */
	iot_u16 flags;
	iot_u64 ts;
	iot_u64 clone_flags;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 child_tgid;
	iot_u32 child_tid;
	iot_s32 exit_code; /* wait status for EXIT */
	iot_u32 path_id;
	char comm[16];
};
#define IOT_PROCF_GROUP_DEAD 1
#define IOT_PROCF_KILLED 2

/* ---- attach snapshots (from /proc at --pid attach) ----------------------- */
struct iot_fd_snapshot {
	struct iot_rec_hdr hdr;
	iot_u32 tgid;
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 pos;   /* file position */
	iot_u64 fsize;
	iot_s32 fd;
	iot_u32 flags; /* open flags */
	iot_u32 dev;
	iot_u32 path_id;
	iot_u16 ftype;
	iot_u16 pad;
	iot_u32 pad2;
};

struct iot_map_snapshot {
	struct iot_rec_hdr hdr;
	iot_u32 tgid;
	iot_u64 ts;
	iot_u64 start;
	iot_u64 end;
	iot_u64 pgoff; /* file offset in bytes */
	iot_u64 ino;
	iot_u32 dev;
	iot_u32 path_id;
	iot_u32 prot;  /* PROT_* */
	iot_u32 flags; /* MAP_SHARED / MAP_PRIVATE */
};

/* ---- memory layer -------------------------------------------------------- */
struct iot_page_fault {
	struct iot_rec_hdr hdr;
	iot_u16 flags; /* IOT_PFF_* */
	iot_u16 cpu;
	iot_u64 ts;
	iot_u64 addr;
	iot_u64 ino;
	iot_u64 pgoff; /* page index within the file */
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 dev;
	iot_u32 nr_pages; /* pages mapped by this fault incl. fault-around, 0 unknown */
	iot_u64 around_start; /* first page index of those nr_pages (the fault-around window) */
};
#define IOT_PFF_WRITE 1
#define IOT_PFF_MAJOR 2
#define IOT_PFF_SHARED 4
#define IOT_PFF_EXEC 8

#define IOT_PC_ADD 1
#define IOT_PC_DELETE 2
#define IOT_PC_READAHEAD 3 /* a readahead window: index, nr_pages */
struct iot_page_cache {
	struct iot_rec_hdr hdr;
	iot_u16 kind; /* IOT_PC_* */
	iot_u16 cpu;
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 index; /* first page index */
	iot_u32 nr_pages;
	iot_u32 dev;
	iot_u32 tgid;
	iot_u32 tid;
};

#define IOT_WB_DIRTY_FOLIO 1  /* page dirtied, in the dirtier's context */
#define IOT_WB_DIRTY_INODE 2  /* inode marked dirty */
#define IOT_WB_INODE_START 3  /* write-back of one inode starts */
#define IOT_WB_INODE_DONE 4   /* write-back of one inode done: nr = pages written */
#define IOT_WB_WORK_START 5   /* flusher work starts: reason */
#define IOT_WB_WORK_DONE 6
#define IOT_WB_WAIT 7         /* a task waited on write-back of a page */
struct iot_writeback {
	struct iot_rec_hdr hdr;
	iot_u16 kind;   /* IOT_WB_* */
	iot_u16 reason; /* WB_REASON_* of the kernel, +1; 0 unknown */
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 index; /* page index, or first index */
	iot_u64 nr;    /* pages (to write / written) */
	iot_u32 dev;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 sync_mode; /* WB_SYNC_NONE 0 / WB_SYNC_ALL 1 */
};

/* ---- block layer --------------------------------------------------------- */
#define IOT_BLK_QUEUE 1      /* Q: bio queued */
#define IOT_BLK_SPLIT 2      /* X: bio split at new_sector */
#define IOT_BLK_BACKMERGE 3  /* M */
#define IOT_BLK_FRONTMERGE 4 /* F */
#define IOT_BLK_REMAP 5      /* A: from old_dev/old_sector */
#define IOT_BLK_GETRQ 6      /* G */
#define IOT_BLK_INSERT 7     /* I */
#define IOT_BLK_ISSUE 8      /* D */
#define IOT_BLK_COMPLETE 9   /* C */
#define IOT_BLK_REQUEUE 10
#define IOT_BLK_RQ_MERGE 11  /* request merged into another */
#define IOT_BLK_BIO_COMPLETE 12
/* op/flag bits (blk_fill_rwbs order) */
#define IOT_BLKF_READ 1
#define IOT_BLKF_WRITE 2
#define IOT_BLKF_FLUSH 4
#define IOT_BLKF_DISCARD 8
#define IOT_BLKF_SECURE_ERASE 16
#define IOT_BLKF_WRITE_ZEROES 32
#define IOT_BLKF_PREFLUSH 64
#define IOT_BLKF_FUA 128
#define IOT_BLKF_SYNC 256
#define IOT_BLKF_META 512
#define IOT_BLKF_READAHEAD 1024
#define IOT_BLKF_OTHER 2048
struct iot_block {
	struct iot_rec_hdr hdr;
	iot_u16 phase; /* IOT_BLK_* */
	iot_u16 cpu;
	iot_u64 ts;
	iot_u64 sector; /* 512-byte units */
	iot_u64 rq_id;  /* identity of the request (0: none yet) */
	iot_u64 bio_id; /* identity of the bio (0: not a bio event) */
	iot_u64 ino;    /* file of the first page, where known */
	iot_u64 aux;    /* new sector (split), old sector (remap), ioprio (Q), bytes left before (C) */
	iot_u32 nr_sector;
	iot_u32 bytes;
	iot_u32 dev;
	iot_u32 flags; /* IOT_BLKF_* */
	iot_u32 tgid;  /* submitter where in process context, else 0 */
	iot_u32 tid;
	iot_s32 error;
	iot_u32 ino_dev; /* super block dev of ino */
	char comm[16];
	iot_u64 pgoff;     /* page index in the file of the first page (valid when ino != 0) */
	iot_u64 parent_id; /* X: bio_id of the bio this one was split from (0: unknown) */
};

/* ---- NVMe ---------------------------------------------------------------- */
#define IOT_NVME_SETUP 1
#define IOT_NVME_COMPLETE 2
#define IOT_NVME_SQ 3
struct iot_nvme {
	struct iot_rec_hdr hdr;
	iot_u16 phase; /* IOT_NVME_* */
	iot_u16 cpu;
	iot_u64 ts;
	iot_u64 slba;   /* read/write/write-zeroes/compare: starting LBA */
	iot_u64 result; /* completion result (dw0) */
	iot_u64 rq_id;  /* struct request identity, to join block records */
	iot_u32 ctrl_id;
	iot_u32 nsid;
	iot_u32 nlb;    /* number of logical blocks (1-based), 0 if not an I/O */
	iot_u32 cdw10;  /* raw command dwords for non-I/O opcodes */
	iot_u32 cdw11;
	iot_u32 cdw12;
	iot_u32 lba_size; /* from sysfs at capture start, 0 unknown */
	iot_u32 dev;      /* namespace block device dev_t */
	iot_u16 qid;
	iot_u16 cid;
	iot_u16 status;
	iot_u8 opcode;
	iot_u8 fctype;   /* fabrics command type */
	iot_u8 flags;
	iot_u8 retries;
	iot_u8 pad[6];
};

/* ---- asynchronous I/O (io_uring and libaio), one record per request ----- */
#define IOT_AIO_ENGINE_URING 1
#define IOT_AIO_ENGINE_LIBAIO 2
#define IOT_AIO_SUBMIT 1
#define IOT_AIO_COMPLETE 2
struct iot_async_io {
	struct iot_rec_hdr hdr;
	iot_u8 engine; /* IOT_AIO_ENGINE_* */
	iot_u8 phase;  /* IOT_AIO_* */
	iot_u8 opcode; /* IORING_OP_* or IOCB_CMD_* */
	iot_u8 pad0;
	iot_u64 ts;
	iot_u64 ctx;       /* ring / aio context identity */
	iot_u64 req_id;    /* io_kiocb identity or iocb user address */
	iot_u64 user_data; /* SQE user_data / iocb aio_data */
	iot_u64 offset;
	iot_u64 length;
	iot_s64 res;
	iot_u32 tgid;
	iot_u32 tid;
	iot_s32 fd;
	iot_u32 flags;    /* SQE flags / RWF flags */
	iot_u32 rw_flags; /* per-request rw flags */
	iot_u16 cpu;
	iot_u16 pad1;
	/* appended fields: 0 in a record of 88 bytes, which ends here (then aflags is 0 too) */
	iot_u32 ring_flags; /* io_uring: IORING_SETUP_* flags of the ring */
	iot_u16 iov_count;  /* vectored submit: iovecs passed (an IOVEC record follows) */
	iot_u16 buf_index;  /* io_uring *_FIXED submit: registered buffer index */
	iot_u16 aflags;     /* IOT_AIOF_* */
	iot_u16 pad2[3];
};
/* `length` is the request's bytes, for vectored requests the sum of the iovec
 * lengths. In a record without this flag (an 88-byte record) the length of a
 * vectored request is its iovec count (its bytes are unknown there). */
#define IOT_AIOF_BYTES 1
#define IOT_AIOF_IOV_FAULT 2 /* the iovec array could not be read: length unknown (0) */
#define IOT_AIOF_BUF_INDEX 4 /* buf_index holds a registered buffer's index */

/* ---- application intent ------------------------------------------------ */
#define IOT_INTENT_INSTANT 0
#define IOT_INTENT_BEGIN 1
#define IOT_INTENT_END 2
#define IOT_INTENT_SRC_MARKER 1 /* the marker path channel */
#define IOT_INTENT_SRC_UPROBE 2
struct iot_intent {
	struct iot_rec_hdr hdr;
	iot_u16 kind;   /* IOT_INTENT_* */
	iot_u16 source; /* IOT_INTENT_SRC_* */
	iot_u64 ts;
	iot_u64 value;  /* optional numeric argument */
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 label_id; /* string id */
	iot_u32 pad;
};

/* ---- losses, clocks ------------------------------------------------------ */
#define IOT_SRC_SYSCALL 1
#define IOT_SRC_PROC 2
#define IOT_SRC_MEMORY 3
#define IOT_SRC_BLOCK 4
#define IOT_SRC_NVME 5
#define IOT_SRC_ASYNC 6
#define IOT_SRC_SCHED 7
#define IOT_SRC_INTENT 8
#define IOT_SRC_JOIN 9 /* enter/exit join table full */
#define IOT_SRC_MAX 9
struct iot_lost {
	struct iot_rec_hdr hdr;
	iot_u16 source; /* IOT_SRC_* */
	iot_u16 cpu;    /* 0xffff: all CPUs */
	iot_u64 ts;
	iot_u64 count; /* cumulative lost events for (source, cpu) at ts */
};

struct iot_clock {
	struct iot_rec_hdr hdr;
	iot_u32 pad;
	iot_u64 monotonic_ns;
	iot_u64 realtime_ns;
	iot_u64 boottime_ns;
};

/* ---- initial page-cache state -------------------------------------------- */
struct iot_cache_state {
	struct iot_rec_hdr hdr;
	iot_u32 path_id;
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 fsize;
	iot_u64 resident_pages;
	iot_u64 total_pages;
	iot_u32 dev;
	iot_u32 pad;
};

/* ---- sub-page writes ------------------------------------------------------ */
struct iot_subpage {
	struct iot_rec_hdr hdr;
	iot_u32 tgid;
	iot_u64 ts;
	iot_u64 ino;
	iot_u64 pgoff;
	iot_u32 dev;
	iot_u32 changed_words; /* popcount of the bitmap */
	iot_u64 bitmap[8];     /* bit i: 8-byte word i of the 4 KiB page changed */
};

/* ---- interference --------------------------------------------------------- */
#define IOT_SCHED_OFFCPU 1  /* thread off CPU for [ts, ts+dur) */
#define IOT_SCHED_HARDIRQ 2 /* hard interrupt on cpu during [ts, ts+dur) */
#define IOT_SCHED_SOFTIRQ 3
struct iot_sched {
	struct iot_rec_hdr hdr;
	iot_u16 kind;
	iot_u16 cpu;
	iot_u64 ts;
	iot_u64 dur;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 vec;   /* irq number / softirq vector / prev_state */
	iot_u32 pad;
};

#endif /* IOTWIN_ABI_H */
