#include "interop/flag_names.h"

#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "format/op_info.h"
#include "interop/symbols.h"
#include "iotwin_abi.h"

namespace iotwin::interop {
namespace {

constexpr uint64_t kAccessMode = 3;  // O_ACCMODE
constexpr uint64_t kMapType = 0xf;   // MAP_TYPE
// x86-64 (asm-generic) values of the open flags that move between architectures.
constexpr uint32_t kGenericDirect = 040000, kGenericDirectory = 0200000;

size_t Index(FlagSet set) { return static_cast<size_t>(set); }

char* Put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

}  // namespace

SyscallFlagSets SyscallFlagSetsOf(uint16_t op) {
  SyscallFlagSets s;
  const OpInfo& info = GetOpInfo(op);
  switch (info.aux) {
    case FieldUse::kWhence: s.aux = FlagSet::kWhence; break;
    case FieldUse::kAdvice:
      s.aux = info.family == OpFamily::kMemory ? FlagSet::kMadvise : FlagSet::kFadvise;
      break;
    case FieldUse::kResolveFlags: s.aux = FlagSet::kResolve; break;
    default: break;
  }
  switch (op) {
    case IOT_OP_OPEN:
    case IOT_OP_OPENAT:
    case IOT_OP_OPENAT2: s.flags = FlagSet::kOpen; break;
    case IOT_OP_DUP3: s.flags = FlagSet::kCloexec; break;
    case IOT_OP_PREADV2:
    case IOT_OP_PWRITEV2: s.flags = FlagSet::kRwf; break;
    case IOT_OP_SYNC_FILE_RANGE: s.flags = FlagSet::kSyncFileRange; break;
    case IOT_OP_FALLOCATE: s.mode = FlagSet::kFalloc; break;
    case IOT_OP_MMAP:
      s.flags = FlagSet::kMap;
      s.mode = FlagSet::kProt;
      break;
    case IOT_OP_MSYNC: s.flags = FlagSet::kMsync; break;
    case IOT_OP_MREMAP: s.flags = FlagSet::kMremap; break;
    case IOT_OP_CLOSE_RANGE: s.flags = FlagSet::kCloseRange; break;
    case IOT_OP_FCNTL: s.mode = FlagSet::kFcntlCmd; break;
    case IOT_OP_RENAMEAT2: s.flags = FlagSet::kRename; break;
    case IOT_OP_STAT:
    case IOT_OP_LSTAT:
    case IOT_OP_NEWFSTATAT:
    case IOT_OP_STATX:
    case IOT_OP_UNLINKAT:
    case IOT_OP_LINKAT: s.flags = FlagSet::kAt; break;
    default: break;
  }
  return s;
}

void FlagNames::AddValue(FlagSet set, uint64_t bits, std::string_view name) {
  Table& t = tables_[Index(set)];
  if (t.count < std::size(t.names)) t.names[t.count++] = {bits, name};
}

void FlagNames::Add(FlagSet set, std::string_view name) {
  if (auto v = SymbolValue(name)) AddValue(set, *v, name);
}

FlagNames::FlagNames(uint32_t o_direct, uint32_t o_directory) {
  const bool generic = o_direct == kGenericDirect && o_directory == kGenericDirectory;
  // Several-bit names come before the names of their bits.
  if (generic) Add(FlagSet::kOpen, "O_TMPFILE");
  for (std::string_view n : {"O_SYNC", "O_CREAT", "O_EXCL", "O_NOCTTY", "O_TRUNC", "O_APPEND",
                             "O_NONBLOCK", "O_DSYNC", "O_ASYNC", "O_NOATIME", "O_CLOEXEC",
                             "O_PATH"}) {
    Add(FlagSet::kOpen, n);
  }
  AddValue(FlagSet::kOpen, o_direct, "O_DIRECT");
  AddValue(FlagSet::kOpen, o_directory, "O_DIRECTORY");
  if (generic) {
    Add(FlagSet::kOpen, "O_LARGEFILE");
    Add(FlagSet::kOpen, "O_NOFOLLOW");
  }
  Add(FlagSet::kCloexec, "O_CLOEXEC");
  for (std::string_view n : {"AT_SYMLINK_NOFOLLOW", "AT_REMOVEDIR", "AT_SYMLINK_FOLLOW",
                             "AT_NO_AUTOMOUNT", "AT_EMPTY_PATH", "AT_STATX_FORCE_SYNC",
                             "AT_STATX_DONT_SYNC", "AT_RECURSIVE"}) {
    Add(FlagSet::kAt, n);
  }
  for (std::string_view n : {"PROT_READ", "PROT_WRITE", "PROT_EXEC", "PROT_GROWSDOWN",
                             "PROT_GROWSUP"}) {
    Add(FlagSet::kProt, n);
  }
  for (std::string_view n : {"MAP_FIXED_NOREPLACE", "MAP_FIXED", "MAP_ANONYMOUS", "MAP_32BIT",
                             "MAP_GROWSDOWN", "MAP_DENYWRITE", "MAP_EXECUTABLE", "MAP_LOCKED",
                             "MAP_NORESERVE", "MAP_POPULATE", "MAP_NONBLOCK", "MAP_STACK",
                             "MAP_HUGETLB", "MAP_SYNC"}) {
    Add(FlagSet::kMap, n);
  }
  for (std::string_view n : {"MS_ASYNC", "MS_INVALIDATE", "MS_SYNC"}) Add(FlagSet::kMsync, n);
  for (std::string_view n : {"MREMAP_MAYMOVE", "MREMAP_FIXED", "MREMAP_DONTUNMAP"}) {
    Add(FlagSet::kMremap, n);
  }
  for (std::string_view n : {"FALLOC_FL_KEEP_SIZE", "FALLOC_FL_PUNCH_HOLE",
                             "FALLOC_FL_COLLAPSE_RANGE", "FALLOC_FL_ZERO_RANGE",
                             "FALLOC_FL_INSERT_RANGE", "FALLOC_FL_UNSHARE_RANGE"}) {
    Add(FlagSet::kFalloc, n);
  }
  for (std::string_view n : {"RWF_HIPRI", "RWF_DSYNC", "RWF_SYNC", "RWF_NOWAIT", "RWF_APPEND"}) {
    Add(FlagSet::kRwf, n);
  }
  for (std::string_view n : {"SYNC_FILE_RANGE_WAIT_BEFORE", "SYNC_FILE_RANGE_WRITE",
                             "SYNC_FILE_RANGE_WAIT_AFTER"}) {
    Add(FlagSet::kSyncFileRange, n);
  }
  for (std::string_view n : {"RENAME_NOREPLACE", "RENAME_EXCHANGE", "RENAME_WHITEOUT"}) {
    Add(FlagSet::kRename, n);
  }
  for (std::string_view n : {"RESOLVE_NO_XDEV", "RESOLVE_NO_MAGICLINKS", "RESOLVE_NO_SYMLINKS",
                             "RESOLVE_BENEATH", "RESOLVE_IN_ROOT", "RESOLVE_CACHED"}) {
    Add(FlagSet::kResolve, n);
  }
  for (std::string_view n : {"CLOSE_RANGE_UNSHARE", "CLOSE_RANGE_CLOEXEC"}) {
    Add(FlagSet::kCloseRange, n);
  }
  for (FlagSet e : {FlagSet::kWhence, FlagSet::kFadvise, FlagSet::kMadvise, FlagSet::kFcntlCmd}) {
    tables_[Index(e)].enumeration = true;
  }
  for (std::string_view n : {"SEEK_SET", "SEEK_CUR", "SEEK_END", "SEEK_DATA", "SEEK_HOLE"}) {
    Add(FlagSet::kWhence, n);
  }
  for (std::string_view n : {"POSIX_FADV_NORMAL", "POSIX_FADV_RANDOM", "POSIX_FADV_SEQUENTIAL",
                             "POSIX_FADV_WILLNEED", "POSIX_FADV_DONTNEED",
                             "POSIX_FADV_NOREUSE"}) {
    Add(FlagSet::kFadvise, n);
  }
  for (std::string_view n :
       {"MADV_NORMAL", "MADV_RANDOM", "MADV_SEQUENTIAL", "MADV_WILLNEED", "MADV_DONTNEED",
        "MADV_FREE", "MADV_REMOVE", "MADV_DONTFORK", "MADV_DOFORK", "MADV_MERGEABLE",
        "MADV_UNMERGEABLE", "MADV_HUGEPAGE", "MADV_NOHUGEPAGE", "MADV_DONTDUMP", "MADV_DODUMP",
        "MADV_WIPEONFORK", "MADV_KEEPONFORK", "MADV_COLD", "MADV_PAGEOUT", "MADV_HWPOISON",
        "MADV_POPULATE_READ", "MADV_POPULATE_WRITE"}) {
    Add(FlagSet::kMadvise, n);
  }
  for (std::string_view n :
       {"F_DUPFD", "F_DUPFD_CLOEXEC", "F_GETFD", "F_SETFD", "F_GETFL", "F_SETFL", "F_GETLK",
        "F_SETLK", "F_SETLKW", "F_OFD_GETLK", "F_OFD_SETLK", "F_OFD_SETLKW", "F_SETOWN",
        "F_GETOWN", "F_SETSIG", "F_GETSIG", "F_SETLEASE", "F_GETLEASE", "F_NOTIFY",
        "F_SETPIPE_SZ", "F_GETPIPE_SZ", "F_ADD_SEALS", "F_GET_SEALS"}) {
    Add(FlagSet::kFcntlCmd, n);
  }
}

char* FlagNames::Write(FlagSet set, uint64_t value, char* out) const {
  if (set == FlagSet::kNone) return out;
  const Table& t = tables_[Index(set)];
  if (t.enumeration) {
    for (size_t i = 0; i < t.count; i++) {
      if (t.names[i].bits == value) return Put(out, t.names[i].name);
    }
    return fmt::format_to(out, "{}", value);
  }
  char* p = out;
  uint64_t rest = value;
  if (set == FlagSet::kOpen) {
    static constexpr std::string_view kAccess[] = {"O_RDONLY", "O_WRONLY", "O_RDWR"};
    if ((value & kAccessMode) != kAccessMode) {
      p = Put(p, kAccess[value & kAccessMode]);
      rest &= ~kAccessMode;
    }
  } else if (set == FlagSet::kMap) {
    static constexpr std::string_view kType[] = {"", "MAP_SHARED", "MAP_PRIVATE",
                                                 "MAP_SHARED_VALIDATE"};
    if ((value & kMapType) >= 1 && (value & kMapType) <= 3) {
      p = Put(p, kType[value & kMapType]);
      rest &= ~kMapType;
    }
  } else if (set == FlagSet::kProt && value == 0) {
    return Put(p, "PROT_NONE");
  }
  for (size_t i = 0; i < t.count && rest != 0; i++) {
    const uint64_t bits = t.names[i].bits;
    if (bits == 0 || (rest & bits) != bits) continue;
    if (p != out) *p++ = '|';
    p = Put(p, t.names[i].name);
    rest &= ~bits;
  }
  if (rest != 0) {
    if (p != out) *p++ = '|';
    p = fmt::format_to(p, "{:#x}", rest);
  }
  return p;
}

std::string FlagNames::Text(FlagSet set, uint64_t value) const {
  char buf[kMaxLength];
  return std::string(buf, Write(set, value, buf));
}

}  // namespace iotwin::interop
