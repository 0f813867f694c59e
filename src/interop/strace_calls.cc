// One SYSCALL record per finished call, its fields by the op's family; the descriptor tables
// and positions those calls change.
#include <fcntl.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/checked_math.h"
#include "format/records.h"
#include "interop/strace_importer.h"
#include "interop/symbols.h"
#include "interop/text_util.h"
#include "model/op_fields.h"
#include "model/path.h"

namespace iotwin::interop::strace {

// Descriptor argument: number plus -y decoration; a decorated descriptor this importer has not
// seen opened is recorded once as an FD_SNAPSHOT (it was open before tracing started).
Result<FdText> StraceImporter::FdArg(uint32_t pid, Task& task, const Args& a, size_t i,
                                     uint64_t ts) {
  if (i >= a.size()) return FdText{};
  FdText fd = ParseFd(a[i]);
  if (fd.nul_in_target) stats_.counters["names_with_nul"]++;
  if (!fd.number) return fd;
  if (*fd.number < INT32_MIN || *fd.number > INT32_MAX) {
    // strace prints descriptors as int: this names none, and is not cut onto one that may be
    // open.
    stats_.counters["descriptor_out_of_range"]++;
    fd.number = -1;
    return fd;
  }
  auto n = static_cast<int32_t>(*fd.number);
  if (n == AT_FDCWD) {
    if (fd.decorated) IOTWIN_RETURN_IF_ERROR(NoteCwd(pid, task, fd.target, ts));
    return fd;
  }
  if (fd.decorated && n >= 0 && !fds_.Fd(task.tgid, n)) {
    const std::string path = fd.target[0] == '/' ? model::NormalizePath(fd.target) : std::string();
    const model::DescriptionId id = fds_.NewDescription(0, path);
    if (model::OpenFileDescription* file = fds_.Description(id)) {
      file->ino = PathIdentity(fd.target);
      file->ftype = fd.ftype;
      fds_.Bind(task.tgid, n, id, false);
    }
    iot_fd_snapshot s{};
    InitRecord(&s, IOT_REC_FD_SNAPSHOT);
    s.tgid = task.tgid;
    s.ts = ts;
    s.ino = PathIdentity(fd.target);
    s.fd = n;
    s.ftype = fd.ftype;
    IOTWIN_ASSIGN_OR_RETURN(s.path_id, sink_->InternString(fd.target));
    IOTWIN_RETURN_IF_ERROR(tasks_.Emit(s));
    stats_.counters["fds_open_before_trace"]++;
  }
  return fd;
}

Status StraceImporter::NoteCwd(uint32_t pid, Task& task, const std::string& cwd, uint64_t ts) {
  if (!cwd.empty() && cwd[0] == '/' && model::NormalizePath(cwd) == fds_.Cwd(task.tgid)) {
    return Status::Ok();
  }
  iot_proc p{};
  InitRecord(&p, IOT_REC_PROC);
  p.kind = IOT_PROC_CWD;
  p.ts = ts;
  p.tgid = task.tgid;
  p.tid = pid;
  IOTWIN_ASSIGN_OR_RETURN(p.path_id, sink_->InternString(cwd));
  fds_.OnProc(p, cwd);
  return tasks_.Emit(p);
}

Status StraceImporter::PathArg(const Args& a, size_t i, uint32_t* id, uint16_t* sflags,
                               std::string* out) {
  if (i >= a.size()) return Status::Ok();
  bool truncated = false;
  auto p = Unquote(a[i], &truncated);
  if (!p) {
    *sflags |= IOT_SCF_PATH_FAULT;
    return Status::Ok();
  }
  if (p->find('\0') != std::string::npos) {
    // "\0" or "\x00" in the log: a name no system call can be given (the kernel reads a path
    // up to its first NUL). Left out, flagged unreadable, counted.
    *sflags |= IOT_SCF_PATH_FAULT;
    stats_.counters["names_with_nul"]++;
    return Status::Ok();
  }
  // Cut by -s, or longer than a trace string holds (the sink cuts it and counts it).
  if (truncated || p->size() > IOT_STRING_MAX) *sflags |= IOT_SCF_PATH_TRUNC;
  IOTWIN_ASSIGN_OR_RETURN(*id, sink_->InternString(*p));
  if (out) *out = std::move(*p);
  return Status::Ok();
}

void StraceImporter::SetIdentity(iot_syscall* sc, const FdText& fd) {
  if (fd.decorated && !fd.target.empty()) {
    sc->ino = PathIdentity(fd.target);
    sc->ftype = fd.ftype;
  } else {
    sc->sflags |= IOT_SCF_NO_FILE;
  }
}

// A descriptor result past the descriptor range (a damaged log) binds nothing (TraceState
// checks it too); counted.
void StraceImporter::CountFdResultOutOfRange(const RetInfo& r) {
  if (r.known && r.ret > INT32_MAX) stats_.counters["descriptor_result_out_of_range"]++;
}

void StraceImporter::SizeOfAppend(iot_syscall& sc) {
  if (GetOpInfo(sc.op).family != OpFamily::kWrite || sc.ret < 0 ||
      (sc.sflags & IOT_SCF_INTERRUPTED))
    return;
  const model::OpenFileDescription* d = fds_.FdDescription(sc.tgid, sc.fd);
  if (!d || !d->append || d->path.empty()) return;
  auto it = known_sizes_.find(d->path);
  if (it != known_sizes_.end()) sc.fsize = SaturatingAdd(it->second, static_cast<uint64_t>(sc.ret));
}

void StraceImporter::NoteSizes(const iot_syscall& sc, const model::SyscallEffect& e) {
  if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) return;
  const OpInfo& info = GetOpInfo(sc.op);
  if (known_sizes_.empty() && info.family != OpFamily::kOpen) return;  // most calls
  const uint64_t n = static_cast<uint64_t>(sc.ret);
  if (info.family == OpFamily::kOpen) {
    const model::OpenFileDescription* d = fds_.Description(e.created);
    if (!d || d->path.empty()) return;
    const uint32_t flags = model::EffectiveOpenFlags(sc);
    const bool truncated = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
    const bool created = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    if (truncated || created) known_sizes_[d->path] = 0;
    return;
  }
  const model::OpenFileDescription* d = fds_.Description(e.desc);
  auto it = d && !d->path.empty() ? known_sizes_.find(d->path) : known_sizes_.end();
  if (info.family == OpFamily::kWrite) {
    if (it == known_sizes_.end()) return;
    if (d->append) {
      it->second = sc.fsize;  // SizeOfAppend's
    } else if (e.pos_known) {
      it->second = std::max(it->second, SaturatingAdd(e.pos, n));
    } else {
      known_sizes_.erase(it);
    }
  } else if (info.space == SpaceEffect::kSetsLength && info.path == PathRole::kNone) {
    if (d && !d->path.empty()) known_sizes_[d->path] = sc.length;  // ftruncate
  } else if (info.family == OpFamily::kSpace || info.family == OpFamily::kCopy ||
             info.family == OpFamily::kAio || info.family == OpFamily::kUring ||
             info.names == NameEffect::kRenames || info.names == NameEffect::kRemoves ||
             info.names == NameEffect::kRemovesDir) {
    known_sizes_.clear();
  }
}

void StraceImporter::ApplyToTables(iot_syscall& sc, const CallOut& out) {
  const uint64_t past_largest = fds_.drops().positions_past_largest;
  SizeOfAppend(sc);
  const model::SyscallEffect e =
      fds_.OnSyscall(sc, out.path ? std::optional<std::string_view>(*out.path) : std::nullopt);
  NoteSizes(sc, e);
  if (fds_.drops().positions_past_largest != past_largest) {
    stats_.counters["position_past_largest_offset"]++;
  }
  if (!out.at_position) return;
  if (!e.pos_known) {
    stats_.counters["io_at_unknown_position"]++;
    return;
  }
  if (out.offset_is_position) sc.offset = e.pos;
}

Status StraceImporter::Syscall(uint32_t pid, Task& task, uint16_t op, std::string_view raw_name,
                               const Args& a, const RetInfo& r, uint64_t ts, uint64_t dur,
                               bool interrupted) {
  fds_.NextRecord();
  iot_syscall sc{};
  InitRecord(&sc, IOT_REC_SYSCALL);
  sc.op = op;
  sc.ts = ts;
  sc.dur = dur;
  sc.tgid = task.tgid;
  sc.tid = pid;
  sc.ret = r.known ? r.ret : 0;
  sc.fd2 = -1;
  if (interrupted || !r.known) sc.sflags |= IOT_SCF_INTERRUPTED;
  const bool ok = r.known && r.ret >= 0;
  CallOut out;
  const CallText c{pid, task, op, raw_name, a, r, ts, ok, &out};
  std::vector<uint64_t> iov_lens;
  IOTWIN_RETURN_IF_ERROR(FillCall(c, sc, &iov_lens));
  ApplyToTables(sc, out);
  IOTWIN_RETURN_IF_ERROR(tasks_.Emit(sc));
  if (!iov_lens.empty()) IOTWIN_RETURN_IF_ERROR(EmitIovec(pid, ts, sc.aux, iov_lens));
  const OpInfo& info = GetOpInfo(op);
  if (info.async == AsyncCall::kSubmit && ok)
    IOTWIN_RETURN_IF_ERROR(aio_.Submit(pid, task.tgid, a, r.ret, ts));
  if (info.async == AsyncCall::kReap && ok && r.ret > 0) {
    IOTWIN_RETURN_IF_ERROR(aio_.Complete(pid, task.tgid, a, SaturatingAdd(ts, dur)));
  }
  return Status::Ok();
}

// The record's fields from the call's arguments, by the family of the call (GetOpInfo); calls
// of the other families name a path or a descriptor.
Status StraceImporter::FillCall(const CallText& c, iot_syscall& sc,
                                std::vector<uint64_t>* iov_lens) {
  const OpInfo& info = GetOpInfo(c.op);
  switch (info.family) {
    case OpFamily::kUnknown:
      return Status::Ok();
    case OpFamily::kOpen:
      return OpenCall(c, sc);
    case OpFamily::kDescriptor:
      return DescriptorCall(c, sc);
    case OpFamily::kRead:
    case OpFamily::kWrite:
      return ReadWriteCall(c, info, sc, iov_lens);
    case OpFamily::kCopy:
      return CopyCall(c, sc);
    case OpFamily::kMemory:
      return MemoryCall(c, sc);
    case OpFamily::kAio:
    case OpFamily::kUring:
      return AsyncCall(c, sc);
    default:
      return info.path != PathRole::kNone ? PathCall(c, sc) : FdCall(c, sc);
  }
}

// Opens (TraceState binds the new descriptor).
Status StraceImporter::OpenCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const Args& a = c.a;
  const RetInfo& r = c.r;
  const bool ok = c.ok;
  std::string path;
  switch (op) {
    case IOT_OP_OPEN:
    case IOT_OP_CREAT:
    case IOT_OP_OPENAT:
    case IOT_OP_OPENAT2: {
      size_t p = 0;
      if (info.path_base == PathBase::kFd) {
        IOTWIN_ASSIGN_OR_RETURN(FdText dir, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(dir.number.value_or(AT_FDCWD));
        p = 1;
      } else {
        sc.fd = AT_FDCWD;
      }
      IOTWIN_RETURN_IF_ERROR(PathArg(a, p, &sc.path_id, &sc.sflags, &path));
      if (op == IOT_OP_CREAT) {
        sc.flags = O_CREAT | O_WRONLY | O_TRUNC;
        sc.mode = FlagsArg(a, 1);
      } else if (info.aux == FieldUse::kResolveFlags) {  // openat2's struct open_how
        std::string_view how = a.size() > 2 ? a[2] : std::string_view();
        sc.flags = static_cast<uint32_t>(FlagsValue(FieldValue(how, "flags")).value_or(0));
        sc.mode = static_cast<uint32_t>(FlagsValue(FieldValue(how, "mode")).value_or(0));
        sc.aux = FlagsValue(FieldValue(how, "resolve")).value_or(0);
      } else {
        sc.flags = FlagsArg(a, p + 1);
        sc.mode = FlagsArg(a, p + 2);
      }
      SetIdentity(&sc, r.fd);
      if (sc.flags & O_DIRECTORY) sc.ftype = 4;
      if (ok) CountFdResultOutOfRange(r);
      if (!(sc.sflags & IOT_SCF_PATH_FAULT)) c.out->path = std::move(path);
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// close, close_range, dup*, fcntl, flock (TraceState applies them to the descriptor tables).
Status StraceImporter::DescriptorCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const Args& a = c.a;
  const RetInfo& r = c.r;
  const bool ok = c.ok;
  switch (op) {
    case IOT_OP_CLOSE: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      SetIdentity(&sc, fd);
      break;
    }
    case IOT_OP_CLOSE_RANGE: {
      const std::optional<uint32_t> first = RangeBound(a, 0), last = RangeBound(a, 1);
      sc.fd = static_cast<int32_t>(first.value_or(0));
      sc.fd2 = static_cast<int32_t>(last.value_or(0));
      sc.flags = FlagsArg(a, 2);
      sc.sflags |= IOT_SCF_NO_FILE;
      // The record then names descriptor 0 alone, and every reader of it closes that.
      if (!first || !last) stats_.counters["close_range_bounds_unknown"]++;
      break;
    }
    case IOT_OP_DUP:
    case IOT_OP_DUP2:
    case IOT_OP_DUP3: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      if (info.fd2 == FdRole::kCreated)
        sc.fd2 = static_cast<int32_t>(ParseFd(a.size() > 1 ? a[1] : "").number.value_or(-1));
      if (op == IOT_OP_DUP3) sc.flags = FlagsArg(a, 2);
      SetIdentity(&sc, fd.decorated ? fd : r.fd);
      if (ok) CountFdResultOutOfRange(r);
      break;
    }
    case IOT_OP_FCNTL: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      sc.mode = FcntlCommand(a.size() > 1 ? a[1] : std::string_view());
      if (IsLockCommand(sc.mode)) {
        LockRequest(a.size() > 2 ? a[2] : std::string_view(), &sc, &stats_.counters);
      } else {
        sc.aux = UArg(a, 2);
      }
      SetIdentity(&sc, fd);
      if (ok && (sc.mode == F_DUPFD || sc.mode == F_DUPFD_CLOEXEC)) CountFdResultOutOfRange(r);
      break;
    }
    case IOT_OP_FLOCK: {
      // flock(3</path>, LOCK_EX|LOCK_NB)
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      sc.flags =
          static_cast<uint32_t>(LockSymbols(a.size() > 1 ? a[1] : std::string_view()).value_or(0));
      SetIdentity(&sc, fd);
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// Reads and writes; vectored calls fill `iov_lens` (an IOVEC record follows).
Status StraceImporter::ReadWriteCall(const CallText& c, const OpInfo& info, iot_syscall& sc,
                                     std::vector<uint64_t>* iov_lens) {
  const uint16_t op = c.op;
  const Args& a = c.a;
  const RetInfo& r = c.r;
  const bool ok = c.ok;
  switch (op) {
    case IOT_OP_READ:
    case IOT_OP_WRITE:
    case IOT_OP_READV:
    case IOT_OP_WRITEV:
    case IOT_OP_PREAD64:
    case IOT_OP_PWRITE64:
    case IOT_OP_PREADV:
    case IOT_OP_PWRITEV:
    case IOT_OP_PREADV2:
    case IOT_OP_PWRITEV2: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      SetIdentity(&sc, fd);
      if (info.vectored) {
        bool complete = false;
        sc.length = IovTotal(a.size() > 1 ? a[1] : "", iov_lens, &complete);
        sc.aux = UArg(a, 2);
        if (!complete) {
          // strace -s 0 prints the array as "[...]": the request is not known. A successful
          // call moved at least its result; a failed one tells nothing.
          if (ok) {
            sc.length = std::max(sc.length, static_cast<uint64_t>(r.ret));
            stats_.counters["length_from_result"]++;
            sc.sflags |= IOT_SCF_APPROX_LENGTH;
          } else {
            stats_.counters["length_unknown"]++;
            sc.sflags |= IOT_SCF_APPROX_LENGTH;
          }
        }
      } else {
        sc.length = UArg(a, 2);
      }
      // pread64, pwrite64, preadv, pwritev: an offset argument; preadv2, pwritev2: an offset
      // or -1 for the current position, then flags.
      const bool or_current = info.offset == FieldUse::kOffsetOrCurrent;
      const bool positional = info.offset == FieldUse::kFileOffset || or_current;
      if (positional) sc.offset = UArg(a, 3);
      if (or_current) sc.flags = FlagsArg(a, 4);
      // Those at the descriptor's position record the one TraceState says they used.
      c.out->at_position = !positional || (or_current && sc.offset == model::kNoOffset);
      c.out->offset_is_position = !positional;
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// Calls on one descriptor: lseek, syncs, advice, space, fstat, getdents64.
Status StraceImporter::FdCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const std::string_view raw_name = c.raw_name;
  const Args& a = c.a;
  switch (op) {
    case IOT_OP_LSEEK: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      SetIdentity(&sc, fd);
      sc.offset = UArg(a, 1);
      sc.aux = UArg(a, 2);
      if (raw_name == "_llseek" || raw_name == "llseek") {
        // _llseek(fd, high, low, [result], whence)
        sc.offset = (UArg(a, 1) << 32) | (UArg(a, 2) & 0xffffffffu);
        sc.aux = UArg(a, 4);
      }
      break;
    }
    case IOT_OP_FSYNC:
    case IOT_OP_FDATASYNC:
    case IOT_OP_SYNCFS:
    case IOT_OP_FCHDIR:
    case IOT_OP_FSTAT:
    case IOT_OP_GETDENTS64: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      SetIdentity(&sc, fd);
      if (info.buffer == OpBuffer::kFilled) sc.length = UArg(a, 2);  // getdents64
      break;
    }
    case IOT_OP_SYNC_FILE_RANGE:
    case IOT_OP_FADVISE64:
    case IOT_OP_READAHEAD:
    case IOT_OP_FALLOCATE:
    case IOT_OP_FTRUNCATE: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      SetIdentity(&sc, fd);
      if (info.space == SpaceEffect::kFallocates) {
        sc.mode = FlagsArg(a, 1);
        sc.offset = UArg(a, 2);
        sc.length = UArg(a, 3);
      } else if (info.space == SpaceEffect::kSetsLength) {
        sc.length = UArg(a, 1);
      } else {
        sc.offset = UArg(a, 1);
        sc.length = UArg(a, 2);
        if (info.sync == SyncScope::kFileRange) sc.flags = FlagsArg(a, 3);
        if (info.aux == FieldUse::kAdvice) sc.aux = UArg(a, 3);
      }
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// copy_file_range, splice, sendfile; a NULL offset pointer (the side read or written at its
// position, which the copy moves) is recorded as kNoOffset.
Status StraceImporter::CopyCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const Args& a = c.a;
  switch (op) {
    case IOT_OP_COPY_FILE_RANGE:
    case IOT_OP_SPLICE: {
      IOTWIN_ASSIGN_OR_RETURN(FdText in, FdAt(c, 0));
      IOTWIN_ASSIGN_OR_RETURN(FdText out, FdAt(c, 2));
      sc.fd = static_cast<int32_t>(in.number.value_or(-1));
      sc.fd2 = static_cast<int32_t>(out.number.value_or(-1));
      SetIdentity(&sc, in);
      sc.offset = OffsetPointerArg(a, 1);
      sc.aux = OffsetPointerArg(a, 3);
      sc.length = UArg(a, 4);
      sc.flags = FlagsArg(a, 5);
      break;
    }
    case IOT_OP_SENDFILE: {
      IOTWIN_ASSIGN_OR_RETURN(FdText out, FdAt(c, 0));
      IOTWIN_ASSIGN_OR_RETURN(FdText in, FdAt(c, 1));
      sc.fd = static_cast<int32_t>(out.number.value_or(-1));
      sc.fd2 = static_cast<int32_t>(in.number.value_or(-1));
      SetIdentity(&sc, out);
      sc.offset = OffsetPointerArg(a, 2);
      sc.length = UArg(a, 3);
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// Mappings.
Status StraceImporter::MemoryCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const std::string_view raw_name = c.raw_name;
  const Args& a = c.a;
  switch (op) {
    case IOT_OP_MMAP: {
      sc.aux = UArg(a, 0);
      sc.length = UArg(a, 1);
      sc.mode = FlagsArg(a, 2);
      sc.flags = FlagsArg(a, 3);
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 4));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      sc.offset = UArg(a, 5);
      // mmap2 counts in 4096-byte units; a count whose bytes pass 2^64 is no offset.
      if (raw_name == "mmap2" && __builtin_mul_overflow(sc.offset, uint64_t{4096}, &sc.offset)) {
        sc.offset = UINT64_MAX;
        stats_.counters["offset_out_of_range"]++;
      }
      SetIdentity(&sc, fd);
      break;
    }
    case IOT_OP_MUNMAP:
    case IOT_OP_MSYNC:
    case IOT_OP_MADVISE:
    case IOT_OP_MREMAP:
      sc.offset = UArg(a, 0);
      sc.length = UArg(a, 1);
      if (info.mapping == OpMapping::kSyncs) sc.flags = FlagsArg(a, 2);
      if (info.mapping == OpMapping::kAdvises) sc.aux = UArg(a, 2);
      if (info.mapping == OpMapping::kRemaps) {
        sc.aux = UArg(a, 2);
        sc.flags = FlagsArg(a, 3);
      }
      sc.sflags |= IOT_SCF_NO_FILE;
      break;
    default:
      break;
  }
  return Status::Ok();
}

// Calls naming paths: stat family, directories, renames, links, truncate, chdir.
Status StraceImporter::PathCall(const CallText& c, iot_syscall& sc) {
  const uint32_t pid = c.pid;
  Task& task = c.task;
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const Args& a = c.a;
  const uint64_t ts = c.ts;
  const bool ok = c.ok;
  std::string path;
  switch (op) {
    case IOT_OP_TRUNCATE:
      sc.fd = AT_FDCWD;
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
      sc.length = UArg(a, 1);
      break;
    case IOT_OP_STAT:
    case IOT_OP_LSTAT:
    case IOT_OP_MKDIR:
    case IOT_OP_UNLINK:
    case IOT_OP_RMDIR:
    case IOT_OP_CHDIR:
      sc.fd = AT_FDCWD;
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags, &path));
      if (info.names == NameEffect::kMakesDir) sc.mode = FlagsArg(a, 1);
      if (info.names == NameEffect::kSetsCwd && ok && !path.empty() && path[0] == '/') {
        IOTWIN_RETURN_IF_ERROR(NoteCwd(pid, task, path, ts));
      }
      if (info.family == OpFamily::kStat && ok && a.size() > 1) StatFields(a[1], &sc);
      if (!(sc.sflags & IOT_SCF_PATH_FAULT)) c.out->path = std::move(path);
      break;
    case IOT_OP_NEWFSTATAT:
    case IOT_OP_STATX:
    case IOT_OP_MKDIRAT:
    case IOT_OP_UNLINKAT: {
      IOTWIN_ASSIGN_OR_RETURN(FdText dir, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(dir.number.value_or(AT_FDCWD));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path_id, &sc.sflags));
      if (op == IOT_OP_NEWFSTATAT) sc.flags = FlagsArg(a, 3);
      if (op == IOT_OP_STATX) {
        sc.flags = FlagsArg(a, 2);
        sc.aux = FlagsArg(a, 3);
      }
      if (info.names == NameEffect::kMakesDir) sc.mode = FlagsArg(a, 2);
      if (info.names == NameEffect::kRemoves) sc.flags = FlagsArg(a, 2);
      // fstat via newfstatat(fd, "", ..., AT_EMPTY_PATH): the file behind the fd.
      if (dir.decorated && sc.fd != AT_FDCWD) SetIdentity(&sc, dir);
      if (op == IOT_OP_NEWFSTATAT && ok && a.size() > 2) StatFields(a[2], &sc);
      if (op == IOT_OP_STATX && ok && a.size() > 4) StatFields(a[4], &sc);
      break;
    }
    case IOT_OP_RENAME:
    case IOT_OP_LINK:
    case IOT_OP_SYMLINK:
      sc.fd = AT_FDCWD;
      sc.fd2 = AT_FDCWD;
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path2_id, &sc.sflags));
      break;
    case IOT_OP_RENAMEAT:
    case IOT_OP_RENAMEAT2:
    case IOT_OP_LINKAT: {
      IOTWIN_ASSIGN_OR_RETURN(FdText d1, FdAt(c, 0));
      IOTWIN_ASSIGN_OR_RETURN(FdText d2, FdAt(c, 2));
      sc.fd = static_cast<int32_t>(d1.number.value_or(AT_FDCWD));
      sc.fd2 = static_cast<int32_t>(d2.number.value_or(AT_FDCWD));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path_id, &sc.sflags));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 3, &sc.path2_id, &sc.sflags));
      if (op != IOT_OP_RENAMEAT) sc.flags = FlagsArg(a, 4);
      break;
    }
    case IOT_OP_SYMLINKAT: {
      IOTWIN_ASSIGN_OR_RETURN(FdText d2, FdAt(c, 1));
      sc.fd = AT_FDCWD;
      sc.fd2 = static_cast<int32_t>(d2.number.value_or(AT_FDCWD));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
      IOTWIN_RETURN_IF_ERROR(PathArg(a, 2, &sc.path2_id, &sc.sflags));
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

// libaio and io_uring system calls (their requests are ASYNC_IO records).
Status StraceImporter::AsyncCall(const CallText& c, iot_syscall& sc) {
  const uint16_t op = c.op;
  const OpInfo& info = GetOpInfo(op);
  const Args& a = c.a;
  switch (op) {
    case IOT_OP_IO_SETUP:
    case IOT_OP_IO_URING_SETUP:
      sc.aux = UArg(a, 0);
      break;
    case IOT_OP_IO_SUBMIT:
      sc.aux = UArg(a, 1);
      break;
    case IOT_OP_IO_GETEVENTS:
    case IOT_OP_IO_PGETEVENTS:
      sc.aux = UArg(a, 1);
      break;
    case IOT_OP_IO_URING_ENTER:
    case IOT_OP_IO_URING_REGISTER: {
      IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
      sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
      sc.aux = UArg(a, 1);
      if (info.async == AsyncCall::kEnter) {
        sc.mode = static_cast<uint32_t>(UArg(a, 2));
        sc.flags = FlagsArg(a, 3);
      }
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

Status StraceImporter::EmitIovec(uint32_t tid, uint64_t ts, uint64_t count,
                                 const std::vector<uint64_t>& lens) {
  size_t n = std::min<size_t>(lens.size(), IOT_IOVEC_MAX);
  std::vector<uint8_t> buf(sizeof(iot_iovec) + n * 8, 0);
  auto* v = reinterpret_cast<iot_iovec*>(buf.data());
  InitRecord(v, IOT_REC_IOVEC);
  v->hdr.size = static_cast<uint16_t>(buf.size());
  v->tid = tid;
  v->count = static_cast<uint16_t>(std::min<uint64_t>(count ? count : lens.size(), UINT16_MAX));
  v->captured = static_cast<uint16_t>(n);
  v->ts = ts;
  std::memcpy(buf.data() + sizeof(iot_iovec), lens.data(), n * 8);
  return tasks_.Emit(&v->hdr);
}

}  // namespace iotwin::interop::strace
