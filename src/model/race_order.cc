// ModelBuilder: the order of racing calls on one name or one file's end (ordering.h, kPath and
// kSize). Calls of different threads that overlapped in time are presented in start order, but
// the kernel ran them in the order they took the directory's or the inode's lock, which the
// entry time stamp does not always show (a thread can be preempted between entry and lock). The
// results do: of two racing mkdirs the one that returned 0 came first; an append that wrote at
// offset 100 came after the one that wrote at 0; an lseek(SEEK_END) that returned 200 came
// after the append that made the file 200 bytes long. A call whose result contradicts its start
// order is postponed to just after the call that came before it. It is only ever moved later,
// past calls that started while it ran (concurrent with it: any order of them is one the
// original could have taken, and its own thread had nothing in between), so program order and
// every other rule of the model still hold.
#include <fcntl.h>
#include <linux/fs.h>

#include <cerrno>
#include <string>
#include <unordered_map>

#include "format/op_info.h"
#include "model/model_builder_impl.h"
#include "model/op_fields.h"

namespace iotwin::model {

namespace {

// What a call shows of a name: whether it existed before the call and after it.
enum class NameState : uint8_t { kAny, kPresent, kAbsent };

struct RaceEntry {
  size_t event = 0;  // index in `events`
  uint32_t tid = 0;
  uint64_t start = 0, end = 0;
  NameState before = NameState::kAny, after = NameState::kAny;
  uint64_t rank = 0;    // kSize: the file size it saw, times two, +1 for an append
  bool pinned = false;  // a call on two names (rename) stays where it is
};

// A looked-ahead call must lie this close in its name's list: racing calls are few, and the
// search stays linear in the trace.
constexpr size_t kWindow = 64;

bool Fits(NameState state, NameState before) {
  return state == NameState::kAny || before == NameState::kAny || state == before;
}
NameState Apply(NameState state, NameState after) {
  return after == NameState::kAny ? state : after;
}

// The states of `sc` on its (first or only) name; false when its result tells nothing.
bool NameEffect(const iot_syscall& sc, RaceEntry* e) {
  using S = NameState;
  const int64_t r = sc.ret;
  auto set = [&](S b, S a) {
    e->before = b;
    e->after = a;
    return true;
  };
  switch (sc.op) {
    case IOT_OP_MKDIR: case IOT_OP_MKDIRAT:
      if (r == 0) return set(S::kAbsent, S::kPresent);
      return r == -EEXIST && set(S::kPresent, S::kPresent);
    case IOT_OP_UNLINK: case IOT_OP_UNLINKAT: case IOT_OP_RMDIR:
      if (r == 0) return set(S::kPresent, S::kAbsent);
      return r == -ENOENT && set(S::kAbsent, S::kAbsent);
    case IOT_OP_LINK: case IOT_OP_LINKAT: case IOT_OP_SYMLINK: case IOT_OP_SYMLINKAT:
      if (r == 0) return set(S::kAbsent, S::kPresent);
      return r == -EEXIST && set(S::kPresent, S::kPresent);
    case IOT_OP_STAT: case IOT_OP_LSTAT: case IOT_OP_NEWFSTATAT: case IOT_OP_STATX:
      if (r == 0) return set(S::kPresent, S::kPresent);
      return r == -ENOENT && set(S::kAbsent, S::kAbsent);
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT: {
      const uint32_t flags = EffectiveOpenFlags(sc);
      if ((flags & O_TMPFILE) == O_TMPFILE) return false;  // names its directory
      if ((flags & O_CREAT) && (flags & O_EXCL)) {
        if (r >= 0) return set(S::kAbsent, S::kPresent);
        return r == -EEXIST && set(S::kPresent, S::kPresent);
      }
      if (flags & O_CREAT) return r >= 0 && set(S::kAny, S::kPresent);
      if (r >= 0) return set(S::kPresent, S::kPresent);
      return r == -ENOENT && set(S::kAbsent, S::kAbsent);
    }
    case IOT_OP_RENAME: case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2:
      e->pinned = true;
      if (r == 0) return set(S::kPresent, S::kAbsent);
      return r == -ENOENT && set(S::kAbsent, S::kAbsent);
    default:
      return false;
  }
}

// The target of a rename: present after it (before: unknown, unless RENAME_NOREPLACE refused).
bool RenameTargetEffect(const iot_syscall& sc, RaceEntry* e) {
  if (GetOpInfo(sc.op).names != iotwin::NameEffect::kRenames) return false;
  e->pinned = true;
  if (sc.ret == 0) {
    e->before = NameState::kAny;
    e->after = NameState::kPresent;
    return true;
  }
  if (sc.ret == -EEXIST && (sc.flags & RENAME_NOREPLACE)) {
    e->before = e->after = NameState::kPresent;
    return true;
  }
  return false;
}

// Moves entry list[i] to just after list[j] (j > i), in the list and in the events' order.
template <typename Events>
void PostponeAfter(Events& events, std::vector<RaceEntry>& list, size_t i, size_t j) {
  auto& moved = events[list[i].event];
  const auto& anchor = events[list[j].event];
  moved.ts = anchor.ts;
  moved.seq = anchor.seq;
  moved.sub = anchor.sub;
  moved.after = static_cast<uint8_t>(anchor.after < UINT8_MAX ? anchor.after + 1 : UINT8_MAX);
  RaceEntry e = list[i];
  list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(j), e);
}

// A call of another thread, after `x` in the list, that `x` can be moved after: it began while
// `x` ran (or in the same nanosecond: two CPUs stamp racing entries alike).
bool CanFollow(const RaceEntry& x, const RaceEntry& y) {
  return y.tid != x.tid && y.start >= x.start && y.start < x.end;
}

// The descriptors opened with O_APPEND, as far as the pre-pass follows them (opens, dups, closes,
// F_SETFL; fork copies them in ReorderRaces).
void NoteAppendFlag(const iot_syscall& sc, std::unordered_map<uint64_t, bool>& appending) {
  auto key = [&](int64_t fd) {
    return (static_cast<uint64_t>(sc.tgid) << 32) | static_cast<uint32_t>(fd);
  };
  if (sc.ret < 0) return;
  if (GetOpInfo(sc.op).family == OpFamily::kOpen) {
    appending[key(sc.ret)] = (EffectiveOpenFlags(sc) & O_APPEND) != 0;
  } else if (GetOpInfo(sc.op).fd_effect == FdEffect::kCloses) {
    appending.erase(key(sc.fd));
  } else if (DuplicatesFd(sc)) {
    auto it = appending.find(key(sc.fd));
    if (it != appending.end()) appending[key(sc.ret)] = it->second;
    else appending.erase(key(sc.ret));
  } else if (SetsStatusFlags(sc)) {
    appending[key(sc.fd)] = (FcntlArg(sc) & O_APPEND) != 0;
  }
}

// One name's calls: each must find the name as the call before it left it. One that does not
// is postponed after the first later call of another thread that started while it ran and
// does; one that does, but leaves the name as the next call (which started while it ran) cannot
// have found it, while that call fits before it, is postponed after that call (the first calls
// on a name: of an EEXIST and a 0 from mkdir, the 0 came first, whatever came before them).
template <typename Events>
bool OrderNameList(Events& events, std::vector<RaceEntry>& list) {
  bool moved = false;
  NameState state = NameState::kAny;
  size_t budget = 4 * list.size();  // each call moves only later; this only bounds the work
  for (size_t i = 0; i < list.size();) {
    const RaceEntry& x = list[i];
    size_t found = 0;
    if (!x.pinned && budget > 0 && !Fits(state, x.before)) {
      for (size_t j = i + 1; j < list.size() && j <= i + kWindow; j++) {
        if (CanFollow(x, list[j]) && Fits(state, list[j].before)) {
          found = j;
          break;
        }
      }
    } else if (!x.pinned && budget > 0 && i + 1 < list.size()) {
      const RaceEntry& y = list[i + 1];
      if (CanFollow(x, y) && !Fits(Apply(state, x.after), y.before) && Fits(state, y.before) &&
          Fits(Apply(state, y.after), x.before)) {
        found = i + 1;
      }
    }
    if (found == 0) {
      state = Apply(state, x.after);
      i++;
      continue;
    }
    PostponeAfter(events, list, i, found);
    budget--;
    moved = true;
  }
  return moved;
}

// One file's appends and lseek(SEEK_END)s: ordered by the size each saw (an lseek before an
// append that saw the same size). A call is postponed after the last later call of another
// thread that started while it ran and saw a smaller size.
template <typename Events>
bool OrderSizeList(Events& events, std::vector<RaceEntry>& list) {
  bool moved = false;
  size_t budget = 4 * list.size();
  for (size_t i = 0; i < list.size();) {
    const RaceEntry& x = list[i];
    size_t found = 0;
    for (size_t j = i + 1; j < list.size() && j <= i + kWindow && budget > 0; j++) {
      if (CanFollow(x, list[j]) && list[j].rank < x.rank) found = j;
    }
    if (found == 0) {
      i++;
      continue;
    }
    PostponeAfter(events, list, i, found);
    budget--;
    moved = true;
  }
  return moved;
}

}  // namespace

bool ModelBuilder::Impl::ReorderRaces() {
  // The key of a name argument: the path when absolute, else the path relative to the caller's
  // working directory (shared by processes that share it, as racing processes usually do) or to
  // the caller's directory descriptor.
  auto name_key = [&](const iot_syscall& sc, uint32_t path_id, int dirfd) -> std::string {
    std::optional<std::string_view> s = String(path_id);
    if (!s || s->empty()) return {};
    if ((*s)[0] == '/') return std::string(*s);
    if (dirfd == AT_FDCWD) return "./" + std::string(*s);
    return fmt::format("{}:{}:", sc.tgid, dirfd) + std::string(*s);
  };
  std::unordered_map<std::string, std::vector<RaceEntry>> names;
  std::unordered_map<uint64_t, std::vector<RaceEntry>> sizes;  // by (dev, ino)
  std::unordered_map<uint64_t, bool> appending;                // (tgid, fd) -> O_APPEND
  auto fd_key = [](uint32_t tgid, int64_t fd) {
    return (static_cast<uint64_t>(tgid) << 32) | static_cast<uint32_t>(fd);
  };
  for (size_t i = 0; i < events.size(); i++) {
    if (events[i].type == kEvProc) {
      const iot_proc& p = procs[events[i].index];
      if (p.kind != IOT_PROC_FORK) continue;
      std::vector<std::pair<uint64_t, bool>> inherited;
      for (const auto& [k, a] : appending) {
        if (static_cast<uint32_t>(k >> 32) == p.tgid) inherited.push_back({k, a});
      }
      for (const auto& [k, a] : inherited) appending[fd_key(p.child_tgid, static_cast<uint32_t>(k))] = a;
      continue;
    }
    if (events[i].type != kEvSyscall) continue;
    const iot_syscall& sc = syscalls[events[i].index];
    if (sc.sflags & IOT_SCF_INTERRUPTED) continue;
    RaceEntry e;
    e.event = i;
    e.tid = sc.tid;
    e.start = sc.ts;
    e.end = Sum(sc.ts, sc.dur);
    NoteAppendFlag(sc, appending);
    if (OpTakesPath(sc.op) || OpTakesPath2(sc.op)) {
      const iotwin::NameEffect made = GetOpInfo(sc.op).names;
      const bool second = made == iotwin::NameEffect::kLinks || made == iotwin::NameEffect::kSymlinks;
      RaceEntry first = e;
      if (NameEffect(sc, &first)) {
        std::string key = second ? name_key(sc, sc.path2_id, Path2DirFd(sc))
                                 : name_key(sc, sc.path_id, PathDirFd(sc));
        if (!key.empty()) names[key].push_back(first);
      }
      RaceEntry target = e;
      if (RenameTargetEffect(sc, &target)) {
        std::string key = name_key(sc, sc.path2_id, Path2DirFd(sc));
        if (!key.empty()) names[key].push_back(target);
      }
      continue;
    }
    if (sc.ret < 0 || sc.ino == 0) continue;
    const uint64_t inode = sc.ino ^ (static_cast<uint64_t>(sc.dev) << 40);
    const OpInfo& info = GetOpInfo(sc.op);
    if (info.family == OpFamily::kSeek && Whence(sc) == SEEK_END) {
      int64_t seen = 0;  // the size the offset was added to
      if (__builtin_sub_overflow(sc.ret, static_cast<int64_t>(sc.offset), &seen) || seen < 0 ||
          static_cast<uint64_t>(seen) >= (UINT64_MAX >> 2)) {
        continue;
      }
      e.rank = static_cast<uint64_t>(seen) * 2;
      sizes[inode].push_back(e);
    } else if (info.direction == OpDirection::kWrite && info.offset == FieldUse::kPositionBefore &&
               sc.ret > 0 &&
               sc.fsize >= static_cast<uint64_t>(sc.ret) && sc.fsize < (UINT64_MAX >> 2)) {
      auto a = appending.find(fd_key(sc.tgid, sc.fd));
      if (a == appending.end() || !a->second) continue;
      e.rank = (sc.fsize - static_cast<uint64_t>(sc.ret)) * 2 + 1;
      sizes[inode].push_back(e);
    }
  }
  bool moved = false;
  for (auto& [key, list] : names) moved |= OrderNameList(events, list);
  for (auto& [key, list] : sizes) moved |= OrderSizeList(events, list);
  return moved;
}

}  // namespace iotwin::model
