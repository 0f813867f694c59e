/* syscall_wire.h: the short ring form of a system call record.
 *
 * Most calls (read, write, pread64, pwrite64, fstat, lseek, close, ...) leave
 * fd2, aux, flags, mode and the path ids of their iot_syscall at their
 * defaults, and their return value, duration and length fit 32 bits. Such a
 * call crosses the ring in this 72-byte form instead of the 112-byte record;
 * the consumer (src/capture/ring_consumer.cc) writes the full IOT_REC_SYSCALL
 * record with the defaults put back, so traces are the same. Calls that do not
 * fit are sent whole. Include after capture_wire.h.
 */
#ifndef IOTWIN_SYSCALL_WIRE_H
#define IOTWIN_SYSCALL_WIRE_H

#include "iotwin_abi.h"

#define IOT_WIRE_SYSCALL_SHORT 0x120

/* Defaults of the fields the short form leaves out. */
#define IOT_WIRE_SHORT_FD2 (-1)

struct iot_wire_syscall_short {
	struct iot_rec_hdr hdr;
	iot_u16 op;
	iot_u16 cpu;
	iot_u64 ts;
	iot_u32 tgid;
	iot_u32 tid;
	iot_u32 dur;
	iot_s32 fd;
	iot_s32 ret;
	iot_u32 length;
	iot_u64 offset;
	iot_u64 ino;
	iot_u64 fsize;
	iot_u32 dev;
	iot_u16 ftype;
	iot_u16 sflags;
};

#endif /* IOTWIN_SYSCALL_WIRE_H */
