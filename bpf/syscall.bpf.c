// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* syscall.bpf.c: the syscall layer. One IOT_REC_SYSCALL record per file-I/O
 * system call of a traced process, enter and exit joined in the kernel.
 *
 * Attach: tp_btf/sys_enter and tp_btf/sys_exit (the raw_syscalls tracepoints,
 * no tracefs needed). Both fire for every system call on the machine, so the
 * first thing each does is the cheapest possible rejection: syscall number ->
 * op through a read-only array (no helper call), then the traced-process
 * filter. Untraced processes pay one array load per syscall, plus one hash
 * lookup for file-I/O syscalls.
 *
 * Exit of read, write, pread64 and pwrite64 fills a reserved 72-byte short
 * record in the ring directly. Other calls build the record in a per-CPU
 * scratch buffer and copy it to the ring: the short form when its left-out
 * fields hold their defaults, else 112 bytes; with a tail (paths read from
 * user memory at exit, iovec lengths) for path and vectored calls. libaio requests are read
 * from io_submit's iocb array and io_getevents' event array here too.
 * Writes to the intent marker file become intent records instead.
 */
#include "common.bpf.h"
#include "syscall_wire.h"
#include "inodes.bpf.h"
#include "iovec.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#if defined(__TARGET_ARCH_x86)
#define IOT_SC_NR(r) ((r)->orig_ax)
#define IOT_SC_A0(r) ((r)->di)
#define IOT_SC_A1(r) ((r)->si)
#define IOT_SC_A2(r) ((r)->dx)
#define IOT_SC_A3(r) ((r)->r10)
#define IOT_SC_A4(r) ((r)->r8)
#define IOT_SC_A5(r) ((r)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define IOT_SC_NR(r) ((r)->syscallno)
#define IOT_SC_A0(r) ((r)->orig_x0)
#define IOT_SC_A1(r) ((r)->regs[1])
#define IOT_SC_A2(r) ((r)->regs[2])
#define IOT_SC_A3(r) ((r)->regs[3])
#define IOT_SC_A4(r) ((r)->regs[4])
#define IOT_SC_A5(r) ((r)->regs[5])
#else
#error "syscall.bpf.c: define the syscall register layout of this architecture"
#endif

/* Each program is written once, as an always-inline body, and attached three
 * ways (src/capture/attach_table.cc says which user space picks): tp_btf,
 * where the tracepoint's arguments are typed BTF pointers read as plain loads;
 * raw_tp, where the same arguments are untyped and read with probes; and the
 * classic raw_syscalls tracepoint, whose record holds the number and the six
 * arguments (or the result) as values. `how` is a constant in each wrapper,
 * so each compiles to its own straight code. */
#define IOT_HOW_BTF 0
#define IOT_HOW_PROBE 1
#define IOT_HOW_TP 2

static __always_inline __u64 iot_probe_u64(const void *p)
{
	__u64 v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), p);
	return v;
}

/* Register FIELD of the syscall's saved registers, or argument n of a classic
 * tracepoint record. */
#define IOT_SC_REG(how, regs, tp_args, n, FIELD)                                  \
	((how) == IOT_HOW_TP ? (__u64)(tp_args)[n]                               \
	 : (how) == IOT_HOW_BTF ? (__u64)FIELD(regs)                             \
				: iot_probe_u64(&FIELD(regs)))

/* fcntl commands worth a record: descriptor copies and flags, record locks
 * and leases (the rest, owners and signals, pipe sizes, seals, do no storage
 * I/O and change no descriptor). Values of the generic 64-bit ABI (x86-64,
 * arm64). */
#define IOT_F_DUPFD 0
#define IOT_F_GETFD 1
#define IOT_F_SETFD 2
#define IOT_F_GETFL 3
#define IOT_F_SETFL 4
#define IOT_F_GETLK 5
#define IOT_F_SETLK 6
#define IOT_F_SETLKW 7
#define IOT_F_OFD_GETLK 36
#define IOT_F_OFD_SETLK 37
#define IOT_F_OFD_SETLKW 38
#define IOT_F_SETLEASE 1024
#define IOT_F_GETLEASE 1025
#define IOT_F_DUPFD_CLOEXEC 1030
#define IOT_MAP_ANONYMOUS 0x20

/* Syscall number -> IOT_OP_*, filled from <sys/syscall.h> by user space. */
const volatile __u8 iot_nr_to_op[IOT_NR_MAX] = {};
/* The intent marker file as the kernel sees it (0: none), learnt by
 * calibration: user space sets iot_calib_tgid to its own pid and writes to the
 * marker file once, and sys_enter stores the identity behind that descriptor.
 * Asking the kernel rather than trusting stat(2) matters where the two
 * disagree (btrfs subvolumes, overlayfs): a wrong match would read a data
 * buffer as a marker line. */
__u64 iot_marker_ino = 0;
__u32 iot_marker_dev = 0;
__u32 iot_calib_tgid = 0;


/* struct flock of the 64-bit ABIs (l_pid and padding not needed). */
struct iot_user_flock {
	__s16 l_type;
	__s16 l_whence;
	__u32 pad;
	__s64 l_start;
	__s64 l_len;
};

static __always_inline bool iot_fcntl_is_lock(__u64 cmd)
{
	return cmd == IOT_F_GETLK || cmd == IOT_F_SETLK || cmd == IOT_F_SETLKW ||
	       cmd == IOT_F_OFD_GETLK || cmd == IOT_F_OFD_SETLK || cmd == IOT_F_OFD_SETLKW;
}

static __always_inline bool iot_fcntl_recorded(__u64 cmd)
{
	return cmd == IOT_F_DUPFD || cmd == IOT_F_DUPFD_CLOEXEC || cmd == IOT_F_GETFD ||
	       cmd == IOT_F_SETFD || cmd == IOT_F_GETFL || cmd == IOT_F_SETFL ||
	       cmd == IOT_F_SETLEASE || cmd == IOT_F_GETLEASE || iot_fcntl_is_lock(cmd);
}

/* What sys_enter saves for sys_exit, per thread. */
struct iot_join {
	__u64 ts;
	__u64 args[6];
	__u64 pre[2]; /* values behind pointer arguments, read before the call changes them */
	__u64 ino;    /* close: identity of the fd, read before it goes away */
	__u64 fsize;
	__u32 dev;
	__u16 ftype;
	__u16 op;
	/* fcntl record locks: the request's l_type and l_whence (l_start and l_len
	 * are pre[0], pre[1]); lk_read is 0 when the struct could not be read at
	 * enter (a page not resident), so exit reads it again. */
	__s16 lk_type;
	__s16 lk_whence;
	__u32 lk_read;
};

/* Per-thread storage rather than a tid-keyed hash: no hashing, no delete per
 * call, and the kernel frees it with the thread. op == 0 means "no call
 * pending". */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct iot_join);
} iot_join SEC(".maps");

struct iot_scratch {
	struct iot_wire_syscall_ext ext;
	/* two paths of up to IOT_STRING_MAX+1 bytes each at masked offsets,
	 * or IOT_IOVEC_MAX lengths; or the marker line */
	__u8 tail[16384 + 512];
	struct iovec iov[IOT_IOVEC_MAX];
	struct iot_wire_intent intent;
	__u8 line[IOT_WIRE_INTENT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_scratch);
} iot_scratch SEC(".maps");

struct iot_ident {
	__u64 ino;
	__u64 fsize;
	__u64 pos;
	__u32 dev;
	__u16 ftype;
	__u16 ok;
};

/* The file identity behind a descriptor is read one of two ways, and the same
 * source is compiled twice (bpf/CMakeLists.txt):
 *  - syscall.bpf.o (default): the struct file pointer read from the fd array
 *    is cast back to a typed kernel pointer with the bpf_rdonly_cast kfunc
 *    (6.2+), so its fields are plain loads, no helper call per field;
 *  - syscall_compat.bpf.o (-DIOT_NO_KFUNC_CAST): for older kernels (Debian
 *    12's 6.1), each field is read with bpf_probe_read_kernel (BPF_CORE_READ).
 * libbpf 1.1 fails a whole object over a kfunc extern the kernel lacks, even
 * an unused one, hence two objects rather than a weak kfunc and a branch.
 * CaptureBpf picks the object from the kernel's BTF. */
#ifndef IOT_NO_KFUNC_CAST
/* Typed view of a kernel pointer read from memory, so that fields can be
 * loaded directly (no helper call per field). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#endif

/* The struct file behind descriptor `fd` of `task` (the current one), or NULL. */
static __always_inline struct file *iot_task_fd_file(struct task_struct *task, long fd)
{
	if (fd < 0)
		return NULL;
	struct fdtable *fdt = task->files->fdt;
	if (!fdt)
		return NULL;
	if ((unsigned long)fd >= fdt->max_fds)
		return NULL;
	struct file **fds = fdt->fd;
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	if (!f)
		return NULL;
#ifndef IOT_NO_KFUNC_CAST
	return bpf_rdonly_cast(f, bpf_core_type_id_kernel(struct file));
#else
	return f; /* untyped for the verifier: fields go through BPF_CORE_READ */
#endif
}

/* The struct file behind descriptor `fd` of the current task, or NULL. */
static __always_inline struct file *iot_fd_file(long fd)
{
	return iot_task_fd_file(bpf_get_current_task_btf(), fd);
}

#ifndef IOT_NO_KFUNC_CAST
static __always_inline void iot_file_ident(struct file *f, struct iot_ident *id)
{
	id->ok = 0;
	if (!f)
		return;
	struct inode *inode = f->f_inode;
	if (!inode)
		return;
	id->ino = inode->i_ino;
	id->fsize = inode->i_size;
	id->dev = inode->i_sb->s_dev;
	id->ftype = (inode->i_mode & IOT_S_IFMT) >> 12;
	id->pos = f->f_pos;
	id->ok = 1;
}
#else
static __always_inline void iot_file_ident(struct file *f, struct iot_ident *id)
{
	id->ok = 0;
	if (!f)
		return;
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	if (!inode)
		return;
	id->ino = BPF_CORE_READ(inode, i_ino);
	id->fsize = BPF_CORE_READ(inode, i_size);
	id->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	id->ftype = (BPF_CORE_READ(inode, i_mode) & IOT_S_IFMT) >> 12;
	id->pos = BPF_CORE_READ(f, f_pos);
	id->ok = 1;
}
#endif

/* *(loff_t *)ptr, or -1 for a NULL pointer (the call uses the file position). */
static __always_inline __u64 iot_user_loff(__u64 ptr)
{
	__u64 v = (__u64)-1;
	if (ptr)
		bpf_probe_read_user(&v, sizeof(v), (void *)ptr);
	return v;
}

/* st_dev as user space sees it (new_encode_dev) -> kernel dev_t. */
static __always_inline __u32 iot_kdev_from_user(__u64 d)
{
	__u32 major = (d & 0xfff00) >> 8;
	__u32 minor = (d & 0xff) | ((d >> 12) & 0xfff00);
	return (major << 20) | minor;
}

/* Reads the user's struct flock into the join entry (lk_read = 1 on success). */
static __always_inline void iot_read_flock(struct iot_join *j, __u64 uptr)
{
	struct iot_user_flock fl = {};
	if (bpf_probe_read_user(&fl, sizeof(fl), (void *)uptr)) {
		/* l_type -1: unknown, unless exit reads it */
		j->lk_type = -1;
		j->lk_whence = 0;
		j->pre[0] = 0;
		j->pre[1] = 0;
		j->lk_read = 0;
		return;
	}
	j->lk_type = fl.l_type;
	j->lk_whence = fl.l_whence;
	j->pre[0] = fl.l_start;
	j->pre[1] = fl.l_len;
	j->lk_read = 1;
}

#define IOT_AF_UNIX 1
#define IOT_SUN_PATH_MAX 108

/* Whether (addr, addrlen) is a struct sockaddr_un naming a file. */
static __always_inline bool iot_unix_path_addr(__u64 addr, __u64 addrlen)
{
	__u8 head[3] = {};
	if (addrlen <= 2 || addrlen > 2 + IOT_SUN_PATH_MAX)
		return false;
	if (bpf_probe_read_user(head, sizeof(head), (void *)addr))
		return false;
	__u16 family = head[0] | (head[1] << 8);
	return family == IOT_AF_UNIX && head[2] != 0;
}

static __always_inline int iot_sys_enter_body(long id, struct pt_regs *regs,
					      const unsigned long *tp_args, const int how)
{
	if ((__u64)id >= IOT_NR_MAX)
		return 0;
	__u16 op = iot_nr_to_op[id];
	if (!op)
		return 0;
	/* A thread's storage exists only once it was found traced: for traced
	 * threads it replaces the traced-set lookup (a process stays traced until
	 * it exits, and its storage goes with it). */
	struct task_struct *task = bpf_get_current_task_btf();
	struct iot_join *j = bpf_task_storage_get(&iot_join, task, NULL, 0);
	if (!j) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;
		if (op == IOT_OP_WRITE && iot_calib_tgid && tgid == iot_calib_tgid) {
			struct iot_ident ident = {};
			iot_file_ident(iot_fd_file((int)IOT_SC_REG(how, regs, tp_args, 0, IOT_SC_A0)), &ident);
			if (ident.ok) {
				iot_marker_dev = ident.dev;
				iot_marker_ino = ident.ino;
			}
			return 0;
		}
		if (!iot_tgid_traced(tgid))
			return 0;
		j = bpf_task_storage_get(&iot_join, task, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!j) {
			iot_count_drop(IOT_SRC_JOIN);
			return 0;
		}
	}
	j->ts = bpf_ktime_get_ns();
	j->args[0] = IOT_SC_REG(how, regs, tp_args, 0, IOT_SC_A0);
	j->args[1] = IOT_SC_REG(how, regs, tp_args, 1, IOT_SC_A1);
	j->args[2] = IOT_SC_REG(how, regs, tp_args, 2, IOT_SC_A2);
	j->args[3] = IOT_SC_REG(how, regs, tp_args, 3, IOT_SC_A3);
	j->args[4] = IOT_SC_REG(how, regs, tp_args, 4, IOT_SC_A4);
	j->args[5] = IOT_SC_REG(how, regs, tp_args, 5, IOT_SC_A5);

	switch (op) {
	case IOT_OP_FCNTL:
		if (!iot_fcntl_recorded(j->args[1])) {
			j->op = 0;
			return 0;
		}
		/* The request as the program made it: F_GETLK overwrites it. */
		if (iot_fcntl_is_lock(j->args[1]))
			iot_read_flock(j, j->args[2]);
		break;
	case IOT_OP_CLOSE: {
		struct iot_ident ident = {};
		iot_file_ident(iot_fd_file((int)j->args[0]), &ident);
		j->ino = ident.ok ? ident.ino : 0;
		j->fsize = ident.fsize;
		j->dev = ident.dev;
		j->ftype = ident.ftype;
		break;
	}
	case IOT_OP_COPY_FILE_RANGE:
	case IOT_OP_SPLICE:
		j->pre[0] = iot_user_loff(j->args[1]);
		j->pre[1] = iot_user_loff(j->args[3]);
		break;
	case IOT_OP_SENDFILE:
		j->pre[0] = iot_user_loff(j->args[2]);
		break;
	case IOT_OP_BIND:
		/* Only a bind to a path makes a file: AF_UNIX with a sun_path
		 * that is neither empty (autobind) nor abstract (leading NUL). */
		if (!iot_unix_path_addr(j->args[1], j->args[2])) {
			j->op = 0;
			return 0;
		}
		break;
	}
	j->op = op; /* last: the entry is complete */
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(iot_sys_enter, struct pt_regs *regs, long id)
{
	return iot_sys_enter_body(id, regs, NULL, IOT_HOW_BTF);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(iot_sys_enter_raw, struct pt_regs *regs, long id)
{
	return iot_sys_enter_body(id, regs, NULL, IOT_HOW_PROBE);
}

SEC("tp/raw_syscalls/sys_enter")
int iot_sys_enter_tp(struct trace_event_raw_sys_enter *ctx)
{
	/* Copied at fixed offsets: the verifier refuses loads through a pointer
	 * derived from ctx (ctx->args passed on). */
	unsigned long args[6];
	args[0] = ctx->args[0];
	args[1] = ctx->args[1];
	args[2] = ctx->args[2];
	args[3] = ctx->args[3];
	args[4] = ctx->args[4];
	args[5] = ctx->args[5];
	return iot_sys_enter_body(ctx->id, NULL, args, IOT_HOW_TP);
}

/* ---- libaio: one ASYNC_IO record per iocb / io_event ---------------------- */
#define IOT_IOCB_CMD_PREADV 7
#define IOT_IOCB_CMD_PWRITEV 8

struct iot_aio_loop {
	__u64 array; /* user address of iocb*[] or io_event[] */
	__u64 ctx;
	__u64 ts;
	__u32 tgid;
	__u32 tid;
	__u16 cpu;
};

/* The callbacks' iocb / io_event copy and record live in a per-CPU buffer, not
 * on their stack: the verifier of kernels before ~6.4 (Debian 12's 6.1) adds a
 * bpf_loop callback's stack to its caller's, and iot_sys_exit already uses
 * most of the 512 bytes ("combined stack size of 2 calls is 576"). */
struct iot_aio_scratch {
	struct iocb cb;
	struct io_event ev;
	struct iot_async_scratch v; /* the record (and a vectored request's iovecs) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_aio_scratch);
} iot_aio_scratch SEC(".maps");

static __always_inline struct iot_async_io *iot_aio_record(struct iot_async_io *a,
							   const struct iot_aio_loop *l)
{
	__builtin_memset(a, 0, sizeof(*a));
	a->hdr.type = IOT_REC_ASYNC_IO;
	a->hdr.size = sizeof(*a);
	a->engine = IOT_AIO_ENGINE_LIBAIO;
	a->ts = l->ts;
	a->ctx = l->ctx;
	a->tgid = l->tgid;
	a->tid = l->tid;
	a->cpu = l->cpu;
	return a;
}

static long iot_aio_submit_one(__u32 i, void *data)
{
	struct iot_aio_loop *l = data;
	__u32 zero = 0;
	struct iot_aio_scratch *s = bpf_map_lookup_elem(&iot_aio_scratch, &zero);
	if (!s)
		return 1;
	__u64 iocb_addr = 0;
	if (bpf_probe_read_user(&iocb_addr, sizeof(iocb_addr), (void *)(l->array + 8 * (__u64)i)) ||
	    bpf_probe_read_user(&s->cb, sizeof(s->cb), (void *)iocb_addr)) {
		iot_count_drop(IOT_SRC_ASYNC);
		return 0;
	}
	struct iot_async_io *a = iot_aio_record(&s->v.ext.a, l);
	a->phase = IOT_AIO_SUBMIT;
	/* each request its own instant inside the call, so that an IOVEC record
	 * pairs with one request (by tid and ts) */
	a->ts = l->ts + 1 + i;
	a->opcode = s->cb.aio_lio_opcode;
	a->req_id = iocb_addr;
	a->user_data = s->cb.aio_data;
	a->offset = s->cb.aio_offset;
	a->fd = s->cb.aio_fildes;
	a->flags = s->cb.aio_flags;
	a->rw_flags = s->cb.aio_rw_flags;
	a->aflags = IOT_AIOF_BYTES;
	if (a->opcode == IOT_IOCB_CMD_PREADV || a->opcode == IOT_IOCB_CMD_PWRITEV) {
#ifndef IOT_NO_KFUNC_CAST
		/* aio_buf is the iovec array, aio_nbytes its count */
		__u32 size = iot_async_iovecs(&s->v, s->cb.aio_buf, s->cb.aio_nbytes);
		iot_output(&s->v, size, IOT_SRC_ASYNC);
		return 0;
#else
		/* The verifier of older kernels (6.1) gives up on the iovec walk inside this
		 * callback ("Argument list too long"): the length stays the iovec count, without
		 * IOT_AIOF_BYTES, and readers take the bytes from the completion's result. */
		a->aflags = 0;
#endif
	}
	a->length = s->cb.aio_nbytes;
	iot_output(a, sizeof(*a), IOT_SRC_ASYNC);
	return 0;
}

static long iot_aio_complete_one(__u32 i, void *data)
{
	struct iot_aio_loop *l = data;
	__u32 zero = 0;
	struct iot_aio_scratch *s = bpf_map_lookup_elem(&iot_aio_scratch, &zero);
	if (!s)
		return 1;
	if (bpf_probe_read_user(&s->ev, sizeof(s->ev),
				(void *)(l->array + sizeof(s->ev) * (__u64)i))) {
		iot_count_drop(IOT_SRC_ASYNC);
		return 0;
	}
	struct iot_async_io *a = iot_aio_record(&s->v.ext.a, l);
	a->phase = IOT_AIO_COMPLETE;
	a->req_id = s->ev.obj;
	a->user_data = s->ev.data;
	a->res = s->ev.res;
	a->fd = -1;
	iot_output(a, sizeof(*a), IOT_SRC_ASYNC);
	return 0;
}

static __always_inline void iot_aio_records(__u16 op, struct iot_syscall *sc, __u64 ctx,
					    __u64 array, __u64 now)
{
	if (sc->ret <= 0)
		return;
	struct iot_aio_loop l = {
		.array = array,
		.ctx = ctx,
		.tgid = sc->tgid,
		.tid = sc->tid,
		.cpu = sc->cpu,
	};
	__u32 n = sc->ret;
	if (n > IOT_AIO_BATCH_MAX) {
		for (__u32 k = IOT_AIO_BATCH_MAX; k < n && k < 2 * IOT_AIO_BATCH_MAX; k++)
			iot_count_drop(IOT_SRC_ASYNC);
		n = IOT_AIO_BATCH_MAX;
	}
	if (op == IOT_OP_IO_SUBMIT) {
		l.ts = sc->ts;
		bpf_loop(n, iot_aio_submit_one, &l, 0);
	} else {
		l.ts = now;
		bpf_loop(n, iot_aio_complete_one, &l, 0);
	}
}

/* ---- descriptor lists: SCM_RIGHTS received, io_uring registered files ---- */
#define IOT_SOL_SOCKET 1
#define IOT_SCM_RIGHTS 1
#define IOT_CMSG_MAX 8     /* control messages walked per recvmsg */
#define IOT_SCM_MAX_FD 253 /* the kernel's SCM_MAX_FD: descriptors per message */
#define IOT_IORING_REGISTER_FILES 2
#define IOT_IORING_UNREGISTER_FILES 3
#define IOT_IORING_REGISTER_FILES_UPDATE 6
#define IOT_IORING_REGISTER_FILES2 13
#define IOT_IORING_REGISTER_FILES_UPDATE2 14
#define IOT_IORING_RSRC_REGISTER_SPARSE 1

/* The user's struct msghdr of the 64-bit ABIs, the fields read here. */
struct iot_user_msghdr {
	__u64 name;
	__u32 namelen;
	__u32 pad;
	__u64 iov;
	__u64 iovlen;
	__u64 control;
	__u64 controllen; /* updated by the kernel: control bytes received */
	__u32 flags;
};
struct iot_user_cmsghdr {
	__u64 len;
	__s32 level;
	__s32 type;
};
struct iot_uring_files_update { /* IORING_REGISTER_FILES_UPDATE */
	__u32 offset;
	__u32 resv;
	__u64 fds;
};
struct iot_uring_rsrc_register { /* IORING_REGISTER_FILES2 */
	__u32 nr;
	__u32 flags;
	__u64 resv2;
	__u64 data;
	__u64 tags;
};
struct iot_uring_rsrc_update2 { /* IORING_REGISTER_FILES_UPDATE2 */
	__u32 offset;
	__u32 resv;
	__u64 data;
	__u64 tags;
	__u32 nr;
	__u32 resv2;
};

/* The record, output as one piece (per-CPU values are at most 32 KiB: the
 * descriptor numbers read from user memory have a map of their own). */
#define IOT_FDL_SCRATCH 32768 /* a power of two: the output size is masked to fit */
struct iot_fdl_scratch {
	struct iot_fdlist l;
	struct iot_fdlist_entry e[IOT_FDLIST_MAX];
	__u8 slack[IOT_FDL_SCRATCH - sizeof(struct iot_fdlist) -
		   IOT_FDLIST_MAX * sizeof(struct iot_fdlist_entry)];
};
/* Sized for the masked reads the verifier sees. */
struct iot_fdl_numbers {
	__s32 fds[2 * IOT_FDLIST_MAX];
	__u32 sparse; /* the entries are empty slots (-1), fds unread */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_fdl_scratch);
} iot_fdl_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_fdl_numbers);
} iot_fdl_numbers SEC(".maps");

static __always_inline __u32 iot_file_fflags(struct file *f)
{
#ifndef IOT_NO_KFUNC_CAST
	return f->f_flags;
#else
	return BPF_CORE_READ(f, f_flags);
#endif
}

/* Entry i: descriptor fds[i] and the identity of the file behind it now. */
static long iot_fdl_fill_one(__u32 i, void *data)
{
	__u32 zero = 0;
	struct iot_fdl_scratch *s = bpf_map_lookup_elem(&iot_fdl_scratch, &zero);
	struct iot_fdl_numbers *nums = bpf_map_lookup_elem(&iot_fdl_numbers, &zero);
	if (!s || !nums)
		return 1;
	/* masked (bpf_loop runs at most IOT_FDLIST_MAX times), not compared: clang
	 * would index with an unchecked copy of i */
	__u32 k = i & (IOT_FDLIST_MAX - 1);
	struct iot_fdlist_entry *e = &s->e[k];
	__s32 fd = nums->sparse ? -1 : nums->fds[k];
	e->fd = fd;
	e->dev = 0;
	e->ino = 0;
	e->fflags = 0;
	e->ftype = 0;
	e->eflags = 0;
	struct file *f = iot_fd_file(fd);
	struct iot_ident ident = {};
	iot_file_ident(f, &ident);
	if (ident.ok) {
		e->dev = ident.dev;
		e->ino = ident.ino;
		e->ftype = ident.ftype;
		e->fflags = iot_file_fflags(f);
		e->eflags = IOT_FDLE_IDENT;
	}
	return 0;
}

/* Emits the FDLIST record of s->fds[0..n) for the call of sc. */
static __always_inline void iot_fdl_emit(struct iot_fdl_scratch *s, const struct iot_syscall *sc,
					 __u16 kind, __u32 count, __u32 n, __u32 first, __u16 flags)
{
	if (n > IOT_FDLIST_MAX)
		n = IOT_FDLIST_MAX;
	bpf_loop(n, iot_fdl_fill_one, NULL, 0);
	struct iot_fdlist *l = &s->l;
	l->hdr.type = IOT_REC_FDLIST;
	l->tid = sc->tid;
	l->kind = kind;
	l->flags = flags;
	l->count = count;
	l->ts = sc->ts;
	l->captured = n;
	l->first = first;
	__u32 size = sizeof(*l) + n * sizeof(struct iot_fdlist_entry);
	l->hdr.size = size;
	asm volatile("" : "+r"(size)); /* keep the mask (see iot_scm_rights) */
	size &= IOT_FDL_SCRATCH - 1;
	iot_output(l, size, IOT_SRC_SYSCALL);
}

/* The descriptors a recvmsg received by SCM_RIGHTS into s->fds; their number.
 * Only the control messages are read, never the payload. */
static __always_inline __u32 iot_scm_rights(struct iot_fdl_numbers *s, __u64 umsg)
{
	struct iot_user_msghdr m = {};
	if (bpf_probe_read_user(&m, sizeof(m), (void *)umsg))
		return 0;
	if (!m.control || m.controllen < sizeof(struct iot_user_cmsghdr))
		return 0;
	__u64 at = m.control, end = m.control + m.controllen;
	__u32 total = 0;
	for (int k = 0; k < IOT_CMSG_MAX; k++) {
		struct iot_user_cmsghdr c = {};
		if (at + sizeof(c) > end || bpf_probe_read_user(&c, sizeof(c), (void *)at))
			break;
		if (c.len < sizeof(c) || c.len > end - at)
			break;
		if (c.level == IOT_SOL_SOCKET && c.type == IOT_SCM_RIGHTS) {
			__u32 nfd = (c.len - sizeof(c)) / 4;
			if (nfd > IOT_SCM_MAX_FD)
				nfd = IOT_SCM_MAX_FD;
			__u32 room = IOT_FDLIST_MAX - (total & (IOT_FDLIST_MAX - 1));
			if (total >= IOT_FDLIST_MAX)
				break;
			if (nfd > room)
				nfd = room;
			/* masked after a barrier: clang would drop a mask it can
			 * prove redundant, and the verifier needs to see it */
			__u32 bytes = nfd * 4;
			asm volatile("" : "+r"(bytes));
			bytes &= 1023;
			if (bytes && bpf_probe_read_user(&s->fds[total & (IOT_FDLIST_MAX - 1)], bytes,
							 (void *)(at + sizeof(c))))
				break;
			total += bytes / 4;
		}
		at += (c.len + 7) & ~7ULL; /* CMSG_ALIGN */
	}
	return total;
}

/* recvmsg: a record only when descriptors came with the message, then their list. */
static __always_inline void iot_emit_recvmsg(struct iot_syscall *sc, __u64 umsg)
{
	__u32 zero = 0;
	struct iot_fdl_scratch *s = bpf_map_lookup_elem(&iot_fdl_scratch, &zero);
	struct iot_fdl_numbers *nums = bpf_map_lookup_elem(&iot_fdl_numbers, &zero);
	if (!s || !nums || sc->ret < 0)
		return;
	nums->sparse = 0;
	__u32 n = iot_scm_rights(nums, umsg);
	if (!n)
		return;
	iot_output(sc, sizeof(*sc), IOT_SRC_SYSCALL);
	iot_fdl_emit(s, sc, IOT_FDL_RECEIVED, n, n, 0, 0);
}

/* io_uring_register of files: the fd array (FILES, FILES2) or the update
 * (FILES_UPDATE, FILES_UPDATE2), after the call's record. */
static __always_inline void iot_uring_files(const struct iot_syscall *sc, __u64 opcode, __u64 arg,
					    __u64 nr_args)
{
	if (sc->ret < 0)
		return;
	__u64 fds = arg, count = nr_args;
	__u32 first = 0;
	opcode &= 0xffff;
	if (opcode == IOT_IORING_REGISTER_FILES2) {
		struct iot_uring_rsrc_register r = {};
		if (bpf_probe_read_user(&r, sizeof(r), (void *)arg))
			return;
		fds = r.flags & IOT_IORING_RSRC_REGISTER_SPARSE ? 0 : r.data;
		count = r.nr;
	} else if (opcode == IOT_IORING_REGISTER_FILES_UPDATE) {
		struct iot_uring_files_update u = {};
		if (bpf_probe_read_user(&u, sizeof(u), (void *)arg))
			return;
		fds = u.fds;
		first = u.offset;
	} else if (opcode == IOT_IORING_REGISTER_FILES_UPDATE2) {
		struct iot_uring_rsrc_update2 u = {};
		if (bpf_probe_read_user(&u, sizeof(u), (void *)arg))
			return;
		fds = u.data;
		first = u.offset;
		count = u.nr;
	} else if (opcode != IOT_IORING_REGISTER_FILES) {
		return;
	}
	__u32 zero = 0;
	struct iot_fdl_scratch *s = bpf_map_lookup_elem(&iot_fdl_scratch, &zero);
	struct iot_fdl_numbers *nums = bpf_map_lookup_elem(&iot_fdl_numbers, &zero);
	if (!s || !nums)
		return;
	__u32 n = count > IOT_FDLIST_MAX ? IOT_FDLIST_MAX : count;
	__u16 flags = 0;
	nums->sparse = !fds; /* every slot empty */
	__u32 bytes = n * 4;
	asm volatile("" : "+r"(bytes)); /* keep the mask below (see iot_scm_rights) */
	bytes &= 2 * IOT_FDLIST_MAX * 4 - 1;
	if (fds && bytes && bpf_probe_read_user(nums->fds, bytes, (void *)fds)) {
		n = 0;
		flags = IOT_FDLF_FAULT;
	}
	iot_fdl_emit(s, sc, IOT_FDL_URING_FILES, count > 0xffffffffULL ? 0xffffffff : count, n,
		     first, flags);
}

/* Reads a NUL-terminated user string into dst; returns its length without the
 * NUL (at most IOT_STRING_MAX) and flags faults and truncation. */
static __always_inline __u32 iot_read_path(__u8 *dst, __u64 uptr, __u16 *sflags)
{
	long n = bpf_probe_read_user_str(dst, IOT_STRING_MAX + 1, (void *)uptr);
	if (n <= 0) {
		*sflags |= IOT_SCF_PATH_FAULT;
		return 0;
	}
	if (n > IOT_STRING_MAX) {
		*sflags |= IOT_SCF_PATH_TRUNC;
		return IOT_STRING_MAX;
	}
	return n - 1;
}

/* A write(2) on the marker file: send the line instead of a syscall record. */
static __always_inline void iot_emit_marker(struct iot_scratch *s, struct iot_syscall *sc,
					    __u64 buf)
{
	__u64 n = sc->ret > 0 ? sc->ret : 0;
	if (n > IOT_WIRE_INTENT_MAX)
		n = IOT_WIRE_INTENT_MAX;
	if (n && bpf_probe_read_user(s->line, n & (IOT_WIRE_INTENT_MAX * 2 - 1), (void *)buf))
		n = 0;
	s->intent.hdr.type = IOT_WIRE_INTENT;
	s->intent.hdr.size = sizeof(s->intent) + n;
	s->intent.len = n;
	s->intent.source = IOT_INTENT_SRC_MARKER;
	s->intent.ts = sc->ts;
	s->intent.tgid = sc->tgid;
	s->intent.tid = sc->tid;
	s->intent.cookie = 0;
	iot_output(&s->intent, (sizeof(s->intent) + n) & (2 * IOT_WIRE_INTENT_MAX - 1),
		   IOT_SRC_INTENT);
}

/* How the exit handler completes the record of an op. */
#define IOT_ID_NONE 0   /* no file identity */
#define IOT_ID_FD 1     /* from descriptor id_fd at exit */
#define IOT_ID_RET 2    /* from the descriptor the call returned */
#define IOT_ID_JOIN 3   /* read at enter (close) */
#define IOT_ID_STAT 4   /* from the struct stat the call filled */
#define IOT_ID_STATX 5  /* from the struct statx the call filled */

/* How a finished call's record is filled in, decided per op by iot_sc_decode:
 * where the file identity comes from, which arguments are paths, whether the
 * call is vectored. */
struct iot_decode {
	int id_kind;
	long id_fd;
	bool pos_offset; /* offset = file position the call used */
	bool vectored;
	__u64 path1, path2;
	__u64 user_buf; /* stat buffer */
	__u32 path1_max; /* non-zero: path1 is at most this long (sun_path need not end in NUL) */
};

/* The record's fields from the call's arguments, per op (a table in code
 * form: one case per IOT_OP, each naming its argument layout). */
static __always_inline void iot_sc_decode(__u16 op, struct iot_join *j, long ret,
					  struct iot_syscall *sc, struct iot_decode *d)
{
	__u64 a0 = j->args[0], a1 = j->args[1], a2 = j->args[2], a3 = j->args[3],
	      a4 = j->args[4], a5 = j->args[5];

	switch (op) {
	/* opens: identity of the returned fd */
	case IOT_OP_OPEN:
		sc->fd = -100;
		d->path1 = a0;
		sc->flags = a1;
		sc->mode = a2;
		d->id_kind = IOT_ID_RET;
		break;
	case IOT_OP_CREAT:
		sc->fd = -100;
		d->path1 = a0;
		sc->flags = 01 | 0100 | 01000; /* O_WRONLY|O_CREAT|O_TRUNC */
		sc->mode = a1;
		d->id_kind = IOT_ID_RET;
		break;
	case IOT_OP_OPENAT:
		sc->fd = a0;
		d->path1 = a1;
		sc->flags = a2;
		sc->mode = a3;
		d->id_kind = IOT_ID_RET;
		break;
	case IOT_OP_OPENAT2: {
		struct open_how how = {};
		bpf_probe_read_user(&how, sizeof(how), (void *)a2);
		sc->fd = a0;
		d->path1 = a1;
		sc->flags = how.flags;
		sc->mode = how.mode;
		sc->aux = how.resolve;
		d->id_kind = IOT_ID_RET;
		break;
	}
	case IOT_OP_CLOSE:
		sc->fd = a0;
		d->id_kind = IOT_ID_JOIN;
		break;
	case IOT_OP_CLOSE_RANGE:
		sc->fd = a0;
		sc->fd2 = a1; /* ~0U reads as -1 */
		sc->flags = a2;
		break;
	case IOT_OP_DUP:
		sc->fd = a0;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_DUP2:
	case IOT_OP_DUP3:
		sc->fd = a0;
		sc->fd2 = a1;
		sc->flags = op == IOT_OP_DUP3 ? a2 : 0;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_FCNTL:
		sc->fd = a0;
		sc->mode = a1;
		if (iot_fcntl_is_lock(a1)) {
			/* (fd, cmd, struct flock *): the lock request in the range
			 * fields, its whence in aux as lseek's, its type in flags. A
			 * struct unreadable at enter (not resident) was read by the
			 * kernel since: read it now. */
			if (!j->lk_read)
				iot_read_flock(j, a2);
			sc->offset = j->pre[0];
			sc->length = j->pre[1];
			sc->aux = (__u64)(__s64)j->lk_whence;
			sc->flags = (__u32)(__s32)j->lk_type;
		} else {
			sc->aux = a2;
		}
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_FLOCK:
		sc->fd = a0;
		sc->flags = a1; /* LOCK_SH / LOCK_EX / LOCK_UN, | LOCK_NB */
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	/* data transfer */
	case IOT_OP_READ:
	case IOT_OP_WRITE:
		sc->fd = a0;
		sc->length = a2;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		d->pos_offset = true;
		break;
	case IOT_OP_PREAD64:
	case IOT_OP_PWRITE64:
		sc->fd = a0;
		sc->length = a2;
		sc->offset = a3;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_READV:
	case IOT_OP_WRITEV:
		sc->fd = a0;
		sc->aux = a2;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		d->pos_offset = true;
		d->vectored = true;
		break;
	case IOT_OP_PREADV:
	case IOT_OP_PWRITEV:
	case IOT_OP_PREADV2:
	case IOT_OP_PWRITEV2:
		sc->fd = a0;
		sc->aux = a2;
		sc->offset = a3; /* pos_l: the whole 64-bit offset on 64-bit ABIs */
		if (op == IOT_OP_PREADV2 || op == IOT_OP_PWRITEV2)
			sc->flags = a5;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		d->vectored = true;
		break;
	case IOT_OP_LSEEK:
		sc->fd = a0;
		sc->offset = a1;
		sc->aux = a2;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_FSYNC:
	case IOT_OP_FDATASYNC:
	case IOT_OP_SYNCFS:
	case IOT_OP_FSTAT:
	case IOT_OP_FCHDIR:
		sc->fd = a0;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_SYNC:
		break;
	case IOT_OP_SYNC_FILE_RANGE:
		sc->fd = a0;
		sc->offset = a1;
		sc->length = a2;
		sc->flags = a3;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_FALLOCATE:
		sc->fd = a0;
		sc->mode = a1;
		sc->offset = a2;
		sc->length = a3;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_FTRUNCATE:
		sc->fd = a0;
		sc->length = a1;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_TRUNCATE:
		sc->fd = -100;
		d->path1 = a0;
		sc->length = a1;
		break;
	case IOT_OP_FADVISE64:
		sc->fd = a0;
		sc->offset = a1;
		sc->length = a2;
		sc->aux = a3;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_READAHEAD:
		sc->fd = a0;
		sc->offset = a1;
		sc->length = a2;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_COPY_FILE_RANGE:
		/* (fd_in, *off_in, fd_out, *off_out, len, flags) */
		sc->fd = a0;
		sc->fd2 = a2;
		sc->offset = j->pre[0];
		sc->aux = j->pre[1];
		sc->length = a4;
		sc->flags = a5;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_SPLICE:
		sc->fd = a0;
		sc->fd2 = a2;
		sc->offset = j->pre[0];
		sc->aux = j->pre[1];
		sc->length = a4;
		sc->flags = a5;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_SENDFILE:
		/* (out_fd, in_fd, *offset, count); offset applies to in_fd */
		sc->fd = a0;
		sc->fd2 = a1;
		sc->offset = j->pre[0];
		sc->length = a3;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	/* memory mappings */
	case IOT_OP_MMAP:
		sc->aux = a0;
		sc->length = a1;
		sc->mode = a2;
		sc->flags = a3;
		sc->fd = a4;
		sc->offset = a5;
		if (!(a3 & IOT_MAP_ANONYMOUS)) {
			d->id_kind = IOT_ID_FD;
			d->id_fd = (int)a4;
		}
		break;
	case IOT_OP_MUNMAP:
		sc->offset = a0; /* address */
		sc->length = a1;
		break;
	case IOT_OP_MREMAP:
		/* (old_addr, old_len, new_len, flags, new_addr) */
		sc->offset = a0;
		sc->length = a1;
		sc->aux = a2;
		sc->flags = a3;
		break;
	case IOT_OP_MSYNC:
		sc->offset = a0;
		sc->length = a1;
		sc->flags = a2;
		break;
	case IOT_OP_MADVISE:
		sc->offset = a0;
		sc->length = a1;
		sc->aux = a2;
		break;
	/* metadata */
	case IOT_OP_STAT:
	case IOT_OP_LSTAT:
		sc->fd = -100;
		d->path1 = a0;
		d->user_buf = a1;
		d->id_kind = IOT_ID_STAT;
		break;
	case IOT_OP_NEWFSTATAT:
		sc->fd = a0;
		d->path1 = a1;
		d->user_buf = a2;
		sc->flags = a3;
		d->id_kind = IOT_ID_STAT;
		break;
	case IOT_OP_STATX:
		sc->fd = a0;
		d->path1 = a1;
		sc->flags = a2;
		sc->mode = a3;
		d->user_buf = a4;
		d->id_kind = IOT_ID_STATX;
		break;
	case IOT_OP_GETDENTS64:
		sc->fd = a0;
		sc->length = a2;
		d->id_kind = IOT_ID_FD;
		d->id_fd = a0;
		break;
	case IOT_OP_MKDIR:
		sc->fd = -100;
		d->path1 = a0;
		sc->mode = a1;
		break;
	case IOT_OP_MKDIRAT:
		sc->fd = a0;
		d->path1 = a1;
		sc->mode = a2;
		break;
	case IOT_OP_UNLINK:
	case IOT_OP_RMDIR:
	case IOT_OP_CHDIR:
		sc->fd = -100;
		d->path1 = a0;
		break;
	case IOT_OP_UNLINKAT:
		sc->fd = a0;
		d->path1 = a1;
		sc->flags = a2;
		break;
	case IOT_OP_RENAME:
	case IOT_OP_LINK:
		sc->fd = -100;
		sc->fd2 = -100;
		d->path1 = a0;
		d->path2 = a1;
		break;
	case IOT_OP_RENAMEAT:
	case IOT_OP_RENAMEAT2:
	case IOT_OP_LINKAT:
		/* (olddirfd, old, newdirfd, new, flags) */
		sc->fd = a0;
		d->path1 = a1;
		sc->fd2 = a2;
		d->path2 = a3;
		sc->flags = op == IOT_OP_RENAMEAT ? 0 : a4;
		break;
	case IOT_OP_SYMLINK:
		/* the target is stored, not resolved: only the link has a dirfd */
		d->path1 = a0;
		sc->fd2 = -100;
		d->path2 = a1;
		break;
	case IOT_OP_SYMLINKAT:
		d->path1 = a0;
		sc->fd2 = a1;
		d->path2 = a2;
		break;
	/* asynchronous I/O */
	case IOT_OP_IO_SETUP:
		sc->length = a0;
		if (ret == 0)
			bpf_probe_read_user(&sc->aux, sizeof(sc->aux), (void *)a1);
		break;
	case IOT_OP_IO_DESTROY:
		sc->aux = a0;
		break;
	case IOT_OP_IO_SUBMIT:
		/* the context is in each request's ASYNC_IO record */
		sc->aux = a1;
		break;
	case IOT_OP_IO_GETEVENTS:
	case IOT_OP_IO_PGETEVENTS:
		sc->aux = a1;
		sc->length = a2;
		break;
	case IOT_OP_IO_URING_SETUP: {
		sc->length = a0;
		__u32 setup_flags = 0;
		bpf_probe_read_user(&setup_flags, sizeof(setup_flags),
				    (void *)(a1 + offsetof(struct io_uring_params, flags)));
		sc->flags = setup_flags;
		break;
	}
	case IOT_OP_IO_URING_ENTER:
		sc->fd = a0;
		sc->aux = a1;
		sc->mode = a2;
		sc->flags = a3;
		break;
	case IOT_OP_IO_URING_REGISTER:
		sc->fd = a0;
		sc->mode = a1;
		sc->length = a3;
		break;
	/* sockets */
	case IOT_OP_RECVMSG:
		/* (sockfd, struct msghdr *, flags); the descriptors follow in FDLIST */
		sc->fd = a0;
		sc->aux = a2;
		break;
	case IOT_OP_BIND:
		/* (sockfd, struct sockaddr_un *, addrlen): the path, against the cwd */
		sc->fd = -100;
		sc->aux = a0;
		d->path1 = a1 + 2;
		d->path1_max = a2 > 2 ? a2 - 2 : 0;
		break;
	}
}

/* A regular file a traced thread opened joins the interesting-inode set. */
static __always_inline void iot_mark_opened(const struct iot_ident *id)
{
	if (!id->ok || (__u16)(id->ftype << 12) != IOT_S_IFREG)
		return;
	struct iot_inode_key k = {.ino = id->ino, .dev = id->dev};
	if (bpf_map_lookup_elem(&iot_mem_inodes, &k))
		return;
	__u8 one = 1;
	bpf_map_update_elem(&iot_mem_inodes, &k, &one, BPF_NOEXIST);
}

/* The file the call was on (or returned), by the decoded identity source;
 * NO_FILE when one was expected but none could be read. */
static __always_inline void iot_sc_identity(struct iot_join *j, long ret, struct iot_syscall *sc,
					    const struct iot_decode *d, struct iot_ident *ident)
{
	if (d->id_kind == IOT_ID_FD) {
		iot_file_ident(iot_fd_file(d->id_fd), ident);
	} else if (d->id_kind == IOT_ID_RET) {
		if (ret >= 0) {
			iot_file_ident(iot_fd_file(ret), ident);
			iot_mark_opened(ident);
		}
	} else if (d->id_kind == IOT_ID_JOIN) {
		ident->ino = j->ino;
		ident->fsize = j->fsize;
		ident->dev = j->dev;
		ident->ftype = j->ftype;
		ident->ok = j->ino != 0;
	} else if (d->id_kind == IOT_ID_STAT) {
		if (ret == 0) {
			struct stat st = {};
			if (!bpf_probe_read_user(&st, sizeof(st), (void *)d->user_buf)) {
				ident->ino = st.st_ino;
				ident->fsize = st.st_size;
				ident->dev = iot_kdev_from_user(st.st_dev);
				ident->ftype = (st.st_mode & IOT_S_IFMT) >> 12;
				ident->ok = 1;
			}
		}
	} else if (d->id_kind == IOT_ID_STATX) {
		if (ret == 0) {
			struct statx stx = {};
			if (!bpf_probe_read_user(&stx, sizeof(stx), (void *)d->user_buf)) {
				ident->ino = stx.stx_ino;
				ident->fsize = stx.stx_size;
				ident->dev = (stx.stx_dev_major << 20) | stx.stx_dev_minor;
				ident->ftype = (stx.stx_mode & IOT_S_IFMT) >> 12;
				ident->ok = 1;
			}
		}
	}
	if (ident->ok) {
		sc->ino = ident->ino;
		sc->fsize = ident->fsize;
		sc->dev = ident->dev;
		sc->ftype = ident->ftype;
		if (d->pos_offset) {
			/* The position after the call minus what it moved: where
			 * the call read or wrote (O_APPEND included). Only
			 * seekable files have positions. */
			__u16 mode = ident->ftype << 12;
			if (mode == IOT_S_IFREG || mode == IOT_S_IFBLK)
				sc->offset = ret > 0 ? ident->pos - ret : ident->pos;
		}
	} else if (d->id_kind != IOT_ID_NONE && !(d->id_kind == IOT_ID_RET && ret < 0) &&
		   !((d->id_kind == IOT_ID_STAT || d->id_kind == IOT_ID_STATX) && ret != 0)) {
		sc->sflags |= IOT_SCF_NO_FILE;
	}
}

/* A record with a tail: the iovec lengths of a vectored call, or the paths. */
static __always_inline void iot_sc_emit_tail(struct iot_scratch *s, struct iot_syscall *sc,
					     const struct iot_decode *d, __u64 a1, __u64 a2)
{
	/* record with a tail */
	__u32 tail = 0;
	s->ext.path_len[0] = IOT_WIRE_NO_PATH;
	s->ext.path_len[1] = IOT_WIRE_NO_PATH;
	s->ext.iov_count = 0;
	s->ext.iov_captured = 0;
	if (d->vectored) {
		__u64 cnt = a2;
		__u32 n = cnt > IOT_IOVEC_MAX ? IOT_IOVEC_MAX : cnt;
		__u64 total = 0;
		s->ext.iov_count = cnt > 0xffff ? 0xffff : cnt;
		if (n && !bpf_probe_read_user(s->iov, (n & (2 * IOT_IOVEC_MAX - 1)) * sizeof(struct iovec),
					      (void *)a1)) {
			__u64 *lens = (__u64 *)s->tail;
			for (__u32 i = 0; i < IOT_IOVEC_MAX; i++) {
				if (i >= n)
					break;
				__u64 len = s->iov[i].iov_len;
				lens[i] = len;
				total += len;
			}
			s->ext.iov_captured = n;
			tail = n * 8;
		}
		sc->length = total;
	} else {
		__u32 l1 = iot_read_path(s->tail, d->path1, &sc->sflags);
		if (d->path1_max && l1 > d->path1_max)
			l1 = d->path1_max;
		__u32 l2 = 0;
		if (d->path2)
			l2 = iot_read_path(&s->tail[l1 & 8191], d->path2, &sc->sflags);
		s->ext.path_len[0] = l1;
		s->ext.path_len[1] = d->path2 ? l2 : IOT_WIRE_NO_PATH;
		tail = (l1 & 8191) + (l2 & 8191);
	}
	__u32 size = IOT_WIRE_SYSCALL_EXT_TAIL + (tail & 16383);
	s->ext.sc.hdr.type = IOT_WIRE_SYSCALL_EXT;
	s->ext.sc.hdr.size = size;
	iot_output(s, size, IOT_SRC_SYSCALL);
}

/* A record whose left-out fields hold their defaults crosses the ring in the
 * short form (syscall_wire.h): 72 bytes instead of 112. False: send it whole. */
static __always_inline bool iot_sc_emit_short(const struct iot_syscall *sc)
{
	if (sc->fd2 != IOT_WIRE_SHORT_FD2 || sc->aux || sc->flags || sc->mode || sc->path_id ||
	    sc->path2_id || sc->dur > 0xffffffffULL || sc->length > 0xffffffffULL ||
	    sc->ret != (__s64)(__s32)sc->ret)
		return false;
	struct iot_wire_syscall_short w;
	w.hdr.type = IOT_WIRE_SYSCALL_SHORT;
	w.hdr.size = sizeof(w);
	w.op = sc->op;
	w.cpu = sc->cpu;
	w.ts = sc->ts;
	w.tgid = sc->tgid;
	w.tid = sc->tid;
	w.dur = sc->dur;
	w.fd = sc->fd;
	w.ret = sc->ret;
	w.length = sc->length;
	w.offset = sc->offset;
	w.ino = sc->ino;
	w.fsize = sc->fsize;
	w.dev = sc->dev;
	w.ftype = sc->ftype;
	w.sflags = sc->sflags;
	iot_output(&w, sizeof(w), IOT_SRC_SYSCALL);
	return true;
}

static __always_inline void iot_sys_finish(struct iot_join *j, long ret, __u64 pid_tgid,
					   __u64 now)
{
	__u32 zero = 0;
	struct iot_scratch *s = bpf_map_lookup_elem(&iot_scratch, &zero);
	if (!s)
		return;
	struct iot_syscall *sc = &s->ext.sc;
	__u16 op = j->op;
	__u64 a0 = j->args[0], a1 = j->args[1], a2 = j->args[2], a3 = j->args[3];

	sc->hdr.type = IOT_REC_SYSCALL;
	sc->hdr.size = sizeof(*sc);
	sc->op = op;
	sc->cpu = bpf_get_smp_processor_id();
	sc->ts = j->ts;
	sc->dur = now - j->ts;
	sc->tgid = pid_tgid >> 32;
	sc->tid = (__u32)pid_tgid;
	sc->ret = ret;
	sc->fd = -1;
	sc->fd2 = -1;
	sc->offset = 0;
	sc->length = 0;
	sc->aux = 0;
	sc->flags = 0;
	sc->mode = 0;
	sc->ino = 0;
	sc->fsize = 0;
	sc->dev = 0;
	sc->path_id = 0;
	sc->path2_id = 0;
	sc->ftype = 0;
	sc->sflags = 0;

	struct iot_decode dec = {.id_kind = IOT_ID_NONE, .id_fd = -1};
	struct iot_decode *d = &dec;
	iot_sc_decode(op, j, ret, sc, d);
	struct iot_ident ident = {};
	iot_sc_identity(j, ret, sc, d, &ident);

	if (op == IOT_OP_WRITE && iot_marker_ino && ident.ok && ident.ino == iot_marker_ino &&
	    ident.dev == iot_marker_dev) {
		iot_emit_marker(s, sc, a1);
		return;
	}

	if (op == IOT_OP_RECVMSG) {
		iot_emit_recvmsg(sc, a1);
		return;
	}
	if (!d->path1 && !d->vectored) {
		if (!iot_sc_emit_short(sc))
			iot_output(sc, sizeof(*sc), IOT_SRC_SYSCALL);
		if (op == IOT_OP_IO_URING_REGISTER)
			iot_uring_files(sc, a1, a2, a3);
		if (op == IOT_OP_IO_SUBMIT)
			iot_aio_records(op, sc, a0, a2, now);
		else if (op == IOT_OP_IO_GETEVENTS || op == IOT_OP_IO_PGETEVENTS)
			iot_aio_records(op, sc, a0, a3, now);
		return;
	}

	iot_sc_emit_tail(s, sc, d, a1, a2);
}

/* read, write, pread64 and pwrite64, the bulk of most traces, straight into a
 * reserved short record: no scratch record, no per-op decode, no copy. The
 * fields are those iot_sys_finish fills for these ops (descriptor identity,
 * the position for read and write). False: a call the short form cannot hold
 * (length, result or duration past 32 bits), or a write to the intent marker
 * file, which iot_sys_finish handles. */
static __always_inline bool iot_sys_finish_rw(struct task_struct *task, struct iot_join *j,
					      long ret, __u64 now)
{
	__u16 op = j->op;
	if (op != IOT_OP_READ && op != IOT_OP_WRITE && op != IOT_OP_PREAD64 &&
	    op != IOT_OP_PWRITE64)
		return false;
	__u64 dur = now - j->ts;
	__u64 length = j->args[2];
	if (dur > 0xffffffffULL || length > 0xffffffffULL || ret != (long)(__s32)ret)
		return false;
	struct iot_ident ident = {};
	iot_file_ident(iot_task_fd_file(task, (long)j->args[0]), &ident);
	if (op == IOT_OP_WRITE && iot_marker_ino && ident.ok && ident.ino == iot_marker_ino &&
	    ident.dev == iot_marker_dev)
		return false;
	struct iot_wire_syscall_short *w = bpf_ringbuf_reserve(&iot_events, sizeof(*w), 0);
	if (!w) {
		iot_count_drop(IOT_SRC_SYSCALL);
		return true;
	}
	w->hdr.type = IOT_WIRE_SYSCALL_SHORT;
	w->hdr.size = sizeof(*w);
	w->op = op;
	w->cpu = bpf_get_smp_processor_id();
	w->ts = j->ts;
	w->tgid = task->tgid; /* what bpf_get_current_pid_tgid returns */
	w->tid = task->pid;
	w->dur = dur;
	w->fd = j->args[0];
	w->ret = ret;
	w->length = length;
	w->offset = 0;
	if (op == IOT_OP_PREAD64 || op == IOT_OP_PWRITE64)
		w->offset = j->args[3];
	if (ident.ok) {
		w->ino = ident.ino;
		w->fsize = ident.fsize;
		w->dev = ident.dev;
		w->ftype = ident.ftype;
		w->sflags = 0;
		/* read and write: where the call read or wrote, as in iot_sc_identity */
		__u16 mode = ident.ftype << 12;
		if ((op == IOT_OP_READ || op == IOT_OP_WRITE) &&
		    (mode == IOT_S_IFREG || mode == IOT_S_IFBLK))
			w->offset = ret > 0 ? ident.pos - ret : ident.pos;
	} else {
		w->ino = 0;
		w->fsize = 0;
		w->dev = 0;
		w->ftype = 0;
		w->sflags = IOT_SCF_NO_FILE;
	}
	bpf_ringbuf_submit(w, iot_wake_flags());
	return true;
}

static __always_inline int iot_sys_exit_body(long nr, long ret)
{
	if ((__u64)nr >= IOT_NR_MAX)
		return 0;
	if (!iot_nr_to_op[nr])
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	struct iot_join *j = bpf_task_storage_get(&iot_join, task, NULL, 0);
	if (!j || !j->op)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (!iot_sys_finish_rw(task, j, ret, now))
		iot_sys_finish(j, ret, bpf_get_current_pid_tgid(), now);
	j->op = 0;
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(iot_sys_exit, struct pt_regs *regs, long ret)
{
	return iot_sys_exit_body(IOT_SC_NR(regs), ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(iot_sys_exit_raw, struct pt_regs *regs, long ret)
{
	return iot_sys_exit_body((long)iot_probe_u64(&IOT_SC_NR(regs)), ret);
}

SEC("tp/raw_syscalls/sys_exit")
int iot_sys_exit_tp(struct trace_event_raw_sys_exit *ctx)
{
	return iot_sys_exit_body(ctx->id, ctx->ret);
}

/* A thread that dies inside a traced call never reaches sys_exit: count the
 * call as lost (the storage itself goes with the thread). The tracepoint runs
 * in the exiting task (do_exit), so the task is the current one in every
 * attach method. */
static __always_inline int iot_sys_thread_exit_body(void)
{
	struct iot_join *j = bpf_task_storage_get(&iot_join, bpf_get_current_task_btf(), NULL, 0);
	if (j && j->op) {
		j->op = 0;
		iot_count_drop(IOT_SRC_JOIN);
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(iot_sys_thread_exit)
{
	return iot_sys_thread_exit_body();
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(iot_sys_thread_exit_raw)
{
	return iot_sys_thread_exit_body();
}

SEC("tp/sched/sched_process_exit")
int iot_sys_thread_exit_tp(void *ctx)
{
	return iot_sys_thread_exit_body();
}
