// ModelBuilder: system calls. HandleSyscall does what every call needs (its thread, iovec
// layout, paths, descriptors, whether it can be replayed); one handler per family of calls
// applies the call's effects to the model and declares the resources it touches.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "format/op_info.h"
#include "format/records.h"
#include "model/model_builder_impl.h"

namespace iotwin::model {
namespace {

// fcntl, whose fields mean what its command makes of them.
bool IsFcntl(const OpInfo& i) { return i.aux == FieldUse::kFcntlArg; }

}  // namespace

void ModelBuilder::Impl::HandleSyscall(const iot_syscall& sc, PathId given) {
  if (GetOpInfo(sc.op).fd_effect == FdEffect::kReceives && given == kNone) {
    HandleReceivedDescriptors(sc);
    return;
  }
  SyscallStep s(sc);
  s.thread = ThreadFor(sc.tid, sc.tgid, sc.ts);
  s.proc = m->threads_[s.thread].process;
  cur_thread = s.thread;
  cur_op = static_cast<uint32_t>(m->threads_[s.thread].ops.size());
  Op& op = s.op;
  op.kind = OpKind::kSyscall;
  op.sc = sc;
  op.process = s.proc;
  op.ts = sc.ts;
  op.interrupted = (sc.sflags & IOT_SCF_INTERRUPTED) != 0;
  op.end = op.interrupted ? UINT64_MAX : Sum(sc.ts, sc.dur);
  op.result = sc.ret;
  s.ok = !op.interrupted && sc.ret >= 0;
  const uint16_t code = sc.op;
  if (code <= IOT_OP_MAX) m->stats_.ops_by_kind[code]++;
  m->stats_.syscalls++;

  if (GetOpInfo(code).vectored) LayOutIovecs(s);
  if (given != kNone) op.path = given;
  else ResolvePaths(s);
  ClassifyDescriptors(s);

  s.index = static_cast<uint32_t>(m->threads_[s.thread].ops.size());
  // The handler of the call's family applies it; other calls only have the effects above.
  (void)(ApplyDescriptorOp(s) || ApplyDataOp(s) || ApplyCopyOp(s) || ApplyMemoryOp(s) ||
         ApplyNamespaceOp(s) || ApplyAsyncSetupOp(s));

  if (!s.extra.empty()) {
    op.extra_begin = static_cast<uint32_t>(m->extra_.size());
    op.extra_count = static_cast<uint32_t>(s.extra.size());
    m->extra_.insert(m->extra_.end(), s.extra.begin(), s.extra.end());
  }
  NoteDataPages(s);
  if (code <= IOT_OP_MAX && op.skip == Skip::kReplayable) m->stats_.replayable_by_kind[code]++;
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  const uint32_t pushed = Push(s.thread, op, [&] {
    for (auto& d : s.declare) d();
  });
  NoteAsyncSetup(s, pushed);
}

void ModelBuilder::Impl::NoteDataPages(const SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  if (!page_cache_recorded) return;
  if (!s.ok || sc.ret <= 0 || sc.ftype != kFtypeRegular || s.op.ofd == kNone) return;
  if (!OpIsRead(sc.op) && !OpIsWrite(sc.op)) return;
  const OpenFileDescription* d = fd_table.Description(ofds[s.op.ofd].desc);
  if (!d || d->direct) return;  // O_DIRECT bypasses the page cache
  const uint64_t first = sc.offset / page_size;
  const uint64_t last = Sum(sc.offset, static_cast<uint64_t>(sc.ret) - 1) / page_size;
  residency.Add(sc.dev, sc.ino, s.op.end, ResidencyEvidence::Kind::kUsed, first, last - first + 1);
}

void ModelBuilder::Impl::LayOutIovecs(SyscallStep& s) {
  LayOutIovecs(s.sc.tid, s.sc.ts, s.sc.aux, s.sc.length, s.op);
}

// The lengths of a vectored call's or request's buffers: those of the IOVEC record of (tid, ts),
// and for those it could not capture, equal shares of the rest of `total`.
void ModelBuilder::Impl::LayOutIovecs(uint32_t tid, uint64_t ts, uint64_t count, uint64_t total,
                                      Op& op) {
  auto key = std::make_pair(tid, ts);
  auto it = iovecs.find(key);
  std::vector<uint64_t> lens;
  if (it != iovecs.end()) {
    lens = it->second;
    count = std::max<uint64_t>(iovec_counts[key], lens.size());
    iovecs.erase(it);
  }
  if (count == 0) count = 1;
  count = std::min(count, kIovMax);
  if (lens.size() > count) lens.resize(count);
  uint64_t known = 0;
  for (auto l : lens) known = Sum(known, l);
  uint64_t missing = count - lens.size();
  uint64_t rest = total > known ? total - known : 0;
  for (uint64_t i = 0; i < missing; i++) {
    uint64_t share = rest / missing + (i < rest % missing ? 1 : 0);
    lens.push_back(share);
  }
  op.extra_begin = static_cast<uint32_t>(m->extra_.size());
  op.extra_count = static_cast<uint32_t>(lens.size());
  m->extra_.insert(m->extra_.end(), lens.begin(), lens.end());
}

void ModelBuilder::Impl::ResolvePaths(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  Op& op = s.op;
  bool empty = false;
  int proc_fd = -1;
  if (OpTakesPath(code) && ProcFdLink(s, &proc_fd)) {
    // linkat(AT_FDCWD, "/proc/self/fd/N", ..., AT_SYMLINK_FOLLOW): a name for what descriptor N
    // holds (an O_TMPFILE file, mostly), read as linkat(N, "", ..., AT_EMPTY_PATH) is, with N
    // in the copy's dirfd slot so that the replay links through its own descriptor for N.
    op.sc.fd = proc_fd;
    op.empty_path = true;
    BindDataFd(proc_fd, &op);
  } else if (OpTakesPath(code)) {
    op.path = ResolveArg(s.proc, sc.path_id, sc.sflags, PathDirFd(sc), &op.skip, &empty);
    if (empty) {
      // AT_EMPTY_PATH: the op acts on the dirfd itself.
      op.empty_path = true;
      op.skip = Skip::kReplayable;
      BindDataFd(PathDirFd(sc), &op);
    }
  } else if (GetOpInfo(code).path == PathRole::kVerbatim) {
    std::optional<std::string_view> target = String(sc.path_id);
    if (!target) op.skip = Skip::kUnknownPath;
    else op.path = Intern(std::string(*target));  // the target, verbatim
  }
  if (OpTakesPath2(code)) {
    Skip s2 = Skip::kReplayable;
    bool e2 = false;
    op.path2 = ResolveArg(s.proc, sc.path2_id, sc.sflags, Path2DirFd(sc), &s2, &e2);
    if (s2 != Skip::kReplayable && op.skip == Skip::kReplayable) op.skip = s2;
  }
  if (op.skip == Skip::kReplayable && OpTakesPath(code) && op.path != kNone && Pseudo(op.path)) {
    op.skip = Skip::kPseudoFs;
  }
  if (op.skip == Skip::kReplayable && op.path2 != kNone && Pseudo(op.path2)) {
    op.skip = Skip::kPseudoFs;
  }
}

// Binds the call's descriptors to the open files behind them, and says why a call that
// resolved cannot be replayed all the same.
void ModelBuilder::Impl::ClassifyDescriptors(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const OpInfo& info = GetOpInfo(code);
  const uint32_t proc = s.proc;
  Op& op = s.op;
  if (OpHasDataFd(sc)) {
    int dfd = DataFd(sc);
    if (dfd >= 0) BindDataFd(dfd, &op);
    else MarkUnknownFd(proc, dfd, &op);
  }
  if (info.mapping == OpMapping::kMaps && (sc.flags & MAP_ANONYMOUS)) op.skip = Skip::kUnsupported;
  int sfd = SecondFd(sc);
  if (sfd != -1) {
    const bool known = OfdOf(proc, sfd) != kNone;
    op.fd2_state = known ? FdState::kKnown : FdState::kUnknown;
    if (!known) unknown_fds.insert({proc, sfd});
    // sendfile to a socket is still a file read: replay sends to a sink instead.
    if (!known && !info.writes_any_fd && op.skip == Skip::kReplayable) {
      op.skip = Skip::kUnknownFd;
    }
  }
  if (info.replay == OpReplay::kNotReplayed) {
    if (op.skip == Skip::kReplayable) op.skip = Skip::kUnsupported;
  }
  if (IsFcntl(info) && op.skip == Skip::kReplayable) {
    const int cmd = FcntlCmd(sc);
    switch (cmd) {
      case F_DUPFD: case F_DUPFD_CLOEXEC: case F_GETFD: case F_SETFD: case F_GETFL:
      case F_SETFL: case F_GETLEASE:
        break;
      default:
        // Record locks are replayed from their recorded struct flock, unless the capture could
        // not read it. Leases are not: breaking one signals the holder (SIGIO would kill the
        // replay). Owners, signals, seals and pipe sizes are not storage.
        if (!FcntlIsLock(cmd) || LockType(sc) == -1) op.skip = Skip::kUnsupported;
    }
  }
  if (op.ofd != kNone && ofds[op.ofd].ring &&
      (info.mapping == OpMapping::kMaps || info.mapping == OpMapping::kUnmaps) &&
      op.skip == Skip::kReplayable) {
    op.skip = Skip::kUnsupported;  // ring memory, recreated by the async back end
  }
  // The bytes written are not captured: "1" (page cache), "2" (slab) and "3" (both) look alike,
  // and a drop of the page cache is what every storage benchmark writes there for.
  if (op.skip == Skip::kPseudoFs && OpIsWrite(code) && sc.ret > 0 && op.path != kNone &&
      m->paths_[op.path] == kDropCachesPath) {
    op.drops_page_cache = true;
  }
}

// open, openat, openat2, creat: the file the name leads to (made, truncated, an unnamed
// O_TMPFILE), and the new descriptor's open file description.
void ModelBuilder::Impl::ApplyOpen(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  Op& op = s.op;
  uint32_t flags = EffectiveOpenFlags(sc);
  bool creat = flags & O_CREAT, excl = flags & O_EXCL, trunc = flags & O_TRUNC;
  PathId p = op.path;
  uint32_t f = kNone;
  if (p != kNone && !Pseudo(p) && (flags & O_TMPFILE) == O_TMPFILE) {
    // An unnamed file in directory p: the descriptor's I/O is the new file's.
    if (ok) f = TmpFileIn(p, sc);
    else if (sc.ret != -ENOENT && sc.ret != -ENOTDIR) Exists(p, true, 0, nullptr);
  } else if (p != kNone && !Pseudo(p)) {
    if (ok) {
      auto it = file_by_path.find(p);
      bool dir = sc.ftype == kFtypeDir || (flags & O_DIRECTORY);
      if (it != file_by_path.end()) {
        f = Exists(p, dir, trunc ? 0 : sc.fsize, &sc);
      } else if (creat && (excl || trunc || sc.fsize == 0)) {
        f = Created(p, false);
        FileInfo& fi = m->files_[f];
        fi.ino = sc.ino;
        fi.dev = sc.dev;
        fi.ftype = sc.ftype;
      } else {
        f = Exists(p, dir, trunc ? 0 : sc.fsize, &sc);
      }
      if (trunc) {
        Modified(f);
        DataUse(f);
      }
    } else if (sc.ret == -ENOENT) {
      if (!file_by_path.count(p)) absent.insert(p);
    } else if (sc.ret == -EEXIST || sc.ret == -EISDIR) {
      f = Exists(p, sc.ret == -EISDIR, 0, nullptr);
    }
  }
  op.file = f;
  if (ok && f != kNone && sc.ino != 0) file_by_identity.emplace(std::make_pair(sc.dev, sc.ino), f);
  if (ok) {
    int32_t nfd = static_cast<int32_t>(sc.ret);
    uint32_t o = NewOfd(op.skip == Skip::kUnknownPath ? kNone : p, f, flags,
                        op.skip == Skip::kUnknownPath);
    SetFd(proc, nfd, o, flags & O_CLOEXEC);
    op.ofd = o;
  }
  s.declare.push_back([=, this] {
    PathResources(p, creat || trunc);
    if (ok) deps.Write(FdKey(proc, static_cast<int32_t>(sc.ret)));
    if (trunc && f != kNone) deps.WriteRange(FileKey(f), 0, UINT64_MAX);
  });
}

bool ModelBuilder::Impl::ApplyDescriptorOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  const uint32_t file = s.op.file;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.family == OpFamily::kOpen) {
    ApplyOpen(s);
  } else if (info.fd_effect == FdEffect::kCloses) {
    if (op.fd_state == FdState::kKnown && sc.ret != -EBADF) {
      // Closing an io_uring instance: the replay tears its engine down here, so the ring's
      // close (and unmapping) happens where the original's did.
      const uint32_t closed = OfdOf(proc, sc.fd);
      if (ok && closed != kNone) RingClosed(proc, sc.fd, closed, &op);
      fd_table.Close(proc, sc.fd);
    }
    s.declare.push_back([=, this] { if (sc.fd >= 0) deps.Write(FdKey(proc, sc.fd)); });
  } else if (info.fd_effect == FdEffect::kClosesRange) {
    // The op records the descriptors it closed (or marked close-on-exec), ascending.
    if (ok) {
      fd_table.CloseRange(proc, CloseRangeFirst(sc), CloseRangeLast(sc),
                          (sc.flags & CLOSE_RANGE_CLOEXEC) != 0, &s.extra);
    }
    op.fd_state = FdState::kKnown;
    s.declare.push_back([this, proc, closed = s.extra] {
      for (auto fd : closed) deps.Write(FdKey(proc, static_cast<int32_t>(fd)));
    });
  } else if (info.fd_effect == FdEffect::kDuplicates) {
    const bool fcntl = IsFcntl(info);
    int cmd = fcntl ? FcntlCmd(sc) : -1;
    bool dupping = !fcntl || cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
    int32_t newfd = -1;
    if (dupping && ok) newfd = static_cast<int32_t>(sc.ret);
    if (info.fd2 == FdRole::kCreated && sc.fd2 >= 0) {
      if (OfdOf(proc, sc.fd2) != kNone) op.fd2_state = FdState::kKnown;
      NoteFd(proc, sc.fd2);
    }
    if (newfd >= 0 && newfd != sc.fd) {
      // An unknown old descriptor closes whatever newfd held.
      fd_table.Dup(proc, sc.fd, newfd, OpResultCloexec(sc));
      NoteFd(proc, newfd);
    }
    if (fcntl && ok && op.fd_state == FdState::kKnown) {
      if (cmd == F_SETFD) fd_table.SetCloexec(proc, sc.fd, (FcntlArg(sc) & FD_CLOEXEC) != 0);
      if (cmd == F_SETFL && op.ofd != kNone) {
        fd_table.SetFlags(ofds[op.ofd].desc, static_cast<uint32_t>(FcntlArg(sc)));
      }
    }
    const bool locks = fcntl && (FcntlIsLock(cmd) || cmd == F_SETLEASE ||
                                                cmd == F_GETLEASE);
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (newfd >= 0) deps.Write(FdKey(proc, newfd));
      if (locks && file != kNone) deps.UseInOrder(LockKey(file));
    });
  } else if (code == IOT_OP_FLOCK) {
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (file != kNone) deps.UseInOrder(LockKey(file));
    });
  } else {
    return false;
  }
  return true;
}

bool ModelBuilder::Impl::ApplyDataOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  const bool ofd = s.op.ofd != kNone;  // the data descriptor's open file is known
  const uint32_t file = s.op.file;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.family == OpFamily::kRead || info.family == OpFamily::kWrite) {
    bool positional = OpHasExplicitOffset(code) &&
                      !(info.offset == FieldUse::kOffsetOrCurrent &&
                        sc.offset == kNoOffset);
    bool is_write = OpIsWrite(code);
    uint64_t pos = sc.offset;
    if (!positional && ofd) {
      pos = Desc(op.ofd).pos;
      if (is_write && Desc(op.ofd).append && ok && sc.fsize >= uint64_t(sc.ret)) {
        pos = sc.fsize - static_cast<uint64_t>(sc.ret);
      }
    }
    op.pos = pos;
    uint64_t n = ok ? static_cast<uint64_t>(sc.ret) : 0;
    if (ofd && ok && !positional) Desc(op.ofd).pos = Sum(pos, n);
    if (ofd && ok) WidenInitialAccess(op.ofd, is_write);
    if (ok && n > 0) DataUse(file);
    if (file != kNone) {
      if (is_write) {
        if (ok && n > 0) Modified(file);
      } else if (ok) {
        GrowInitial(file, Sum(pos, n));
        GrowInitial(file, sc.fsize);
      }
    }
    uint32_t pos_ofd = positional ? kNone : op.ofd;
    // The file's end (ordering.h, kSize): an append reads and moves it, a write reaching it
    // may have moved it.
    const bool appends = is_write && !positional && ofd && Desc(op.ofd).append;
    const bool reaches_end = is_write && n > 0 && Sum(pos, n) >= sc.fsize;
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
      if (file != kNone && appends) deps.Write(ResourceKey(ResourceTag::kSize, file));
      else if (file != kNone && reaches_end) deps.Read(ResourceKey(ResourceTag::kSize, file));
      if (file != kNone && n > 0) {
        if (is_write) {
          deps.WriteRange(FileKey(file), pos, Sum(pos, n));
          deps.Read(FileKey(file));
        } else {
          deps.ReadRange(FileKey(file), pos, Sum(pos, n));
        }
      }
    });
  } else if (info.family == OpFamily::kSeek) {
    if (ok && ofd) Desc(op.ofd).pos = static_cast<uint64_t>(sc.ret);
    if (file != kNone && ok) GrowInitial(file, sc.fsize);
    uint32_t pos_ofd = op.ofd;
    // SEEK_END, SEEK_DATA, SEEK_HOLE: the answer depends on the file's end (kSize).
    const int whence = Whence(sc);
    const bool sees_end = whence == SEEK_END || whence == SEEK_DATA || whence == SEEK_HOLE;
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
      if (file != kNone && sees_end) deps.Write(ResourceKey(ResourceTag::kSize, file));
    });
  } else if (info.sync == SyncScope::kFile || info.sync == SyncScope::kFileData ||
             info.sync == SyncScope::kFileRange) {
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (file != kNone) deps.Write(FileKey(file));
    });
  } else if (info.family == OpFamily::kSpace && info.fd == FdRole::kUsed) {
    if (ok) {
      Modified(file);
      DataUse(file);
    }
    const bool range = info.offset == FieldUse::kFileOffset;  // fallocate's; ftruncate: to the end
    uint64_t b = range ? sc.offset : 0;
    uint64_t e = range ? Sum(sc.offset, sc.length) : UINT64_MAX;
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (file != kNone) deps.WriteRange(FileKey(file), b, e);
      if (file != kNone) deps.Read(ResourceKey(ResourceTag::kSize, file));  // moves the end
    });
  } else if (info.fd == FdRole::kUsed && (info.family == OpFamily::kAdvice || info.family == OpFamily::kStat ||
             info.family == OpFamily::kDirectory || info.family == OpFamily::kSync)) {
    if (ok && file != kNone) GrowInitial(file, sc.fsize);
    const bool lists_dir = info.family == OpFamily::kDirectory;  // getdents64
    if (ok && lists_dir) MarkDir(file, kNone);
    uint32_t pos_ofd = lists_dir ? op.ofd : kNone;  // directory position
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
    });
  } else {
    return false;
  }
  return true;
}

bool ModelBuilder::Impl::ApplyCopyOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  const bool ofd = s.op.ofd != kNone;  // the input descriptor's open file is known
  const uint32_t file = s.op.file;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.direction == OpDirection::kCopy && info.replay == OpReplay::kReissued) {
    uint64_t n = ok ? static_cast<uint64_t>(sc.ret) : 0;
    int in_fd = DataFd(sc), out_fd = SecondFd(sc);
    uint64_t in_pos = sc.offset;
    if (in_pos == kNoOffset && ofd) in_pos = Desc(op.ofd).pos;
    if (sc.offset == kNoOffset && ofd && ok) Desc(op.ofd).pos = Sum(Desc(op.ofd).pos, n);
    op.pos = in_pos;
    if (file != kNone && ok) GrowInitial(file, Sum(in_pos, n));
    if (ok && n > 0) DataUse(file);
    uint32_t out_file = kNone;
    uint64_t out_pos = 0;
    // copy_file_range's *off_out; sendfile writes at its out_fd's position.
    const bool positional_out = info.aux == FieldUse::kOutOffset && CopyOutOffset(sc) != kNoOffset;
    const uint32_t out_ofd = OfdOf(proc, out_fd);
    if (out_ofd != kNone) {
      OpenFileDescription& oo = Desc(out_ofd);
      out_file = ofds[out_ofd].file;
      out_pos = positional_out ? CopyOutOffset(sc) : oo.pos;
      if (!positional_out && ok) oo.pos = Sum(oo.pos, n);
      if (ok && n) {
        Modified(out_file);
        DataUse(out_file);
      }
    }
    uint32_t in_pos_ofd = sc.offset == kNoOffset ? op.ofd : kNone;
    uint32_t out_pos_ofd = !positional_out ? out_ofd : kNone;
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, in_fd);
      DeclareFdUse(proc, out_fd);
      if (in_pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, in_pos_ofd));
      if (out_pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, out_pos_ofd));
      if (file != kNone && n) deps.ReadRange(FileKey(file), in_pos, Sum(in_pos, n));
      if (out_file != kNone && n) deps.WriteRange(FileKey(out_file), out_pos, Sum(out_pos, n));
    });
  } else {
    return false;
  }
  return true;
}

bool ModelBuilder::Impl::ApplyMemoryOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const uint32_t t = s.thread;
  const bool ok = s.ok;
  const uint32_t file = s.op.file;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.mapping == OpMapping::kMaps) {
    if (ok && op.skip == Skip::kReplayable && (sc.flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
      uint64_t start = static_cast<uint64_t>(sc.ret);
      uint32_t in = CoveringMapping(proc, start, Sum(start, PageRound(sc.length)));
      if (in != kNone) {
        op.fixed_in = in;
        op.map_offset = start - m->mappings_[in].start;
      }
    }
    if (ok && op.skip == Skip::kReplayable) {
      Mapping mp;
      mp.process = proc;
      mp.start = static_cast<uint64_t>(sc.ret);
      mp.length = PageRound(sc.length);  // the kernel maps whole pages
      mp.file_offset = sc.offset;
      mp.prot = sc.mode;
      mp.flags = sc.flags;
      mp.path = op.path;
      mp.file = file;
      mp.ofd = op.ofd;
      mp.thread = t;
      mp.op = s.index;
      mp.fd = sc.fd;
      op.mapping = AddMapping(mp, ofds[op.ofd].desc);
      if (file != kNone) GrowInitial(file, sc.fsize);
      DataUse(file);
    } else if (ok) {
      UnmapRange(proc, static_cast<uint64_t>(sc.ret),
                 Sum(static_cast<uint64_t>(sc.ret), PageRound(sc.length)));
    }
    uint32_t mid = op.mapping;
    // Replayed inside its live twin (Op::fixed_in), the call replaces part of that mapping:
    // it follows the other threads' uses of it, as an unmap of the part would.
    uint32_t replaced = op.fixed_in;
    s.declare.push_back([=, this] {
      DeclareFdUse(proc, sc.fd);
      if (mid != kNone) deps.Write(ResourceKey(ResourceTag::kMapping, mid));
      if (replaced != kNone) deps.Write(ResourceKey(ResourceTag::kMapping, replaced));
    });
  } else if (info.mapping != OpMapping::kNone) {
    uint64_t addr = MemAddr(sc);
    op.mapping = FindMapping(proc, addr);
    if (op.mapping == kNone) {
      if (op.skip == Skip::kReplayable) op.skip = Skip::kUnknownMapping;
    } else {
      const Mapping& mp = m->mappings_[op.mapping];
      op.map_offset = addr - mp.start;
      op.path = mp.path;
      op.file = mp.file;
    }
    uint32_t mid = op.mapping;
    uint32_t new_mid = kNone;
    uint64_t len = PageRound(MemLength(sc));
    if (ok && info.mapping == OpMapping::kUnmaps) UnmapRange(proc, addr, Sum(addr, len));
    if (ok && info.mapping == OpMapping::kRemaps && mid != kNone) {
      Mapping mp = m->mappings_[mid];
      const FileMapping* moved = fd_table.MappingAt(proc, addr);
      const DescriptionId desc = moved ? moved->desc : kNoDescription;
      UnmapRange(proc, addr, Sum(addr, len));
      mp.file_offset += addr - mp.start;
      mp.start = static_cast<uint64_t>(sc.ret);
      mp.length = PageRound(MremapNewLength(sc));
      mp.thread = t;
      mp.op = s.index;
      mp.inherited_from = kNone;
      new_mid = AddMapping(mp, desc);
      // The op refers to the old mapping; the new one is recorded in extra.
      s.extra.push_back(new_mid);
    }
    bool excl = info.mapping == OpMapping::kUnmaps || info.mapping == OpMapping::kRemaps;
    const bool syncs = info.mapping == OpMapping::kSyncs;
    s.declare.push_back([=, this] {
      if (mid == kNone) return;
      if (excl) deps.Write(ResourceKey(ResourceTag::kMapping, mid));
      else deps.Read(ResourceKey(ResourceTag::kMapping, mid));
      if (new_mid != kNone) deps.Write(ResourceKey(ResourceTag::kMapping, new_mid));
      if (syncs && m->mappings_[mid].file != kNone) {
        deps.Write(FileKey(m->mappings_[mid].file));
      }
    });
  } else {
    return false;
  }
  return true;
}

bool ModelBuilder::Impl::ApplyNamespaceOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  const bool ofd = s.op.ofd != kNone;  // the descriptor's open file is known
  const uint32_t file = s.op.file;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.family == OpFamily::kSpace && info.path == PathRole::kResolved) {
    uint32_t f = kNone;
    if (op.path != kNone && op.skip == Skip::kReplayable) {
      if (ok) f = Exists(op.path, false, 0, nullptr);
      if (ok) {
        Modified(f);
        DataUse(f);
      }
    }
    op.file = f;
    PathId p = op.path;
    s.declare.push_back([=, this] {
      PathResources(p, false);
      if (f != kNone) deps.WriteRange(FileKey(f), 0, UINT64_MAX);
    });
  } else if (info.family == OpFamily::kStat && info.path == PathRole::kResolved) {
    PathId p = op.path;
    if (p != kNone && !op.empty_path && op.skip == Skip::kReplayable) {
      if (ok) op.file = Exists(p, sc.ftype == kFtypeDir, sc.fsize, &sc);
      else if (sc.ret == -ENOENT && !file_by_path.count(p)) absent.insert(p);
    }
    bool emp = op.empty_path;
    int dirfd = PathDirFd(sc);
    s.declare.push_back([=, this] {
      if (emp) DeclareFdUse(proc, dirfd);
      else PathResources(p, false);
    });
  } else if (info.names == NameEffect::kMakesDir) {
    PathId p = op.path;
    if (p != kNone && op.skip == Skip::kReplayable) {
      if (ok) op.file = Created(p, true);
      else if (sc.ret == -EEXIST) op.file = Exists(p, true, 0, nullptr);
    }
    s.declare.push_back([=, this] { PathResources(p, true); });
  } else if (info.names == NameEffect::kRemoves || info.names == NameEffect::kRemovesDir) {
    PathId p = op.path;
    bool dir = info.names == NameEffect::kRemovesDir ||
               (info.path_base == PathBase::kFd && (sc.flags & AT_REMOVEDIR));
    if (p != kNone && op.skip == Skip::kReplayable) {
      if (ok) {
        op.file = Exists(p, dir, 0, nullptr);
        Removed(p);
      } else if (sc.ret == -ENOENT && !file_by_path.count(p)) {
        absent.insert(p);
      }
    }
    s.declare.push_back([=, this] { PathResources(p, true); });
  } else if (info.names == NameEffect::kSetsCwd && info.path == PathRole::kResolved) {
    PathId p = op.path;
    if (p != kNone && op.skip == Skip::kReplayable && ok) {
      op.file = Exists(p, true, 0, nullptr);
      SetCwd(proc, p);
    }
    s.declare.push_back([=, this] { PathResources(p, false); });
  } else if (info.names == NameEffect::kSetsCwd) {
    if (ok && ofd) fd_table.SetCwd(proc, Desc(op.ofd).path);
    if (ok) MarkDir(file, kNone);
    s.declare.push_back([=, this] { DeclareFdUse(proc, sc.fd); });
  } else {
    return ApplyNameOp(s);
  }
  return true;
}

bool ModelBuilder::Impl::ApplyNameOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint32_t proc = s.proc;
  const bool ok = s.ok;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(sc.op);
  if (info.names == NameEffect::kRenames) {
    PathId p = op.path, q = op.path2;
    if (p != kNone && q != kNone && op.skip == Skip::kReplayable && ok) {
      op.file = Exists(p, sc.ftype == kFtypeDir, 0, nullptr);
      bool exchange = RenameExchanges(sc);
      if (exchange) Exists(q, false, 0, nullptr);
      EnsureParentDirs(q);
      Renamed(p, q, exchange);
    }
    s.declare.push_back([=, this] {
      PathResources(p, true);
      PathResources(q, true);
    });
  } else if (info.names == NameEffect::kLinks) {
    PathId p = op.path, q = op.path2;
    if (p != kNone && q != kNone && op.skip == Skip::kReplayable && ok) {
      // AT_EMPTY_PATH (or /proc/self/fd/N): the descriptor's file, which may have no name.
      uint32_t f = op.empty_path && op.file != kNone ? op.file : Exists(p, false, 0, nullptr);
      if (f != kNone && m->files_[f].path == kNone) m->files_[f].path = q;
      op.file = f;
      EnsureParentDirs(q);
      file_by_path[q] = f;
      absent.erase(q);
    }
    const int held = op.empty_path ? PathDirFd(op.sc) : -1;  // the descriptor linked
    s.declare.push_back([=, this] {
      if (held >= 0) DeclareFdUse(proc, held);
      PathResources(p, false);
      PathResources(q, true);
    });
  } else if (info.names == NameEffect::kSymlinks) {
    PathId q = op.path2;
    if (q != kNone && op.skip == Skip::kReplayable && ok) {
      op.file = Created(q, false);
      m->files_[op.file].ftype = S_IFLNK >> 12;
    }
    s.declare.push_back([=, this] { PathResources(q, true); });
  } else if (info.names == NameEffect::kBindsSocket) {
    // An AF_UNIX socket bound to a path makes a socket file there; EADDRINUSE: something
    // already had the name.
    PathId p = op.path;
    if (p != kNone && op.skip == Skip::kReplayable) {
      if (ok) {
        op.file = Created(p, false);
        if (op.file != kNone) m->files_[op.file].ftype = S_IFSOCK >> 12;
      } else if (sc.ret == -EADDRINUSE) {
        op.file = Exists(p, false, 0, nullptr);
      }
    }
    s.declare.push_back([=, this] { PathResources(p, true); });
  } else {
    return false;
  }
  return true;
}

bool ModelBuilder::Impl::ApplyAsyncSetupOp(SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint16_t code = sc.op;
  const uint32_t proc = s.proc;
  const uint32_t t = s.thread;
  const bool ok = s.ok;
  Op& op = s.op;
  const OpInfo& info = GetOpInfo(code);
  if (info.async == AsyncCall::kSetup && info.family == OpFamily::kAio) {
    // length = nr_events, aux = the context address written to *ctxp (the async records' ctx)
    if (ok && sc.length > 0) {
      aio_setup_size[sc.aux] = static_cast<uint32_t>(std::min<uint64_t>(sc.length, UINT32_MAX));
    }
  } else if (info.async == AsyncCall::kDestroy) {
    // aux = the context: torn down after the requests submitted to it (any thread).
    auto ci = async_ctx_index.find(AsyncContextKey(IOT_AIO_ENGINE_LIBAIO, sc.aux));
    if (ci != async_ctx_index.end()) {
      const uint32_t context = ci->second;
      s.declare.push_back(
          [=, this] { deps.Write(ResourceKey(ResourceTag::kAsyncCtx, context)); });
    }
  } else if (info.async == AsyncCall::kSetup) {
    if (ok && sc.length > 0) {
      // The kernel takes no more entries (or clamps to this with IORING_SETUP_CLAMP).
      uring_setup_size[t] =
          static_cast<uint32_t>(std::min<uint64_t>(sc.length, kUringMaxEntries));
    }
    if (ok) {
      uint32_t o = NewOfd(kNone, kNone, O_RDWR, false);
      ofds[o].ring = true;
      SetFd(proc, static_cast<int32_t>(sc.ret), o, true);
      op.ofd = o;
    }
    s.declare.push_back([=, this] {
      if (ok) deps.Write(FdKey(proc, static_cast<int32_t>(sc.ret)));
    });
  } else if (info.fd == FdRole::kRing) {
    const uint32_t ring = OfdOf(proc, sc.fd);
    if (info.async == AsyncCall::kEnter && ring != kNone) {
      uring_enter_ring[t] = ring;
      // The requests just before the call are the ones it carries (sorted before it).
      const auto& ops = m->threads_[t].ops;
      if (!ops.empty() && ops.back().kind == OpKind::kAsyncSubmit) {
        uring_requests[ring][t] = static_cast<uint32_t>(ops.size() - 1);
      }
    }
    if (info.async == AsyncCall::kRegister && ok && ring != kNone) RegisterUringFiles(s);
    s.declare.push_back([=, this] { DeclareFdUse(proc, sc.fd); });
    if (info.async == AsyncCall::kEnter && (sc.flags & 1 /*GETEVENTS*/) && ring != kNone) {
      // A wait for completions comes after the requests other threads had submitted to the
      // ring when it began (a reaping thread's waits, MariaDB's): without pacing, a reaper
      // that submits nothing would otherwise run ahead of its submitters, to waits for
      // requests they reach only seconds later. Requests submitted during the wait are the
      // replay's to await (Worker::AwaitSubmissions).
      s.declare.push_back([=, this] {
        auto r = uring_requests.find(ring);
        if (r == uring_requests.end()) return;
        for (const auto& [thread, index] : r->second) deps.After(thread, index);
      });
    }
  } else {
    return false;
  }
  return true;
}

void ModelBuilder::Impl::NoteAsyncSetup(const SyscallStep& s, uint32_t pushed) {
  if (!s.ok) return;
  const OpInfo& info = GetOpInfo(s.sc.op);
  if (info.async != AsyncCall::kSetup) return;
  if (info.family == OpFamily::kAio) aio_setup_op[s.sc.aux] = {s.thread, pushed};
  if (info.family == OpFamily::kUring) {
    uring_setup_op[s.thread] = pushed;
    uring_setups[s.thread]++;
    ofds[s.op.ofd].ring_setup_thread = s.thread;
    ofds[s.op.ofd].ring_setup_op = pushed;
  }
}

// ---- descriptor lists (FDLIST records) ---------------------------------------------------------

namespace {

constexpr uint32_t kUringRegisterFiles = 2;
constexpr uint32_t kUringUnregisterFiles = 3;
constexpr uint32_t kUringRegisterFilesUpdate = 6;
constexpr uint32_t kUringRegisterFiles2 = 13;
constexpr uint32_t kUringRegisterFilesUpdate2 = 14;
constexpr int32_t kUringFilesSkip = -2;  // IORING_REGISTER_FILES_SKIP: the slot is left as is
constexpr uint64_t kMsgCmsgCloexec = 0x40000000;  // MSG_CMSG_CLOEXEC

// The open flags the replay opens a received descriptor's file with: its f_flags less what only
// an open's creation does (the file exists: it was passed).
uint32_t ReceivedOpenFlags(const iot_fdlist_entry& e, bool cloexec) {
  constexpr uint32_t kKept = O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_SYNC | O_DIRECT |
                             O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_PATH;
  return (e.fflags & kKept) | (cloexec ? O_CLOEXEC : 0);
}

}  // namespace

void ModelBuilder::Impl::HandleReceivedDescriptors(const iot_syscall& sc) {
  if (sc.op <= IOT_OP_MAX) m->stats_.ops_by_kind[sc.op]++;
  auto it = fdlists.find({sc.tid, sc.ts});
  if (it == fdlists.end() || it->second.head.kind != IOT_FDL_RECEIVED) return;
  const FdList list = std::move(it->second);
  fdlists.erase(it);
  if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) return;
  const bool cloexec = (sc.aux & kMsgCmsgCloexec) != 0;
  const uint32_t proc = m->threads_[ThreadFor(sc.tid, sc.tgid, sc.ts)].process;
  for (const iot_fdlist_entry& e : list.entries) {
    if (e.fd < 0) continue;
    // The call as the replay makes it: an open, at the recvmsg's exit, of the file behind the
    // sender's descriptor (known by its identity, read in the kernel), returning the descriptor
    // the receiver got. A file the model never saw by that identity (a socket, a pipe, a file
    // opened before the capture) makes no call: the descriptor stays unknown, and what it does
    // later is skipped as unknown_fd.
    uint32_t file = kNone;
    if (e.eflags & IOT_FDLE_IDENT) {
      auto f = file_by_identity.find({e.dev, e.ino});
      if (f != file_by_identity.end()) file = f->second;
    }
    if (file == kNone || m->files_[file].path == kNone) {
      fd_table.Close(proc, e.fd);  // the number was free in the receiver: nothing stale stays
      continue;
    }
    iot_syscall open{};
    open.hdr = sc.hdr;
    open.op = IOT_OP_OPENAT;
    open.cpu = sc.cpu;
    open.ts = Sum(sc.ts, sc.dur);  // at the recvmsg's exit, where the descriptor appears
    open.dur = 0;
    open.tgid = sc.tgid;
    open.tid = sc.tid;
    open.ret = e.fd;
    open.fd = kAtFdcwd;
    open.fd2 = -1;
    open.flags = ReceivedOpenFlags(e, cloexec);
    open.ino = e.ino;
    open.dev = e.dev;
    open.ftype = e.ftype;
    HandleSyscall(open, m->files_[file].path);
  }
}

void ModelBuilder::Impl::RegisterUringFiles(const SyscallStep& s) {
  const iot_syscall& sc = s.sc;
  const uint32_t ring = OfdOf(s.proc, sc.fd);
  const uint32_t opcode = sc.mode & 0xffff;
  if (opcode == kUringUnregisterFiles) {
    uring_files.erase(ring);
    return;
  }
  if (opcode != kUringRegisterFiles && opcode != kUringRegisterFiles2 &&
      opcode != kUringRegisterFilesUpdate && opcode != kUringRegisterFilesUpdate2) {
    return;
  }
  auto it = fdlists.find({sc.tid, sc.ts});
  if (it == fdlists.end() || it->second.head.kind != IOT_FDL_URING_FILES) {
    // The table is not known: no request of the ring names a file through it.
    if (opcode == kUringRegisterFiles || opcode == kUringRegisterFiles2) uring_files.erase(ring);
    return;
  }
  const FdList list = std::move(it->second);
  fdlists.erase(it);
  UringFiles& files = uring_files[ring];
  files.process = s.proc;
  auto& table = files.slots;
  const bool update = opcode == kUringRegisterFilesUpdate || opcode == kUringRegisterFilesUpdate2;
  if (!update) table.clear();
  const uint32_t first = update ? list.head.first : 0;
  for (uint32_t i = 0; i < list.entries.size(); i++) {
    const int32_t fd = list.entries[i].fd;
    if (first > UINT32_MAX - i) break;
    const uint32_t slot = first + i;
    if (fd == kUringFilesSkip) continue;
    if (fd < 0) {
      table.erase(slot);
      continue;
    }
    table[slot] = {fd, OfdOf(s.proc, fd)};
  }
}

int32_t ModelBuilder::Impl::FixedFileFd(uint32_t proc, uint32_t t, uint32_t slot) {
  // The ring: the one this thread entered last; else (requests an SQPOLL thread submitted) the
  // process's only ring with registered files.
  uint32_t ring = kNone;
  auto e = uring_enter_ring.find(t);
  if (e != uring_enter_ring.end() && uring_files.count(e->second)) ring = e->second;
  if (ring == kNone) {
    for (const auto& [r, files] : uring_files) {
      if (files.process != proc) continue;
      if (ring != kNone) return -1;  // two rings: which one is not known
      ring = r;
    }
  }
  if (ring == kNone) return -1;
  const auto& table = uring_files[ring].slots;
  auto it = table.find(slot);
  if (it == table.end()) return -1;
  // Registered files hold their file even after the descriptor closes; the replay submits on the
  // descriptor, so only while the number still names what was registered.
  const auto [fd, registered] = it->second;
  if (registered == kNone || OfdOf(proc, fd) != registered) return -1;
  return fd;
}

}  // namespace iotwin::model
