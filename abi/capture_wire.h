/* capture_wire.h: what the BPF programs put in the ring buffer for the
 * capture's consumer (src/capture/ring_consumer.cc).
 *
 * Most ring records are finished trace records (IOT_REC_SYSCALL, IOT_REC_PROC,
 * IOT_REC_ASYNC_IO, laid out exactly as in abi/iotwin_abi.h) that the consumer
 * appends byte for byte. A few carry variable-length bytes the kernel cannot
 * turn into trace records itself because strings are interned in user space:
 * those use the IOT_WIRE_* types below, which never reach a trace file.
 * Include after vmlinux.h (BPF) or after <stdint.h> (C++), then iotwin_abi.h.
 */
#ifndef IOTWIN_CAPTURE_WIRE_H
#define IOTWIN_CAPTURE_WIRE_H

#include "iotwin_abi.h"

/* Wire-only record types start high so they can never be confused with
 * IOT_REC_* trace types. */
#define IOT_WIRE_SYSCALL_EXT 0x101 /* iot_wire_syscall_ext + iovec lengths or paths */
#define IOT_WIRE_EXEC 0x102        /* iot_wire_exec + filename bytes */
#define IOT_WIRE_INTENT 0x103      /* iot_wire_intent + marker line bytes */
#define IOT_WIRE_ASYNC_EXT 0x104   /* iot_wire_async_ext + iovec lengths */

/* A syscall record with a tail: either `iov_captured` u64 iovec lengths, or
 * path bytes (path_len[0] bytes of the first path, then path_len[1] bytes of
 * the second; no NUL; IOT_WIRE_NO_PATH: the call has no such path; a path
 * that could not be read has length 0 and IOT_SCF_PATH_FAULT). path_id and
 * path2_id in `sc` are 0 and are filled by the consumer after interning. */
#define IOT_WIRE_NO_PATH 0xffff
struct iot_wire_syscall_ext {
	struct iot_syscall sc;
	iot_u16 path_len[2];
	iot_u16 iov_count;    /* iovecs the call passed */
	iot_u16 iov_captured; /* lengths in the tail (<= IOT_IOVEC_MAX) */
	/* tail starts here, 8-byte aligned (offset 120) */
};
#define IOT_WIRE_SYSCALL_EXT_TAIL 120

/* A vectored async request: its finished ASYNC_IO submit record and the
 * lengths of its first `iov_captured` iovecs (the consumer writes them as the
 * IOVEC record that follows the request in the trace). */
struct iot_wire_async_ext {
	struct iot_async_io a;
	iot_u16 iov_captured; /* lengths in the tail (<= IOT_IOVEC_MAX) */
	iot_u16 pad[3];
	/* iot_u64 len[iov_captured]; */
};

/* exec: `proc` is a finished IOT_PROC_EXEC record except path_id. */
struct iot_wire_exec {
	struct iot_proc proc;
	iot_u16 filename_len;
	iot_u16 filename_flags; /* IOT_STRF_TRUNCATED */
	iot_u32 pad;
	/* char filename[filename_len]; */
};

/* A write(2) on the marker file: the line the program wrote (one marker). */
#define IOT_WIRE_INTENT_MAX 256
struct iot_wire_intent {
	struct iot_rec_hdr hdr;
	iot_u16 len;    /* bytes of the line captured */
	iot_u16 source; /* IOT_INTENT_SRC_* */
	iot_u64 ts;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u64 cookie; /* uprobes: label string id (already interned) and kind */
	/* char line[len]; */
};

/* Uprobe cookies: label id in the low 32 bits, IOT_INTENT_* kind above. */
#define IOT_UPROBE_COOKIE(label_id, kind) (((iot_u64)(kind) << 32) | (iot_u32)(label_id))

/* Syscall numbers handled: an array indexed by number gives the op. */
#define IOT_NR_MAX 1024

/* Batch bounds for per-request async records read in the kernel. */
#define IOT_AIO_BATCH_MAX 1024

/* A file by identity: the key of the inode sets (bpf/inodes.bpf.h) that the
 * syscall, memory and block objects share and user space fills. */
struct iot_inode_key {
	iot_u64 ino;
	iot_u32 dev; /* super block dev_t */
	iot_u32 pad;
};

#endif /* IOTWIN_CAPTURE_WIRE_H */
