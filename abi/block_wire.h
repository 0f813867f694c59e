/* block_wire.h: what the block, NVMe and interference BPF objects
 * (block.bpf.c, nvme.bpf.c, sched.bpf.c) share with their loader
 * (src/capture/block_bpf.cc): statistics slots and map value layouts.
 * Include after vmlinux.h (BPF) or after <stdint.h> (C++), then iotwin_abi.h.
 */
#ifndef IOTWIN_BLOCK_WIRE_H
#define IOTWIN_BLOCK_WIRE_H

#include "iotwin_abi.h"

/* Per-CPU counters (iot_blk_stats), summed by user space into the footer's
 * "block" summary: how each captured bio and request was chosen, and what
 * could not be followed. */
#define IOT_BLK_STAT_BIO_TRACED 0   /* Q in a traced process */
#define IOT_BLK_STAT_BIO_INODE 1    /* Q elsewhere, for a file of interest (write-back, readahead) */
#define IOT_BLK_STAT_BIO_SPLIT 2    /* X of a followed bio */
#define IOT_BLK_STAT_RQ_BIO 3       /* request followed because it holds a followed bio */
#define IOT_BLK_STAT_RQ_CONTEXT 4   /* bio-less request (passthrough) issued by a traced thread */
#define IOT_BLK_STAT_RQ_FLUSH 5     /* flush request answering a followed PREFLUSH */
#define IOT_BLK_STAT_BIOS_FULL 6    /* the bio table was full: a bio went unfollowed */
#define IOT_BLK_STAT_RQS_FULL 7     /* the request table was full */
#define IOT_BLK_STAT_WALK_LIMIT 8   /* an unfollowed request held more bios than the walk looks at */
#define IOT_BLK_STAT_NVME_UNFOLLOWED 9 /* NVMe command of a request nobody follows (dropped) */
#define IOT_BLK_STAT_INODES_FULL 10 /* the interesting-inode set was full */
#define IOT_BLK_STAT_THREADS_FULL 11 /* the in-flight thread table was full */
#define IOT_BLK_STAT_BIO_SYNC 12   /* Q by a kernel thread during a traced fsync on that disk */
#define IOT_BLK_STAT_MAX 13

/* Bios of a request looked at when deciding whether to follow it. */
#define IOT_BLK_WALK 16

#endif /* IOTWIN_BLOCK_WIRE_H */
