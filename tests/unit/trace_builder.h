// TraceBuilder: builds iotwin traces programmatically for tests (no BPF, no root).
//
// Records are kept in memory in the order they are added; Feed() hands them to anything with a
// Status Add(const iot_rec_hdr*) method (ModelBuilder, an analysis pass), ForEach() to any
// callable, zero-extended as TraceReader does; WriteFile() writes a real trace with TraceWriter.
// Strings are interned on first use, each STRING record placed before the first record naming
// it, as a real capture does.
//
// Two ways to give time, freely mixed:
// - The clock: every record of the first helpers (Openat, Pread, Block, ...) gets ts = now(),
//   then the clock advances by `step` (10 us by default); syscalls last `dur` (1 us by default).
//   SetTime/Advance move the clock explicitly. Threads belong to the process given by
//   Thread(tgid, tid); an unregistered tid is its own process. These helpers return the record
//   they appended so a test can adjust any field:
//     b.Pread(101, 3, 4096, 4096, 4096).dur = 50'000;
// - Explicit times: Open, Io, Intent and the *At helpers (CloseAt, BlockAt, ...) take `ts` (and
//   the file's dev/ino) as arguments and leave the clock alone; tgid 0 means tgid = tid. Sys()
//   makes a syscall record to adjust and Add(). Call() appends a call held open: it may be
//   adjusted until the next record is added, and the strings interned meanwhile go before it, as
//   the capture writes them:
//     auto& s = b.Call(IOT_OP_OPENAT, ts, tgid, tid, AT_FDCWD, 3);
//     s.path_id = b.Str("/data/in.bin");
//
// The default header is a bare syscall-layer capture; FullCaptureMeta() is one with the syscall,
// memory and block layers enabled, a kernel, an anchor and a command, as analysis expects.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::test {

// The header of a capture with the syscall, memory and block layers (what analysis and the
// report expect of a real recording).
inline nlohmann::json FullCaptureMeta() {
  return {{"tool", "iotwin-test"},
          {"host",
           {{"hostname", "testhost"},
            {"kernel", "6.18.0-test"},
            {"arch", "x86_64"},
            {"cpus", 2},
            {"page_size", 4096},
            {"clock", "monotonic"},
            {"anchor", {{"monotonic_ns", 1'000'000'000ULL}, {"realtime_ns", 0}, {"boottime_ns", 0}}}}},
          {"command", {"synthetic", "--workload"}},
          {"layers",
           {{"syscall", {{"enabled", true}, {"reason", ""}}},
            {"memory", {{"enabled", true}, {"reason", ""}}},
            {"block", {{"enabled", true}, {"reason", ""}}},
            {"nvme", {{"enabled", false}, {"reason", "no NVMe device"}}},
            {"sched", {{"enabled", false}, {"reason", "not requested"}}}}}};
}

class TraceBuilder {
 public:
  TraceBuilder() {
    meta_ = {{"tool", "trace_builder"},
             {"host",
              {{"hostname", "test"}, {"arch", "x86_64"}, {"page_size", 4096}, {"cpus", 2},
               {"clock", "monotonic"}}},
             {"layers", {{"syscall", {{"enabled", true}}}}}};
  }
  explicit TraceBuilder(nlohmann::json meta) : meta_(std::move(meta)) {}

  nlohmann::json& meta() { return meta_; }
  uint64_t now() const { return now_; }
  void SetTime(uint64_t ts) { now_ = ts; }
  void Advance(uint64_t ns) { now_ += ns; }
  uint64_t step = 10'000;
  uint64_t dur = 1'000;

  // tid belongs to process tgid (no record is written).
  void Thread(uint32_t tgid, uint32_t tid) { tgid_of_[tid] = tgid; }
  uint32_t TgidOf(uint32_t tid) const {
    auto it = tgid_of_.find(tid);
    return it == tgid_of_.end() ? tid : it->second;
  }

  // Interns `s`, appending its STRING record the first time.
  uint32_t Str(std::string_view s, bool truncated = false) {
    auto it = strings_.find(std::string(s));
    if (it != strings_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
    strings_.emplace(std::string(s), id);
    auto& buf = NewRecord(sizeof(iot_string) + s.size(), true);
    auto* r = reinterpret_cast<iot_string*>(buf.data());
    r->hdr.type = IOT_REC_STRING;
    r->id = id;
    r->len = static_cast<uint16_t>(s.size());
    r->flags = truncated ? IOT_STRF_TRUNCATED : 0;
    std::memcpy(buf.data() + sizeof(iot_string), s.data(), s.size());
    return id;
  }

  // ---- system calls ------------------------------------------------------------------------
  iot_syscall& Syscall(uint32_t tid, uint16_t op, int64_t ret) {
    auto& r = Append<iot_syscall>(IOT_REC_SYSCALL);
    r.op = op;
    r.ts = now_;
    r.dur = dur;
    r.tgid = TgidOf(tid);
    r.tid = tid;
    r.ret = ret;
    r.fd = -1;
    r.fd2 = -1;
    now_ += step;
    return r;
  }

  iot_syscall& Openat(uint32_t tid, std::string_view path, uint32_t flags, int64_t ret,
                      uint64_t fsize = 0, int dirfd = -100, uint32_t mode = 0644) {
    uint32_t pid = Str(path);
    auto& r = Syscall(tid, IOT_OP_OPENAT, ret);
    r.fd = dirfd;
    r.flags = flags;
    r.mode = mode;
    r.path_id = pid;
    r.fsize = fsize;
    if (ret >= 0) {
      r.ftype = (flags & O_DIRECTORY) ? 4 : 8;
      r.ino = 1000 + pid;
    }
    return r;
  }
  iot_syscall& Close(uint32_t tid, int fd, int64_t ret = 0) {
    auto& r = Syscall(tid, IOT_OP_CLOSE, ret);
    r.fd = fd;
    return r;
  }
  iot_syscall& Read(uint32_t tid, int fd, uint64_t len, int64_t ret, uint64_t fsize = 0) {
    auto& r = Syscall(tid, IOT_OP_READ, ret);
    r.fd = fd;
    r.length = len;
    r.fsize = fsize;
    return r;
  }
  iot_syscall& Write(uint32_t tid, int fd, uint64_t len, int64_t ret) {
    auto& r = Syscall(tid, IOT_OP_WRITE, ret);
    r.fd = fd;
    r.length = len;
    return r;
  }
  iot_syscall& Pread(uint32_t tid, int fd, uint64_t off, uint64_t len, int64_t ret,
                     uint64_t fsize = 0) {
    auto& r = Syscall(tid, IOT_OP_PREAD64, ret);
    r.fd = fd;
    r.offset = off;
    r.length = len;
    r.fsize = fsize;
    return r;
  }
  iot_syscall& Pwrite(uint32_t tid, int fd, uint64_t off, uint64_t len, int64_t ret) {
    auto& r = Syscall(tid, IOT_OP_PWRITE64, ret);
    r.fd = fd;
    r.offset = off;
    r.length = len;
    r.fsize = off + (ret > 0 ? static_cast<uint64_t>(ret) : 0);
    return r;
  }
  // Vectored call with explicit iovec lengths; an IOVEC record follows it.
  iot_syscall& Vectored(uint32_t tid, uint16_t op, int fd, uint64_t off,
                        const std::vector<uint64_t>& lens, int64_t ret, uint32_t rwf = 0) {
    uint64_t total = 0;
    for (auto l : lens) total += l;
    auto& r = Syscall(tid, op, ret);
    r.fd = fd;
    r.offset = off;
    r.length = total;
    r.aux = lens.size();
    r.flags = rwf;
    auto& buf = NewRecord(sizeof(iot_iovec) + lens.size() * sizeof(uint64_t));
    auto* iv = reinterpret_cast<iot_iovec*>(buf.data());
    iv->hdr.type = IOT_REC_IOVEC;
    iv->tid = tid;
    iv->count = static_cast<uint16_t>(lens.size());
    iv->captured = static_cast<uint16_t>(lens.size());
    iv->ts = r.ts;
    std::memcpy(buf.data() + sizeof(iot_iovec), lens.data(), lens.size() * sizeof(uint64_t));
    return Last<iot_syscall>(1);
  }
  iot_syscall& Lseek(uint32_t tid, int fd, int64_t off, int whence, int64_t ret) {
    auto& r = Syscall(tid, IOT_OP_LSEEK, ret);
    r.fd = fd;
    r.offset = static_cast<uint64_t>(off);
    r.aux = static_cast<uint64_t>(whence);
    return r;
  }
  iot_syscall& FdOp(uint32_t tid, uint16_t op, int fd, int64_t ret = 0) {
    auto& r = Syscall(tid, op, ret);
    r.fd = fd;
    return r;
  }
  iot_syscall& Dup(uint32_t tid, int fd, int64_t ret) { return FdOp(tid, IOT_OP_DUP, fd, ret); }
  iot_syscall& Dup2(uint32_t tid, int oldfd, int newfd, int64_t ret, uint16_t op = IOT_OP_DUP2,
                    uint32_t flags = 0) {
    auto& r = Syscall(tid, op, ret);
    r.fd = oldfd;
    r.fd2 = newfd;
    r.flags = flags;
    return r;
  }
  iot_syscall& Fcntl(uint32_t tid, int fd, int cmd, uint64_t arg, int64_t ret) {
    auto& r = Syscall(tid, IOT_OP_FCNTL, ret);
    r.fd = fd;
    r.mode = static_cast<uint32_t>(cmd);
    r.aux = arg;
    return r;
  }
  iot_syscall& CloseRange(uint32_t tid, unsigned first, unsigned last, uint32_t flags = 0) {
    auto& r = Syscall(tid, IOT_OP_CLOSE_RANGE, 0);
    r.fd = static_cast<int32_t>(first);
    r.fd2 = static_cast<int32_t>(last);
    r.flags = flags;
    return r;
  }
  // Path-only calls: stat, mkdir, unlink, rmdir, chdir, truncate ... (first path only).
  iot_syscall& PathOp(uint32_t tid, uint16_t op, std::string_view path, int64_t ret,
                      int dirfd = -100) {
    uint32_t pid = Str(path);
    auto& r = Syscall(tid, op, ret);
    r.fd = dirfd;
    r.path_id = pid;
    return r;
  }
  // Two-path calls: rename, link, symlink (for symlink `a` is the target).
  iot_syscall& Path2Op(uint32_t tid, uint16_t op, std::string_view a, std::string_view b,
                       int64_t ret = 0) {
    uint32_t ia = Str(a), ib = Str(b);
    auto& r = Syscall(tid, op, ret);
    r.fd = -100;
    r.fd2 = -100;
    r.path_id = ia;
    r.path2_id = ib;
    return r;
  }
  iot_syscall& Mmap(uint32_t tid, int fd, uint64_t off, uint64_t len, uint32_t prot,
                    uint32_t flags, uint64_t addr_ret) {
    auto& r = Syscall(tid, IOT_OP_MMAP, static_cast<int64_t>(addr_ret));
    r.fd = fd;
    r.offset = off;
    r.length = len;
    r.mode = prot;
    r.flags = flags;
    return r;
  }
  // munmap/msync/madvise: address in offset, length, msync flags in flags, advice in aux.
  iot_syscall& MemOp(uint32_t tid, uint16_t op, uint64_t addr, uint64_t len, uint64_t aux = 0,
                     uint32_t flags = 0, int64_t ret = 0) {
    auto& r = Syscall(tid, op, ret);
    r.offset = addr;
    r.length = len;
    r.aux = aux;
    r.flags = flags;
    return r;
  }

  // ---- processes ---------------------------------------------------------------------------
  iot_proc& Proc(uint16_t kind, uint32_t tgid, uint32_t tid, uint32_t child_tgid = 0,
                 uint32_t child_tid = 0, std::string_view path = {}) {
    uint32_t pid = path.empty() ? 0 : Str(path);
    auto& r = Append<iot_proc>(IOT_REC_PROC);
    r.kind = kind;
    r.ts = now_;
    r.tgid = tgid;
    r.tid = tid;
    r.child_tgid = child_tgid;
    r.child_tid = child_tid;
    r.path_id = pid;
    now_ += step;
    return r;
  }
  iot_proc& Fork(uint32_t parent_tid, uint32_t child_pid) {
    Thread(child_pid, child_pid);
    return Proc(IOT_PROC_FORK, TgidOf(parent_tid), parent_tid, child_pid, child_pid);
  }
  iot_proc& NewThread(uint32_t creator_tid, uint32_t new_tid) {
    uint32_t tgid = TgidOf(creator_tid);
    Thread(tgid, new_tid);
    return Proc(IOT_PROC_THREAD, tgid, creator_tid, tgid, new_tid);
  }
  iot_proc& Exec(uint32_t tid, std::string_view path) {
    return Proc(IOT_PROC_EXEC, TgidOf(tid), tid, 0, 0, path);
  }
  iot_proc& Exit(uint32_t tid, bool group_dead) {
    auto& r = Proc(IOT_PROC_EXIT, TgidOf(tid), tid);
    r.flags = group_dead ? IOT_PROCF_GROUP_DEAD : 0;
    return r;
  }
  iot_proc& Cwd(uint32_t tid, std::string_view path) {
    return Proc(IOT_PROC_CWD, TgidOf(tid), tid, 0, 0, path);
  }
  iot_proc& Attach(uint32_t tid, std::string_view cwd) {
    return Proc(IOT_PROC_ATTACH, TgidOf(tid), tid, 0, 0, cwd);
  }
  iot_fd_snapshot& FdSnapshot(uint32_t tgid, int fd, std::string_view path, uint32_t flags,
                              uint64_t pos, uint64_t fsize, uint16_t ftype = 8) {
    uint32_t pid = Str(path);
    auto& r = Append<iot_fd_snapshot>(IOT_REC_FD_SNAPSHOT);
    r.tgid = tgid;
    r.ts = now_;
    r.fd = fd;
    r.flags = flags;
    r.pos = pos;
    r.fsize = fsize;
    r.path_id = pid;
    r.ftype = ftype;
    return r;
  }

  // ---- memory, async, block, losses -----------------------------------------------------------
  iot_page_fault& Fault(uint32_t tid, uint64_t addr, bool write, uint64_t pgoff = 0,
                        uint64_t ino = 0) {
    auto& r = Append<iot_page_fault>(IOT_REC_PAGE_FAULT);
    r.flags = write ? IOT_PFF_WRITE : 0;
    r.ts = now_;
    r.addr = addr;
    r.ino = ino;
    r.pgoff = pgoff;
    r.tgid = TgidOf(tid);
    r.tid = tid;
    now_ += step;
    return r;
  }
  iot_async_io& Async(uint32_t tid, uint8_t engine, uint8_t phase, uint8_t opcode, uint64_t ctx,
                      uint64_t req, int fd, uint64_t off, uint64_t len, int64_t res = 0) {
    auto& r = Append<iot_async_io>(IOT_REC_ASYNC_IO);
    r.engine = engine;
    r.phase = phase;
    r.opcode = opcode;
    r.ts = now_;
    r.ctx = ctx;
    r.req_id = req;
    r.user_data = req;
    r.offset = off;
    r.length = len;
    r.res = res;
    r.tgid = TgidOf(tid);
    r.tid = tid;
    r.fd = fd;
    r.aflags = phase == IOT_AIO_SUBMIT ? IOT_AIOF_BYTES : 0;
    return r;
  }
  // A vectored request's submission as the capture writes it: length = the sum of `lens`, their
  // count, then its IOVEC record (the first IOT_IOVEC_MAX lengths). The clock advances a step.
  iot_async_io& AsyncVectored(uint32_t tid, uint8_t engine, uint8_t opcode, uint64_t ctx,
                              uint64_t req, int fd, uint64_t off,
                              const std::vector<uint64_t>& lens) {
    uint64_t total = 0;
    for (auto l : lens) total += l;
    auto& r = Async(tid, engine, IOT_AIO_SUBMIT, opcode, ctx, req, fd, off, total);
    r.iov_count = static_cast<uint16_t>(lens.size());
    const size_t n = std::min<size_t>(lens.size(), IOT_IOVEC_MAX);
    auto& buf = NewRecord(sizeof(iot_iovec) + n * sizeof(uint64_t));
    auto* iv = reinterpret_cast<iot_iovec*>(buf.data());
    iv->hdr.type = IOT_REC_IOVEC;
    iv->tid = tid;
    iv->count = static_cast<uint16_t>(lens.size());
    iv->captured = static_cast<uint16_t>(n);
    iv->ts = r.ts;
    std::memcpy(buf.data() + sizeof(iot_iovec), lens.data(), n * sizeof(uint64_t));
    now_ += step;
    return Last<iot_async_io>(1);
  }
  // The FDLIST record of the call just appended (same tid and ts): `fds` with identities
  // `inos` (0: none read) on device `dev`, entry i for slot `first` + i.
  void FdList(uint16_t kind, const std::vector<int32_t>& fds, const std::vector<uint64_t>& inos = {},
              uint32_t first = 0, uint32_t dev = 0) {
    CloseCall();
    const auto& call = *reinterpret_cast<const iot_syscall*>(records_.back().data());
    const uint32_t tid = call.tid;
    const uint64_t ts = call.ts;
    auto& buf = NewRecord(sizeof(iot_fdlist) + fds.size() * sizeof(iot_fdlist_entry));
    auto* l = reinterpret_cast<iot_fdlist*>(buf.data());
    l->hdr.type = IOT_REC_FDLIST;
    l->tid = tid;
    l->kind = kind;
    l->count = static_cast<uint32_t>(fds.size());
    l->captured = static_cast<uint32_t>(fds.size());
    l->ts = ts;
    l->first = first;
    auto* e = reinterpret_cast<iot_fdlist_entry*>(buf.data() + sizeof(iot_fdlist));
    for (size_t i = 0; i < fds.size(); i++) {
      e[i].fd = fds[i];
      if (i < inos.size() && inos[i] != 0) {
        e[i].ino = inos[i];
        e[i].dev = dev;
        e[i].ftype = 8;
        e[i].fflags = O_RDWR;
        e[i].eflags = IOT_FDLE_IDENT;
      }
    }
  }
  // Cuts the last record to its first `size` bytes, as an older writer wrote it.
  void ShortenLast(uint16_t size) {
    CloseCall();
    auto& buf = records_.back();
    buf.resize(size);
    reinterpret_cast<iot_rec_hdr*>(buf.data())->size = size;
  }
  iot_block& Block(uint16_t phase, uint64_t sector, uint32_t bytes, uint32_t flags,
                   uint64_t rq_id, uint32_t dev = 0x800000) {
    auto& r = Append<iot_block>(IOT_REC_BLOCK);
    r.phase = phase;
    r.ts = now_;
    r.sector = sector;
    r.rq_id = rq_id;
    r.nr_sector = bytes / 512;
    r.bytes = bytes;
    r.dev = dev;
    r.flags = flags;
    now_ += step;
    return r;
  }
  iot_lost& Lost(uint16_t source, uint64_t count, uint16_t cpu = 0) {
    auto& r = Append<iot_lost>(IOT_REC_LOST);
    r.source = source;
    r.cpu = cpu;
    r.ts = now_;
    r.count = count;
    return r;
  }
  iot_page_cache& PageCache(uint32_t tid, uint16_t kind, uint32_t dev, uint64_t ino, uint64_t index,
                            uint32_t nr_pages) {
    auto& r = Append<iot_page_cache>(IOT_REC_PAGE_CACHE);
    r.kind = kind;
    r.ts = now_;
    r.ino = ino;
    r.dev = dev;
    r.index = index;
    r.nr_pages = nr_pages;
    r.tgid = TgidOf(tid);
    r.tid = tid;
    return r;
  }
  iot_cache_state& CacheState(std::string_view path, uint64_t fsize, uint64_t resident,
                              uint64_t total) {
    uint32_t pid = Str(path);
    auto& r = Append<iot_cache_state>(IOT_REC_CACHE_STATE);
    r.path_id = pid;
    r.ts = now_;
    r.fsize = fsize;
    r.resident_pages = resident;
    r.total_pages = total;
    return r;
  }

  // ---- records at explicit times (the clock is left alone) ---------------------------------
  // Appends a copy of `rec` (its hdr.size bytes).
  template <typename T>
  void Add(const T& rec) {
    CloseCall();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&rec);
    records_.emplace_back(p, p + rec.hdr.size);
  }

  // A system call of a regular file at `ts`, 1 µs long, held open (see the top of this file):
  // the returned record may be adjusted until the next record is added.
  iot_syscall& Call(uint16_t op, uint64_t ts, uint32_t tgid, uint32_t tid, int32_t fd,
                    int64_t ret) {
    CloseCall();
    open_call_ = Sys(op, tid, ts);
    open_call_.tgid = tgid;
    open_call_.fd = fd;
    open_call_.ret = ret;
    open_call_.ftype = 8;
    has_open_call_ = true;
    return open_call_;
  }

  // A system call with common defaults: tgid = tid unless set, 1 µs long, succeeded.
  static iot_syscall Sys(uint16_t op, uint32_t tid, uint64_t ts, uint32_t tgid = 0) {
    iot_syscall s{};
    InitRecord(&s, IOT_REC_SYSCALL);
    s.op = op;
    s.tid = tid;
    s.tgid = tgid ? tgid : tid;
    s.ts = ts;
    s.dur = 1000;
    s.fd = -1;
    s.fd2 = -1;
    return s;
  }

  void Open(uint32_t tid, uint64_t ts, std::string_view path, int fd, uint32_t dev, uint64_t ino,
            uint32_t flags = O_RDONLY, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_OPENAT, tid, ts, tgid);
    s.fd = -100;
    s.ret = fd;
    s.flags = flags;
    s.dev = dev;
    s.ino = ino;
    s.path_id = Str(path);
    Add(s);
  }

  // pread64/pwrite64 (explicit offsets) or read/write (offset left 0: the analyzer tracks it).
  void Io(uint16_t op, uint32_t tid, uint64_t ts, uint64_t dur, int fd, uint32_t dev,
          uint64_t ino, uint64_t offset, uint64_t length, int64_t ret, uint32_t tgid = 0) {
    iot_syscall s = Sys(op, tid, ts, tgid);
    s.dur = dur;
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    s.offset = offset;
    s.length = length;
    s.ret = ret;
    Add(s);
  }

  void LseekAt(uint32_t tid, uint64_t ts, int fd, uint32_t dev, uint64_t ino, int64_t to,
               uint32_t whence = SEEK_SET, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_LSEEK, tid, ts, tgid);
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    s.offset = static_cast<uint64_t>(to);
    s.aux = whence;
    s.ret = to;
    Add(s);
  }

  void CloseAt(uint32_t tid, uint64_t ts, int fd, uint32_t dev, uint64_t ino, uint32_t tgid = 0) {
    iot_syscall s = Sys(IOT_OP_CLOSE, tid, ts, tgid);
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    Add(s);
  }

  void ProcAt(uint16_t kind, uint64_t ts, uint32_t tgid, uint32_t tid, const char* comm,
              uint32_t child_tgid = 0, uint32_t child_tid = 0) {
    iot_proc p = ProcRecord(kind, ts, tgid, tid, comm);
    p.child_tgid = child_tgid;
    p.child_tid = child_tid;
    Add(p);
  }
  // A process record to adjust and Add(): `comm` as bytes (up to 15, whatever they hold), the
  // exec'd or cwd path's string id.
  static iot_proc ProcRecord(uint16_t kind, uint64_t ts, uint32_t tgid, uint32_t tid,
                             std::string_view comm = {}, uint32_t path_id = 0) {
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = kind;
    p.ts = ts;
    p.tgid = tgid;
    p.tid = tid;
    p.path_id = path_id;
    std::memcpy(p.comm, comm.data(), std::min(comm.size(), sizeof p.comm - 1));
    return p;
  }

  void BlockAt(uint16_t phase, uint64_t ts, uint32_t dev, uint64_t sector, uint32_t bytes,
               uint32_t flags, uint64_t rq_id) {
    Add(BlockRecord(phase, ts, dev, sector, bytes, flags, rq_id));
  }
  // A block record to adjust and Add(); `tid` (also its tgid) the thread it is charged to.
  static iot_block BlockRecord(uint16_t phase, uint64_t ts, uint32_t dev, uint64_t sector,
                               uint32_t bytes, uint32_t flags, uint64_t rq_id, uint32_t tid = 0) {
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = phase;
    b.ts = ts;
    b.dev = dev;
    b.sector = sector;
    b.nr_sector = bytes / 512;
    b.bytes = bytes;
    b.flags = flags;
    b.rq_id = rq_id;
    b.tid = tid;
    b.tgid = tid;
    return b;
  }

  // A call of thread 1 on the file (dev, ino) of type `ftype`: `ret` bytes at `offset` for a
  // data call; with `path`, a call relative to the working directory naming it.
  void FileCall(uint16_t op, uint64_t ts, int fd, uint32_t dev, uint64_t ino, uint16_t ftype,
                int64_t ret, uint64_t offset = 0, std::string_view path = {}) {
    iot_syscall s = Sys(op, 1, ts);
    s.fd = fd;
    s.dev = dev;
    s.ino = ino;
    s.ftype = ftype;
    s.ret = ret;
    s.offset = offset;
    s.length = ret > 0 ? static_cast<uint64_t>(ret) : 0;
    if (!path.empty()) {
      s.fd = -100;
      s.path_id = Str(path);
    }
    Add(s);
  }

  void FaultAt(uint64_t ts, uint32_t tid, uint32_t dev, uint64_t ino, uint64_t pgoff, bool major,
               uint32_t nr_pages = 1, uint32_t tgid = 0) {
    iot_page_fault f{};
    InitRecord(&f, IOT_REC_PAGE_FAULT);
    f.ts = ts;
    f.tgid = tgid ? tgid : tid;
    f.tid = tid;
    f.dev = dev;
    f.ino = ino;
    f.pgoff = pgoff;
    f.flags = major ? IOT_PFF_MAJOR : 0;
    f.nr_pages = nr_pages;
    Add(f);
  }

  void PageCacheAt(uint16_t kind, uint64_t ts, uint32_t dev, uint64_t ino, uint64_t index,
                   uint32_t nr_pages) {
    iot_page_cache c{};
    InitRecord(&c, IOT_REC_PAGE_CACHE);
    c.kind = kind;
    c.ts = ts;
    c.dev = dev;
    c.ino = ino;
    c.index = index;
    c.nr_pages = nr_pages;
    Add(c);
  }

  // An async request's phase on context 0xc0ffee, tgid = tid.
  void AsyncAt(uint8_t engine, uint8_t phase, uint8_t opcode, uint64_t ts, uint32_t tid, int fd,
               uint64_t req_id, uint64_t offset, uint64_t length, int64_t res) {
    iot_async_io a{};
    InitRecord(&a, IOT_REC_ASYNC_IO);
    a.engine = engine;
    a.phase = phase;
    a.opcode = opcode;
    a.ts = ts;
    a.ctx = 0xc0ffee;
    a.req_id = req_id;
    a.user_data = req_id;
    a.offset = offset;
    a.length = length;
    a.res = res;
    a.tgid = tid;
    a.tid = tid;
    a.fd = fd;
    Add(a);
  }

  // A marker intent (begin/end of a labelled phase).
  void Intent(uint16_t kind, uint64_t ts, uint32_t tid, std::string_view label,
              uint32_t tgid = 0) {
    iot_intent i{};
    InitRecord(&i, IOT_REC_INTENT);
    i.kind = kind;
    i.source = IOT_INTENT_SRC_MARKER;
    i.ts = ts;
    i.tgid = tgid ? tgid : tid;
    i.tid = tid;
    i.label_id = Str(label);
    Add(i);
  }

  void LostAt(uint16_t source, uint16_t cpu, uint64_t ts, uint64_t count) {
    iot_lost l{};
    InitRecord(&l, IOT_REC_LOST);
    l.source = source;
    l.cpu = cpu;
    l.ts = ts;
    l.count = count;
    Add(l);
  }

  // ---- output ------------------------------------------------------------------------------
  size_t size() const {
    CloseCall();
    return records_.size();
  }
  const std::deque<std::vector<uint8_t>>& records() const {
    CloseCall();
    return records_;
  }

  // Hands every record, in order, to sink.Add(const iot_rec_hdr*).
  template <typename Sink>
  Status Feed(Sink& sink) const {
    CloseCall();
    for (const auto& r : records_) {
      IOTWIN_RETURN_IF_ERROR(sink.Add(reinterpret_cast<const iot_rec_hdr*>(r.data())));
    }
    return Status::Ok();
  }

  // Hands every record, in order, to fn(const iot_rec_hdr*), zero-extended to its type's fixed
  // size as TraceReader does (a record cut by ShortenLast reads as an older writer's).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    CloseCall();
    std::vector<uint8_t> buf;
    for (const auto& r : records_) {
      const auto* h = reinterpret_cast<const iot_rec_hdr*>(r.data());
      buf.assign(std::max<size_t>(r.size(), RecordFixedSize(h->type)), 0);
      std::memcpy(buf.data(), r.data(), r.size());
      fn(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
    }
  }

  // Writes a complete trace file: header meta(), the records, footer `summary` as given (by
  // default that of a capture whose workload exited).
  Status WriteFile(const std::string& path,
                   const nlohmann::json& summary = {{"stop_reason", "exit"}}) const {
    CloseCall();
    IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(path, meta_));
    for (const auto& r : records_) {
      IOTWIN_RETURN_IF_ERROR(writer->Append(reinterpret_cast<const iot_rec_hdr*>(r.data())));
    }
    return writer->Finish(summary);
  }

 private:
  // Appends the call Call() holds open, if any (it goes after the strings interned since).
  void CloseCall() const {
    if (!has_open_call_) return;
    has_open_call_ = false;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&open_call_);
    records_.emplace_back(p, p + open_call_.hdr.size);
  }
  // A new record of `size` bytes; a STRING record goes before a call held open, any other after.
  std::vector<uint8_t>& NewRecord(size_t size, bool string = false) {
    if (!string) CloseCall();
    records_.emplace_back(size, 0);
    auto& buf = records_.back();
    reinterpret_cast<iot_rec_hdr*>(buf.data())->size = static_cast<uint16_t>(size);
    return buf;
  }
  template <typename T>
  T& Append(uint16_t type) {
    auto& buf = NewRecord(sizeof(T));
    T& r = *reinterpret_cast<T*>(buf.data());
    r.hdr.type = type;
    return r;
  }
  template <typename T>
  T& Last(size_t back) {
    return *reinterpret_cast<T*>(records_[records_.size() - 1 - back].data());
  }

  nlohmann::json meta_;
  uint64_t now_ = 1'000'000'000;
  std::unordered_map<std::string, uint32_t> strings_;
  std::unordered_map<uint32_t, uint32_t> tgid_of_;
  // Mutable: reading the records closes a call held open.
  mutable std::deque<std::vector<uint8_t>> records_;
  mutable iot_syscall open_call_{};
  mutable bool has_open_call_ = false;
};

}  // namespace iotwin::test
