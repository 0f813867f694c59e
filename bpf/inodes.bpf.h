/* inodes.bpf.h: the interesting-inode set, (dev, ino) -> 1: the files the
 * workload touches. The syscall object marks the regular files traced threads
 * open, before the open returns; the memory object the files a traced thread
 * faulted on, inserted, removed or dirtied a page of; user space the files
 * the workload had open or mapped when it was attached. The memory layer
 * records page-cache removals and write-back of these files only, and the
 * block layer follows the write-back and reads of their pages
 * (block_common.bpf.h). Each object declares the map here; the loader makes
 * them one map with bpf_map__reuse_fd (src/capture/capture_bpf.cc,
 * memory_bpf.cc, block_bpf.cc).
 */
#ifndef IOTWIN_INODES_BPF_H
#define IOTWIN_INODES_BPF_H

#include "common.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct iot_inode_key);
	__type(value, __u8);
} iot_mem_inodes SEC(".maps");

#endif /* IOTWIN_INODES_BPF_H */
