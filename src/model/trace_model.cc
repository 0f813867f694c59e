#include "model/trace_model.h"

#include <fcntl.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cstring>

#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "model/block_requests.h"
#include "model/model_builder_impl.h"

namespace iotwin::model {

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kSyscall: return "syscall";
    case OpKind::kPageFault: return "page_fault";
    case OpKind::kAsyncSubmit: return "async_submit";
    case OpKind::kFork: return "fork";
    case OpKind::kThreadStart: return "thread_start";
    case OpKind::kExec: return "exec";
    case OpKind::kExit: return "exit";
  }
  return "unknown";
}

std::string_view SkipName(Skip skip) {
  switch (skip) {
    case Skip::kReplayable: return "replayable";
    case Skip::kUnknownFd: return "unknown_fd";
    case Skip::kUnknownPath: return "unknown_path";
    case Skip::kPseudoFs: return "pseudo_fs";
    case Skip::kUnknownMapping: return "unknown_mapping";
    case Skip::kUnsupported: return "unsupported";
    case Skip::kOutOfScope: return "out_of_scope";
  }
  return "unknown";
}

std::vector<uint32_t> TraceModel::InitialFileSet() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < files_.size(); i++) {
    if (files_[i].origin == FileOrigin::kPreexisting && !files_[i].out_of_scope) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) {
    return paths_[files_[a].path] < paths_[files_[b].path];
  });
  return out;
}

std::vector<uint32_t> TraceModel::CreatedFiles() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < files_.size(); i++) {
    if (files_[i].origin == FileOrigin::kCreated) out.push_back(i);
  }
  return out;
}

namespace {

// IOSQE_FIXED_FILE, as io_uring keeps it in the request flags the capture records.
constexpr uint32_t kIosqeFixedFile = 1;

// What request `a` does. The replay's back end runs every engine but libaio as io_uring, so the
// model reads the opcodes of any other engine as io_uring's.
AsyncOpInfo AsyncRequestOp(const iot_async_io& a) {
  const uint8_t engine =
      a.engine == IOT_AIO_ENGINE_LIBAIO ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING;
  return AsyncOp(engine, a.opcode);
}
AsyncKind AsyncRequestKind(const iot_async_io& a) { return AsyncRequestOp(a).kind; }

}  // namespace

void ModelBuilder::Impl::HandleFork(const iot_proc& p, Op& op) {
  uint32_t parent_t = ThreadFor(p.tid, p.tgid, p.ts);
  uint32_t parent = m->threads_[parent_t].process;
  // A stale process with the child's tgid (missed exit) is forgotten.
  proc_by_tgid.erase(p.child_tgid);
  uint32_t child = ProcessFor(p.child_tgid);
  m->processes_[child].parent = parent;
  fd_table.Fork(parent, child);
  m->processes_[child].initial_cwd = Cwd(parent);
  m->processes_[child].max_fd = m->processes_[parent].max_fd;
  // Mappings are inherited: fd_table copied them; each copy is a mapping of the child's.
  fd_table.ForEachMapping(child, [&](FileMapping& piece) {
    Mapping mp = m->mappings_[piece.user];
    mp.process = child;
    mp.file_offset += piece.start - mp.start;
    mp.start = piece.start;
    mp.length = piece.end - piece.start;
    mp.thread = kNone;
    mp.op = kNone;
    mp.inherited_from = piece.user;
    piece.user = static_cast<uint32_t>(m->mappings_.size());
    m->mappings_.push_back(mp);
    m->processes_[child].inherited_mappings.push_back(piece.user);
  });
  op.kind = OpKind::kFork;
  op.process = parent;
  op.child = child;
  // The copy reads every descriptor slot of the parent: it follows earlier opens and closes
  // by the parent's other threads (numbers first named later follow it, FdKey).
  uint32_t idx = Push(parent_t, op, [&] {
    pstate[parent].slots.ForEach([&](int32_t fd) { deps.Read(FdResource(parent, fd)); });
  });
  if (options.compute_dependencies) pstate[parent].last_fork[parent_t] = idx;
  thread_by_tid.erase(p.child_tid);
  NewThread(p.child_tid, p.child_tgid, child, p.ts, parent_t, idx);
}

void ModelBuilder::Impl::HandleExec(const iot_proc& p, Op& op) {
  uint32_t t = ThreadFor(p.tid, p.tgid, p.ts);
  uint32_t proc = m->threads_[t].process;
  std::vector<uint64_t> closed;  // in ascending order
  fd_table.ForEachFd(proc, [&](int32_t fd, const Descriptor& d) {
    if (d.cloexec) closed.push_back(static_cast<uint64_t>(fd));
  });
  const std::vector<uint32_t> unmapped = LiveMappings(proc);
  fd_table.Exec(proc);  // closes the close-on-exec descriptors, drops the mappings
  op.kind = OpKind::kExec;
  op.process = proc;
  op.extra_begin = static_cast<uint32_t>(m->extra_.size());
  op.extra_count = static_cast<uint32_t>(closed.size());
  m->extra_.insert(m->extra_.end(), closed.begin(), closed.end());
  Push(t, op, [&] {
    for (auto fd : closed) deps.Write(FdKey(proc, static_cast<int32_t>(fd)));
    DeclareUnmapped(unmapped);
  });
}

void ModelBuilder::Impl::HandleExit(const iot_proc& p, Op& op) {
  auto it = thread_by_tid.find(p.tid);
  if (it == thread_by_tid.end()) return;
  uint32_t t = it->second;
  uint32_t proc = m->threads_[t].process;
  op.kind = OpKind::kExit;
  op.process = proc;
  ProcState& ps = pstate[proc];
  if (ps.live_threads > 0) ps.live_threads--;
  op.process_exit = (p.flags & IOT_PROCF_GROUP_DEAD) || ps.live_threads == 0;
  bool dead = op.process_exit;
  const std::vector<uint32_t> unmapped = dead ? LiveMappings(proc) : std::vector<uint32_t>{};
  Push(t, op, [&] {
    // The last thread's exit closes every descriptor of the process (numbers never named
    // have no earlier use to follow) and unmaps what it maps: the replay unmaps it there,
    // so the faults of the threads that exited before it must be replayed first.
    if (dead) ps.slots.ForEach([&](int32_t fd) { deps.Write(FdResource(proc, fd)); });
    DeclareUnmapped(unmapped);
  });
  thread_by_tid.erase(it);
  if (op.process_exit) {
    // Every descriptor closes; the cwd stays for threads of the process still seen.
    fd_table.CloseRange(proc, 0, INT32_MAX, false);
    UnmapRange(proc, 0, UINT64_MAX);
    auto pit = proc_by_tgid.find(p.tgid);
    if (pit != proc_by_tgid.end() && pit->second == proc) proc_by_tgid.erase(pit);
  }
}

void ModelBuilder::Impl::HandleProc(const iot_proc& p) {
  Op op;
  op.proc = p;
  op.ts = p.ts;
  op.end = p.ts;
  switch (p.kind) {
    case IOT_PROC_FORK:
      HandleFork(p, op);
      break;
    case IOT_PROC_THREAD: {
      uint32_t creator = ThreadFor(p.tid, p.tgid, p.ts);
      uint32_t proc = m->threads_[creator].process;
      op.kind = OpKind::kThreadStart;
      op.process = proc;
      thread_by_tid.erase(p.child_tid);
      uint32_t idx = static_cast<uint32_t>(m->threads_[creator].ops.size());
      uint32_t nt = NewThread(p.child_tid, p.tgid, proc, p.ts, creator, idx);
      op.child = nt;
      Push(creator, op, [&] {});
      break;
    }
    case IOT_PROC_EXEC:
      HandleExec(p, op);
      break;
    case IOT_PROC_EXIT:
      HandleExit(p, op);
      break;
    case IOT_PROC_ATTACH: case IOT_PROC_CWD: case IOT_PROC_START: {
      uint32_t proc = ProcessFor(p.tgid);
      if (p.kind == IOT_PROC_ATTACH) m->processes_[proc].attached = true;
      if (p.tid != 0) ThreadFor(p.tid, p.tgid, p.ts);
      if (p.kind != IOT_PROC_START && p.path_id != 0) {
        std::optional<std::string_view> s = String(p.path_id);
        if (s && !s->empty() && (*s)[0] == '/') {
          PathId cwd = Intern(NormalizePath(*s));
          SetCwd(proc, cwd);
          if (m->processes_[proc].initial_cwd == kNone) m->processes_[proc].initial_cwd = cwd;
          if (!Pseudo(cwd)) Exists(cwd, true, 0, nullptr);
        }
      }
      break;
    }
    default:
      break;
  }
}

void ModelBuilder::Impl::HandleFdSnapshot(const iot_fd_snapshot& s) {
  uint32_t proc = ProcessFor(s.tgid);
  m->processes_[proc].attached = true;
  InitialFd ifd;
  ifd.fd = s.fd;
  ifd.flags = s.flags;
  ifd.pos = s.pos;
  std::optional<std::string_view> name = String(s.path_id);
  // Sockets, pipes, anonymous inodes and deleted files stay unknown descriptors.
  if (!name || name->empty() || (*name)[0] != '/' ||
      (s.ftype != 0 && s.ftype != kFtypeReg && s.ftype != kFtypeDir) ||
      name->find(" (deleted)") != std::string_view::npos) {
    return;
  }
  PathId p = Intern(NormalizePath(*name));
  uint32_t f = kNone;
  if (!Pseudo(p)) {
    iot_syscall fake{};
    fake.ftype = s.ftype;
    fake.ino = s.ino;
    fake.dev = s.dev;
    f = Exists(p, s.ftype == kFtypeDir, s.fsize, &fake);
  }
  uint32_t o = NewOfd(p, f, s.flags, false);
  if (OpenFileDescription* d = fd_table.Description(ofds[o].desc)) d->pos = s.pos;
  SetFd(proc, s.fd, o, s.flags & O_CLOEXEC);
  ifd.path = p;
  ifd.file = f;
  ofds[o].initial_proc = proc;
  ofds[o].initial_fd = static_cast<uint32_t>(m->processes_[proc].initial_fds.size());
  m->processes_[proc].initial_fds.push_back(ifd);
}

void ModelBuilder::Impl::WidenInitialAccess(uint32_t ofd, bool write) {
  const Ofd& o = ofds[ofd];
  if (o.initial_fd == kNone) return;
  InitialFd& ifd = m->processes_[o.initial_proc].initial_fds[o.initial_fd];
  const uint32_t mode = ifd.flags & O_ACCMODE;
  if ((write && mode == O_RDONLY) || (!write && mode == O_WRONLY)) {
    ifd.flags = (ifd.flags & ~static_cast<uint32_t>(O_ACCMODE)) | O_RDWR;
  }
}

void ModelBuilder::Impl::HandleMapSnapshot(const iot_map_snapshot& s) {
  uint32_t proc = ProcessFor(s.tgid);
  m->processes_[proc].attached = true;
  std::optional<std::string_view> name = String(s.path_id);
  if (!name || name->empty() || (*name)[0] != '/') return;
  PathId p = Intern(NormalizePath(*name));
  if (Pseudo(p)) return;
  iot_syscall fake{};
  fake.ino = s.ino;
  fake.dev = s.dev;
  if (s.end <= s.start) return;  // no range: nothing mapped
  uint32_t f = Exists(p, false, Sum(s.pgoff, 1), &fake);
  DataUse(f);
  Mapping mp;
  mp.process = proc;
  mp.start = s.start;
  mp.length = s.end - s.start;
  mp.file_offset = s.pgoff;
  mp.prot = s.prot;
  mp.flags = s.flags;
  mp.path = p;
  mp.file = f;
  // The file mapped before the capture attached has no descriptor: a description of its own.
  uint32_t id = AddMapping(mp, fd_table.NewDescription(O_RDONLY, m->paths_[p]));
  m->processes_[proc].initial_mappings.push_back(id);
}

void ModelBuilder::Impl::HandleFault(const iot_page_fault& pf) {
  uint32_t t = ThreadFor(pf.tid, pf.tgid, pf.ts);
  uint32_t proc = m->threads_[t].process;
  Op op;
  cur_thread = t;
  cur_op = static_cast<uint32_t>(m->threads_[t].ops.size());
  op.kind = OpKind::kPageFault;
  op.pf = pf;
  op.process = proc;
  op.ts = pf.ts;
  op.end = pf.ts;
  m->stats_.page_faults++;
  op.mapping = FindMapping(proc, pf.addr);
  bool write = pf.flags & IOT_PFF_WRITE;
  uint32_t file = kNone;
  uint64_t page_start = pf.addr & ~(page_size - 1);
  if (op.mapping == kNone) {
    op.skip = Skip::kUnknownMapping;
  } else {
    const Mapping& mp = m->mappings_[op.mapping];
    op.map_offset = page_start - mp.start;
    op.path = mp.path;
    op.file = file = mp.file;
    op.pos = Sum(mp.file_offset, op.map_offset);
    if (file != kNone) {
      if (write) Modified(file);
      else GrowInitial(file, Sum(op.pos, 1));
      DataUse(file);
    }
  }
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  uint32_t mid = op.mapping;
  uint64_t pos = op.pos;
  Push(t, op, [&] {
    if (mid == kNone) return;
    deps.Read(ResourceKey(ResourceTag::kMapping, mid));
    if (file != kNone) {
      if (write) deps.WriteRange(FileKey(file), pos, Sum(pos, page_size));
      else deps.ReadRange(FileKey(file), pos, Sum(pos, page_size));
    }
  });
}

// The thread whose io_uring_setup made the ring that thread `t` submits to first: its own
// setup not yet claimed, else one of another thread of its process (MariaDB sets its ring up on
// the main thread and submits from others); the lowest thread index when several are unclaimed.
uint32_t ModelBuilder::Impl::UringSetupThread(uint32_t t) const {
  if (uring_setup_size.count(t) || uring_setup_op.count(t)) return t;
  const uint32_t proc = m->threads_[t].process;
  uint32_t found = kNone;
  for (const auto* setups : {&uring_setup_size, &uring_setup_op}) {
    for (const auto& [thread, unused] : *setups) {
      if (m->threads_[thread].process == proc && thread < found) found = thread;
    }
  }
  return found == kNone ? t : found;
}

void ModelBuilder::Impl::HandleAsyncCompletion(const iot_async_io& a, uint64_t ckey, uint64_t req) {
  auto it = async_pending.find({ckey, req});
  if (it == async_pending.end()) return;
  auto [t, idx] = it->second;
  Op& op = m->threads_[t].ops[idx];
  op.result = a.res;
  op.end = a.ts;
  op.interrupted = false;
  if (!AsyncLengthKnown(op.aio)) {
    // A vectored request of a record without IOT_AIOF_BYTES: its bytes are what it completed with.
    op.aio.length = a.res > 0 ? static_cast<uint64_t>(a.res) : 0;
    LayOutIovecs(op.aio.tid, op.aio.ts, op.aio.iov_count, op.aio.length, op);
  }
  if (op.async_ctx != kNone && async_inflight[op.async_ctx] > 0) async_inflight[op.async_ctx]--;
  async_pending.erase(it);
  auto g = async_growth.find({ckey, req});
  if (g != async_growth.end()) {
    // Judged at submission (a later write does not undo what this read found); a failed read
    // proves nothing about the size.
    FileInfo& fi = m->files_[g->second.file];
    if (a.res > 0) {
      fi.initial_size =
          std::max(fi.initial_size, Sum(g->second.offset, static_cast<uint64_t>(a.res)));
    }
    async_growth.erase(g);
  }
}

// The model's index of the context request `a` is submitted to, made at its first request.
uint32_t ModelBuilder::Impl::AsyncContextFor(const iot_async_io& a, uint64_t ckey, uint32_t t) {
  auto cit = async_ctx_index.find(ckey);
  if (cit != async_ctx_index.end()) return cit->second;
  const uint32_t proc = m->threads_[t].process;
  const uint32_t ci = static_cast<uint32_t>(m->async_contexts_.size());
  AsyncContext c;
  c.engine = a.engine;
  c.ctx = a.ctx;
  c.process = proc;
  uint32_t setup_op = kNone;  // the setup call, when this thread made it
  uint32_t setup_thread = t;  // io_uring: the thread that set the ring up
  if (a.engine == IOT_AIO_ENGINE_LIBAIO) {
    auto sz = aio_setup_size.find(a.ctx);
    if (sz != aio_setup_size.end()) c.setup_size = sz->second;
    auto so = aio_setup_op.find(a.ctx);
    if (so != aio_setup_op.end() && so->second.first == t) setup_op = so->second.second;
  } else {
    setup_thread = UringSetupThread(t);
    auto sz = uring_setup_size.find(setup_thread);
    if (sz != uring_setup_size.end()) {
      c.setup_size = sz->second;
      uring_setup_size.erase(sz);
    }
    auto so = uring_setup_op.find(setup_thread);
    if (so != uring_setup_op.end()) {
      setup_op = so->second;
      uring_setup_op.erase(so);
    }
  }
  m->async_contexts_.push_back(c);
  if (setup_op != kNone) m->threads_[setup_thread].ops[setup_op].async_ctx = ci;
  async_inflight.push_back(0);
  async_ctx_index[ckey] = ci;
  return ci;
}

// How request `a` of thread `t` names its file: a registered (fixed) file's slot becomes the
// descriptor registered there; a NOP names none.
void ModelBuilder::Impl::BindAsyncFd(const iot_async_io& a, uint32_t t, Op* op) {
  if (a.engine == IOT_AIO_ENGINE_URING && (a.flags & kIosqeFixedFile)) {
    // fd is an index into the ring's registered files (FDLIST of io_uring_register): the request
    // becomes one on the descriptor registered there, which the replay submits as a plain fd.
    const int32_t fd = a.fd >= 0 ? FixedFileFd(op->process, t, static_cast<uint32_t>(a.fd)) : -1;
    if (fd >= 0) {
      op->aio.fd = fd;
      op->aio.flags &= ~kIosqeFixedFile;
      BindDataFd(fd, op);
    } else {
      op->skip = Skip::kUnknownFd;
    }
  } else if (a.engine == IOT_AIO_ENGINE_URING && AsyncOp(a.engine, a.opcode).nop) {
    // A NOP names no file: the kernel ignores its fd (MariaDB's shutdown NOP carries 0, which
    // is /dev/null there), so it is bound to none and never skipped for it.
    op->aio.fd = -1;
  } else {
    BindDataFd(a.fd, op);
  }
}

void ModelBuilder::Impl::HandleAsync(const iot_async_io& a) {
  const uint64_t ckey = AsyncContextKey(a.engine, a.ctx);
  const uint64_t req = a.req_id != 0 ? a.req_id : a.user_data;
  if (a.phase == IOT_AIO_COMPLETE) return HandleAsyncCompletion(a, ckey, req);
  if (a.phase != IOT_AIO_SUBMIT) return;
  const uint32_t t = ThreadFor(a.tid, a.tgid, a.ts);
  const uint32_t proc = m->threads_[t].process;
  const uint32_t ci = AsyncContextFor(a, ckey, t);
  AsyncContext& ctx = m->async_contexts_[ci];
  ctx.requests++;
  ctx.max_inflight = std::max(ctx.max_inflight, ++async_inflight[ci]);
  m->stats_.async_requests++;

  cur_thread = t;
  cur_op = static_cast<uint32_t>(m->threads_[t].ops.size());
  Op op;
  op.kind = OpKind::kAsyncSubmit;
  op.aio = a;
  op.process = proc;
  op.ts = a.ts;
  op.end = UINT64_MAX;  // until the completion is seen
  op.interrupted = true;
  op.async_ctx = ci;
  op.pos = a.offset;
  BindAsyncFd(a, t, &op);
  const bool length_known = AsyncLengthKnown(a);
  if (!length_known) {
    // Set at completion; a record without IOT_AIOF_BYTES holds the iovec count in length.
    if (!(a.aflags & IOT_AIOF_IOV_FAULT)) op.aio.iov_count = static_cast<uint16_t>(
        std::min<uint64_t>(a.length, UINT16_MAX));
    op.aio.length = 0;
  } else if (AsyncRequestOp(a).vectored) {
    LayOutIovecs(a.tid, a.ts, a.iov_count, a.length, op);
  }
  // An unknown length may reach any byte from the offset on.
  const uint64_t span = length_known ? a.length : UINT64_MAX - a.offset;
  const AsyncKind kind = AsyncRequestKind(a);
  const bool is_read = kind == AsyncKind::kRead, is_write = kind == AsyncKind::kWrite;
  // Reads, writes and syncs replay, and io_uring's NOP; nothing else (libaio's NOOP neither).
  const bool replayed = kind != AsyncKind::kOther ||
                        (a.engine == IOT_AIO_ENGINE_URING && AsyncOp(a.engine, a.opcode).nop);
  if (!replayed && op.skip == Skip::kReplayable) op.skip = Skip::kUnsupported;
  uint32_t file = op.file;
  if (is_read || is_write) DataUse(file);
  if (file != kNone) {
    if (is_write) {
      Modified(file);
    } else if (is_read) {
      const FileInfo& fi = m->files_[file];
      if (fi.origin == FileOrigin::kPreexisting && !fi.modified && !fi.is_dir) {
        async_growth[{ckey, req}] = PendingGrowth{file, a.offset, op.aio.length};
      }
    }
  }
  // Batching: requests of the same thread and context submitted in the same call (same sort key)
  // or at the same instant form one batch.
  uint64_t bkey = (ckey * 31) ^ a.ts;
  auto lb = last_batch.find(t);
  auto& ops = m->threads_[t].ops;
  bool same = lb != last_batch.end() && !ops.empty() && ops.back().kind == OpKind::kAsyncSubmit &&
              ops.back().batch == lb->second.first && lb->second.second == bkey;
  if (!same) last_batch[t] = {next_batch++, bkey};
  op.batch = last_batch[t].first;
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  const int32_t used_fd = op.aio.fd;  // a fixed file's: the descriptor registered in its slot
  uint32_t idx = Push(t, op, [&] {
    deps.Read(ResourceKey(ResourceTag::kAsyncCtx, ci));
    if (used_fd >= 0) deps.Read(FdKey(proc, used_fd));
    if (file != kNone && span) {
      if (is_write) deps.WriteRange(FileKey(file), a.offset, Sum(a.offset, span));
      else if (is_read) deps.ReadRange(FileKey(file), a.offset, Sum(a.offset, span));
    }
  });
  async_pending[{ckey, req}] = {t, idx};
}

void ModelBuilder::Impl::HandleCache(const iot_cache_state& c) {
  std::optional<std::string_view> name = String(c.path_id);
  if (!name || name->empty()) return;
  CacheState cs;
  // The capture names the file by the spelling the workload opened it with: a relative one
  // ("./perf64.dat", a name under a directory descriptor) is no path of the model's; the state is
  // linked to its file by identity (LinkCacheStates), which also names it.
  if ((*name)[0] == '/') cs.path = Intern(NormalizePath(*name));
  cs.dev = c.dev;
  cs.ino = c.ino;
  cs.fsize = c.fsize;
  cs.resident_pages = c.resident_pages;
  cs.total_pages = c.total_pages;
  m->cache_states_.push_back(cs);
}

void ModelBuilder::Impl::LinkCacheStates() {
  for (CacheState& cs : m->cache_states_) {
    auto by_id = cs.ino != 0 ? file_by_identity.find({cs.dev, cs.ino}) : file_by_identity.end();
    if (by_id != file_by_identity.end()) {
      cs.file = by_id->second;
    } else if (cs.path != kNone) {
      auto by_path = file_by_path.find(cs.path);
      if (by_path != file_by_path.end()) cs.file = by_path->second;
    }
    if (cs.path == kNone && cs.file != kNone) cs.path = m->files_[cs.file].path;
  }
}

void ModelBuilder::Impl::ResolveInitialResidency() {
  if (!page_cache_recorded) return;
  for (const auto& [source_cpu, count] : lost) {
    if (source_cpu.first == IOT_SRC_MEMORY && count > 0) return;
  }
  for (CacheState& cs : m->cache_states_) {
    ResidencyEvidence::AtStart at = residency.Decide(cs.dev, cs.ino);
    cs.resident_extents = std::move(at.resident);
    cs.absent_extents = std::move(at.absent);
    cs.extents_known = true;
  }
}

void ModelBuilder::Impl::BuildBlockRequests() {
  std::vector<const iot_block*> sorted;
  for (const auto& b : blocks) sorted.push_back(&b);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const iot_block* a, const iot_block* b) { return a->ts < b->ts; });
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, size_t> open;  // (dev, rq or sector) -> req
  std::unordered_map<uint32_t, uint32_t> inflight;
  BlockRequestRule rule;  // a requeued request issued again stays one request
  for (const iot_block* b : sorted) {
    uint64_t id = b->rq_id != 0 ? b->rq_id : b->sector;
    const BlockStep step = rule.Step(*b);
    if (step == BlockStep::kReissue) {
      if (auto it = open.find({b->dev, id, 0}); it != open.end()) {
        m->block_requests_[it->second].last_issue = b->ts;
      }
    } else if (step == BlockStep::kPartial) {
      continue;
    } else if (b->phase == IOT_BLK_ISSUE) {
      BlockRequest r;
      r.ts = b->ts;
      r.last_issue = b->ts;
      r.sector = b->sector;
      r.bytes = b->bytes != 0 ? b->bytes
                              : static_cast<uint32_t>(std::min<uint64_t>(
                                    uint64_t{b->nr_sector} * kSectorBytes, UINT32_MAX));
      r.flags = b->flags;
      r.dev = b->dev;
      r.inflight = ++inflight[b->dev];
      open[{b->dev, id, 0}] = m->block_requests_.size();
      m->block_requests_.push_back(r);
    } else if (b->phase == IOT_BLK_COMPLETE) {
      auto it = open.find({b->dev, id, 0});
      if (it == open.end()) continue;
      BlockRequest& r = m->block_requests_[it->second];
      r.end = b->ts;
      r.error = b->error;
      if (inflight[b->dev] > 0) inflight[b->dev]--;
      open.erase(it);
    }
  }
}

// Events are taken in start order, and the kernel takes and frees descriptor numbers at the start
// of a call too, so start order is the order of the descriptor table's changes, except where the
// capture's timestamps of two calls that began within a microsecond disagree with the kernel: an
// open that got number N can be stamped before the close (in another thread of the process) that
// freed N. Taken in that order, the open would replace the old instance of N in the table, the
// close would then remove the new one, and uses of the old instance stamped in between would be
// bound to the new file. Such an open is moved to just after that close: a successful close of N
// by another thread that starts while an open returning N is in progress can only be freeing the
// previous instance (the opener's thread cannot have handed N out before the open returned).
// Nothing else of the opening thread lies in between (it was inside the open). Returns whether
// anything moved.
bool ModelBuilder::Impl::PostponeDescriptorHandovers() {
  std::unordered_map<uint64_t, size_t> creator;  // (tgid, fd) -> event of the latest creating call
  auto key = [](uint32_t tgid, int64_t fd) {
    return (static_cast<uint64_t>(tgid) << 32) | static_cast<uint32_t>(fd);
  };
  bool moved = false;
  // The closing call at event i freed the number the creating call at event c got: postpone that
  // call to just after the close when it began within the creating call.
  auto postpone = [&](size_t c, size_t i, const iot_syscall& close) {
    Event& open_ev = events[c];
    const iot_syscall& open = syscalls[open_ev.index];
    // Only ever later: a race may have postponed the open past the close already.
    if (open.tid != close.tid && close.ts >= open.ts && close.ts < Sum(open.ts, open.dur) &&
        EventBefore(open_ev, events[i])) {
      open_ev.ts = events[i].ts;
      open_ev.seq = events[i].seq;
      open_ev.sub = events[i].sub;
      open_ev.after = 1;
      moved = true;
    }
  };
  for (size_t i = 0; i < events.size(); i++) {
    if (events[i].type != kEvSyscall) continue;
    const iot_syscall& sc = syscalls[events[i].index];
    if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) continue;
    const OpInfo& info = GetOpInfo(sc.op);
    if (info.fd_effect == FdEffect::kCloses && sc.fd >= 0) {
      auto it = creator.find(key(sc.tgid, sc.fd));
      if (it == creator.end()) continue;
      postpone(it->second, i, sc);
      creator.erase(it);
    } else if (info.fd_effect == FdEffect::kClosesRange &&
               !(sc.flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE))) {
      // Frees every number in [first, last] of the shared table (with UNSHARE it closes in a
      // private copy, and CLOEXEC frees nothing).
      const uint32_t first = CloseRangeFirst(sc), last = CloseRangeLast(sc);
      for (auto it = creator.begin(); it != creator.end();) {
        const auto fd = static_cast<uint32_t>(it->first);
        if (static_cast<uint32_t>(it->first >> 32) == sc.tgid && fd >= first && fd <= last) {
          postpone(it->second, i, sc);
          it = creator.erase(it);
        } else {
          ++it;
        }
      }
    } else if (OpReturnsFd(sc) && info.fd2 != FdRole::kCreated) {  // dup2/dup3 name their new fd
      creator[key(sc.tgid, sc.ret)] = i;
    }
  }
  return moved;
}

Status ModelBuilder::Impl::Finish() {
  if (m->meta_.contains("host") && m->meta_["host"].is_object()) {
    // Meta is trace content too: a page size of another type or an absurd value is ignored.
    const nlohmann::json& host = m->meta_["host"];
    auto ps = host.find("page_size");
    if (ps != host.end() && ps->is_number_integer()) {
      const int64_t n = ps->get<int64_t>();
      if (n >= 512 && n <= (1 << 30) && (n & (n - 1)) == 0) page_size = static_cast<uint64_t>(n);
    }
  }
  // Async submits issued inside a submitting syscall of the same thread sort just before it, so
  // that replay queues the batch and the syscall flushes it.
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, size_t>>> submit_calls;  // tid
  for (auto& e : events) {
    if (e.type != kEvSyscall) continue;
    const iot_syscall& sc = syscalls[e.index];
    if (OpSubmitsAsync(sc.op)) submit_calls[sc.tid].push_back({sc.ts, &e - events.data()});
  }
  for (auto& [tid, v] : submit_calls) std::sort(v.begin(), v.end());
  for (auto& e : events) {
    if (e.type != kEvAsync) continue;
    const iot_async_io& a = asyncs[e.index];
    if (a.phase != IOT_AIO_SUBMIT) continue;
    auto it = submit_calls.find(a.tid);
    if (it == submit_calls.end()) continue;
    auto& v = it->second;
    auto jt = std::upper_bound(v.begin(), v.end(), std::make_pair(a.ts, SIZE_MAX));
    if (jt == v.begin()) continue;
    --jt;
    const Event& ce = events[jt->second];
    const iot_syscall& sc = syscalls[ce.index];
    if (a.ts <= Sum(sc.ts, sc.dur) || (sc.sflags & IOT_SCF_INTERRUPTED)) {
      e.ts = ce.ts;
      e.seq = ce.seq;
      e.sub = 0;
    }
  }
  std::sort(events.begin(), events.end(), EventBefore);
  if (ReorderRaces()) std::sort(events.begin(), events.end(), EventBefore);
  if (PostponeDescriptorHandovers()) std::sort(events.begin(), events.end(), EventBefore);
  if (!events.empty()) {
    m->stats_.first_ts = events.front().ts;
    m->stats_.last_ts = events.back().ts;
  }
  for (const auto& e : events) {
    cur_thread = cur_op = kNone;  // the handlers of ops set them
    fd_table.NextRecord();
    switch (e.type) {
      case kEvSyscall: HandleSyscall(syscalls[e.index]); break;
      case kEvProc: HandleProc(procs[e.index]); break;
      case kEvFdSnap: HandleFdSnapshot(fd_snaps[e.index]); break;
      case kEvMapSnap: HandleMapSnapshot(map_snaps[e.index]); break;
      case kEvFault: HandleFault(faults[e.index]); break;
      case kEvAsync: HandleAsync(asyncs[e.index]); break;
      case kEvCache: HandleCache(caches[e.index]); break;
    }
  }
  // Mark threads' last event time for thread start of threads with no creator record.
  for (auto& th : m->threads_) {
    if (!th.ops.empty() && th.creator == kNone) th.start_ts = std::min(th.start_ts, th.ops[0].ts);
  }
  BuildBlockRequests();
  LinkCacheStates();
  ResolveInitialResidency();
  for (auto& [k, v] : lost) m->stats_.lost_events += v;
  m->stats_.unknown_fds = unknown_fds.size();
  m->stats_.orphan_iovecs = iovecs.size();
  m->stats_.unmatched_async = async_pending.size();
  // Reads whose completion was never seen: assume they returned everything they asked for.
  for (const auto& [key, g] : async_growth) {
    FileInfo& fi = m->files_[g.file];
    fi.initial_size = std::max(fi.initial_size, Sum(g.offset, g.length));
  }
  async_growth.clear();
  AddKindWarnings();
  m->stats_.deps = m->deps_.size();
  return Status::Ok();
}

namespace {
// Path bytes for a one-line message: printable ASCII as is, anything else as \xNN.
std::string Printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}
}  // namespace

void ModelBuilder::Impl::AddKindWarnings() {
  auto where = [&](uint32_t thread, uint32_t index) -> std::string {
    if (thread == kNone || index >= m->threads_[thread].ops.size()) {
      return "an attach snapshot or cwd record";
    }
    const Op& op = m->threads_[thread].ops[index];
    std::string_view what = op.kind == OpKind::kSyscall     ? OpName(op.sc.op)
                            : op.kind == OpKind::kAsyncSubmit ? std::string_view("async request")
                            : op.kind == OpKind::kPageFault   ? std::string_view("page fault")
                                                              : OpKindName(op.kind);
    return fmt::format("{} of tid {}, op #{}", what, m->threads_[thread].tid, index);
  };
  for (uint32_t f = 0; f < m->files_.size(); f++) {
    const KindEvidence& k = file_kind[f];
    if (!k.conflict) continue;
    std::string dir_use = where(k.dir_thread, k.dir_op);
    if (k.dir_child != kNone) {
      dir_use = fmt::format("'{}' lies below it: {}", Printable(m->paths_[k.dir_child]), dir_use);
    }
    ModelWarning w;
    w.path = m->files_[f].path;
    w.file = f;
    w.message = fmt::format(
        "'{}' is used both as a directory ({}) and as a file with data I/O ({}); the model "
        "takes it for a directory, so that data I/O does not replay as recorded",
        Printable(m->paths_[w.path]), dir_use, where(k.data_thread, k.data_op));
    m->warnings_.push_back(std::move(w));
  }
}

ModelBuilder::ModelBuilder(ModelOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
ModelBuilder::~ModelBuilder() = default;

void ModelBuilder::SetMeta(const nlohmann::json& meta) {
  impl_->m->meta_ = meta;
  // The header is the trace's word: anything but `true` means the page cache's insertions were
  // not recorded, so every read would look like a hit; no evidence is gathered then.
  impl_->page_cache_recorded =
      json_fields::GetBool(meta, "layers/memory/parts/cache/enabled", false);
}

void ModelBuilder::ReadStringsFrom(const TraceReader* reader) { impl_->string_reader = reader; }

Status ModelBuilder::Impl::AddString(const iot_rec_hdr* rec) {
  const auto& str = As<iot_string>(rec);
  if (sizeof(iot_string) + str.len > rec->size) {
    return Status::Corrupt("string record {} declares {} bytes but holds {}", str.id, str.len,
                           rec->size - sizeof(iot_string));
  }
  // PATH_MAX counts the terminating NUL: no longer string is a name the kernel took.
  if ((str.flags & IOT_STRF_TRUNCATED) || str.len >= kMaxPathBytes) {
    unusable_strings.insert(str.id);
    strings.erase(str.id);
    return Status::Ok();
  }
  unusable_strings.erase(str.id);
  if (string_reader == nullptr) {
    strings[str.id].assign(reinterpret_cast<const char*>(&str + 1), str.len);
  }
  return Status::Ok();
}

void ModelBuilder::Impl::AddIovec(const iot_rec_hdr* rec) {
  const auto& iv = As<iot_iovec>(rec);
  size_t have = (rec->size - sizeof(iot_iovec)) / sizeof(uint64_t);
  size_t n = std::min<size_t>(iv.captured, have);
  std::vector<uint64_t> lens(n);
  if (n) std::memcpy(lens.data(), &iv + 1, n * sizeof(uint64_t));
  iovecs[{iv.tid, iv.ts}] = std::move(lens);
  iovec_counts[{iv.tid, iv.ts}] = iv.count;
}

void ModelBuilder::Impl::AddFdList(const iot_rec_hdr* rec) {
  // The reader checked the entries fit; a record built in memory is checked here too.
  const auto& l = As<iot_fdlist>(rec);
  const size_t have = (rec->size - sizeof(iot_fdlist)) / sizeof(iot_fdlist_entry);
  const size_t n = std::min<size_t>({l.captured, have, IOT_FDLIST_MAX});
  FdList& list = fdlists[{l.tid, l.ts}];
  list.head = l;
  list.entries.resize(n);
  if (n) std::memcpy(list.entries.data(), &l + 1, n * sizeof(iot_fdlist_entry));
}

void ModelBuilder::Impl::NoteFaultResidency(const iot_page_fault& pf) {
  if (!page_cache_recorded) return;
  using K = ResidencyEvidence::Kind;
  if (pf.flags & IOT_PFF_MAJOR) {
    residency.Add(pf.dev, pf.ino, pf.ts, K::kMissed, pf.pgoff, 1);
  } else {
    residency.Add(pf.dev, pf.ino, pf.ts, K::kUsed, pf.pgoff, 1);
    // Fault-around maps pages that are in the page cache already.
    residency.Add(pf.dev, pf.ino, pf.ts, K::kUsed, pf.around_start, pf.nr_pages);
  }
}

void ModelBuilder::Impl::NotePageCacheResidency(const iot_page_cache& pc) {
  if (!page_cache_recorded) return;
  using K = ResidencyEvidence::Kind;
  if (pc.kind == IOT_PC_ADD) residency.Add(pc.dev, pc.ino, pc.ts, K::kInserted, pc.index, pc.nr_pages);
  if (pc.kind == IOT_PC_DELETE) residency.Add(pc.dev, pc.ino, pc.ts, K::kRemoved, pc.index, pc.nr_pages);
}

Status ModelBuilder::Add(const iot_rec_hdr* rec) {
  Impl& s = *impl_;
  if (s.options.host) {
    const std::optional<uint32_t> host = HostOfRecord(rec);
    if (host && *host != *s.options.host) {
      if (rec->type == IOT_REC_SYSCALL || rec->type == IOT_REC_PROC) {
        const uint64_t ts = RecordTimestamp(rec);
        if (ts != 0) other_hosts_first_ts_ = std::min(other_hosts_first_ts_, ts);
      }
      return Status::Ok();
    }
  }
  size_t need = RecordFixedSize(rec->type);
  s.m->stats_.records++;
  if (rec->type <= IOT_REC_MAX) s.m->stats_.records_by_type[rec->type]++;
  if (need == 0) return Status::Ok();  // unknown type: counted, ignored
  if (rec->size < need) {
    // Zero-extend short records (written before fields were appended), as TraceReader does.
    std::vector<uint8_t> buf(need, 0);
    std::memcpy(buf.data(), rec, rec->size);
    reinterpret_cast<iot_rec_hdr*>(buf.data())->size = static_cast<uint16_t>(need);
    if (rec->type == IOT_REC_STRING || rec->type == IOT_REC_IOVEC || rec->type == IOT_REC_FDLIST) {
      return Status::Corrupt("{} record of {} bytes is shorter than its {}-byte fixed part",
                             RecordTypeName(rec->type), rec->size, need);
    }
    return Add(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
  }
  if (!s.options.scope.AdmitsProgramImages()) s.program_images.Add(rec);
  auto push = [&](uint8_t type, uint32_t index, uint64_t ts) {
    s.events.push_back(Impl::Event{ts, s.seq, 1, s.seq, type, index});
    s.seq++;
  };
  switch (rec->type) {
    case IOT_REC_STRING:
      return s.AddString(rec);
    case IOT_REC_SYSCALL: {
      s.syscalls.push_back(As<iot_syscall>(rec));
      const iot_syscall& sc = s.syscalls.back();
      // Descriptors a recvmsg received exist from its exit on (it often waited for the sender
      // to open the file): the model takes the call there.
      const bool at_exit =
          GetOpInfo(sc.op).fd_effect == FdEffect::kReceives && sc.ts <= UINT64_MAX - sc.dur;
      push(Impl::kEvSyscall, static_cast<uint32_t>(s.syscalls.size() - 1),
           at_exit ? sc.ts + sc.dur : sc.ts);
      break;
    }
    case IOT_REC_IOVEC:
      s.AddIovec(rec);
      break;
    case IOT_REC_FDLIST:
      s.AddFdList(rec);
      break;
    case IOT_REC_PROC:
      s.procs.push_back(As<iot_proc>(rec));
      push(Impl::kEvProc, static_cast<uint32_t>(s.procs.size() - 1), s.procs.back().ts);
      break;
    case IOT_REC_FD_SNAPSHOT:
      s.fd_snaps.push_back(As<iot_fd_snapshot>(rec));
      push(Impl::kEvFdSnap, static_cast<uint32_t>(s.fd_snaps.size() - 1), s.fd_snaps.back().ts);
      break;
    case IOT_REC_MAP_SNAPSHOT:
      s.map_snaps.push_back(As<iot_map_snapshot>(rec));
      push(Impl::kEvMapSnap, static_cast<uint32_t>(s.map_snaps.size() - 1), s.map_snaps.back().ts);
      break;
    case IOT_REC_PAGE_FAULT: {
      const auto& pf = As<iot_page_fault>(rec);
      s.faults.push_back(pf);
      push(Impl::kEvFault, static_cast<uint32_t>(s.faults.size() - 1), pf.ts);
      s.NoteFaultResidency(pf);
      break;
    }
    case IOT_REC_PAGE_CACHE:
      s.NotePageCacheResidency(As<iot_page_cache>(rec));
      break;
    case IOT_REC_ASYNC_IO:
      s.asyncs.push_back(As<iot_async_io>(rec));
      push(Impl::kEvAsync, static_cast<uint32_t>(s.asyncs.size() - 1), s.asyncs.back().ts);
      break;
    case IOT_REC_CACHE_STATE:
      s.caches.push_back(As<iot_cache_state>(rec));
      push(Impl::kEvCache, static_cast<uint32_t>(s.caches.size() - 1), s.caches.back().ts);
      break;
    case IOT_REC_BLOCK:
      s.blocks.push_back(As<iot_block>(rec));
      break;
    case IOT_REC_LOST: {
      const auto& l = As<iot_lost>(rec);
      auto& v = s.lost[{l.source, l.cpu}];
      v = std::max(v, l.count);
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

Result<std::unique_ptr<TraceModel>> ModelBuilder::Finish() {
  IOTWIN_RETURN_IF_ERROR(impl_->Finish());
  ModelStats& stats = impl_->m->stats_;
  if (stats.first_ts != 0 && other_hosts_first_ts_ < stats.first_ts)
    stats.first_ts = other_hosts_first_ts_;
  if (!impl_->options.scope.IsAll()) {
    ApplyScope(*impl_->m, impl_->options.scope, impl_->program_images.Images());
  }
  return std::move(impl_->m);
}

void ModelBuilder::ApplyScope(TraceModel& m, const Scope& scope,
                              const std::set<ProgramImages::Key>& program_images) {
  const bool types_recorded = m.meta_.contains("capture");
  std::string root = json_fields::GetString(m.meta_, "replay/root");
  if (!root.empty()) root = NormalizePath(root);
  for (FileInfo& f : m.files_) {
    if (f.is_dir) continue;
    std::string path = f.path != kNone ? m.paths_[f.path] : std::string();
    if (!root.empty() && root != "/" && !path.empty() && PathIsWithin(path, root))
      path = ReplacePrefix(path, root, "/");
    f.out_of_scope = !scope.Admits(path, ClassifyFile(f.ftype, path, types_recorded)) ||
                     program_images.contains({f.dev, f.ino});
  }
  auto out = [&](uint32_t file) { return file != kNone && m.files_[file].out_of_scope; };
  for (Thread& th : m.threads_) {
    for (Op& op : th.ops) {
      if (op.skip != Skip::kReplayable) continue;
      const bool mapped = op.mapping < m.mappings_.size() && out(m.mappings_[op.mapping].file);
      if (out(op.file) || mapped) op.skip = Skip::kOutOfScope;
    }
  }
}

Result<std::unique_ptr<TraceModel>> LoadTraceModel(const std::string& trace_path,
                                                   ModelOptions options, TraceDamage* damage) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace_path));
  ModelBuilder builder(options);
  builder.SetMeta(reader->meta());
  builder.ReadStringsFrom(reader.get());
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (rec == nullptr) break;
    IOTWIN_RETURN_IF_ERROR(builder.Add(rec).WithContext(trace_path));
  }
  if (damage) *damage = reader->damage();
  return builder.Finish();
}

}  // namespace iotwin::model
