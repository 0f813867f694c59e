/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* iovec.bpf.h: the iovec array of a vectored async request (io_uring READV /
 * WRITEV, libaio PREADV / PWRITEV), read from the submitter's memory while it
 * submits. Such a request's length field is its iovec count; the record gets
 * the bytes (the sum of all iovec lengths) and the first IOT_IOVEC_MAX
 * lengths, which the consumer writes as the IOVEC record after the request.
 * Include after common.bpf.h and capture_wire.h.
 */
#ifndef IOTWIN_IOVEC_BPF_H
#define IOTWIN_IOVEC_BPF_H

/* UIO_MAXIOV: the most iovecs the kernel takes in one request. */
#define IOT_UIO_MAXIOV 1024

/* Per-CPU: the wire record and its tail first (the output reads `ext` and
 * up to IOT_IOVEC_MAX lengths after it), then the iovec copy, sized for the
 * masked read length the verifier sees. */
struct iot_async_scratch {
	struct iot_wire_async_ext ext;
	__u64 lens[IOT_IOVEC_MAX];
	struct iovec iov[2 * IOT_IOVEC_MAX];
};

/* Fills the request in s->ext.a (set by the caller, aflags included) with
 * the `cnt` iovecs at user address `uaddr`: its bytes, iovec count and
 * captured lengths, and makes it an IOT_WIRE_ASYNC_EXT record; returns its
 * size. A fault leaves length 0
 * and IOT_AIOF_IOV_FAULT in place of IOT_AIOF_BYTES. */
static __always_inline __u32 iot_async_iovecs(struct iot_async_scratch *s, __u64 uaddr,
					      __u64 cnt)
{
	struct iot_async_io *a = &s->ext.a;
	__u64 total = 0;
	__u32 captured = 0;
	bool ok = cnt <= IOT_UIO_MAXIOV;
	for (__u32 chunk = 0; ok && chunk < IOT_UIO_MAXIOV / IOT_IOVEC_MAX; chunk++) {
		__u64 first = (__u64)chunk * IOT_IOVEC_MAX;
		if (first >= cnt)
			break;
		__u32 n = cnt - first > IOT_IOVEC_MAX ? IOT_IOVEC_MAX : cnt - first;
		if (bpf_probe_read_user(s->iov, (n & (2 * IOT_IOVEC_MAX - 1)) * sizeof(struct iovec),
					(void *)(uaddr + first * sizeof(struct iovec)))) {
			ok = false;
			break;
		}
		for (__u32 i = 0; i < IOT_IOVEC_MAX; i++) {
			if (i >= n)
				break;
			__u64 len = s->iov[i].iov_len;
			if (chunk == 0)
				s->lens[i] = len;
			total += len;
		}
		if (chunk == 0)
			captured = n;
	}
	a->iov_count = cnt > 0xffff ? 0xffff : cnt;
	if (ok) {
		a->length = total;
	} else {
		a->length = 0;
		a->aflags = (a->aflags & ~IOT_AIOF_BYTES) | IOT_AIOF_IOV_FAULT;
	}
	s->ext.iov_captured = captured;
	s->ext.pad[0] = s->ext.pad[1] = s->ext.pad[2] = 0;
	__u32 size = sizeof(s->ext) + (captured & (2 * IOT_IOVEC_MAX - 1)) * 8;
	a->hdr.type = IOT_WIRE_ASYNC_EXT;
	a->hdr.size = size;
	return size;
}

#endif /* IOTWIN_IOVEC_BPF_H */
