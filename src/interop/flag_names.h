// Flag words and enumerated arguments of recorded calls as the names strace prints
// ("O_WRONLY|O_CREAT|O_TRUNC", "PROT_READ|PROT_WRITE", "POSIX_FADV_DONTNEED"), for exports that
// show a raw value next to its meaning. The value of each name comes from interop/symbols.h
// (the table the strace importer parses with); this file says which names make up each flag word
// and which record field holds which word (docs/trace-format.md, "Per-op use of the argument
// fields").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iotwin::interop {

enum class FlagSet : uint8_t {
  kNone,
  kOpen,           // O_* (access mode always named)
  kCloexec,        // dup3: O_CLOEXEC alone
  kAt,             // AT_*
  kProt,           // PROT_* (0: PROT_NONE)
  kMap,            // MAP_* (the mapping type always named)
  kMsync,          // MS_*
  kMremap,         // MREMAP_*
  kFalloc,         // FALLOC_FL_*
  kRwf,            // RWF_*
  kSyncFileRange,  // SYNC_FILE_RANGE_*
  kRename,         // RENAME_*
  kResolve,        // RESOLVE_*
  kCloseRange,     // CLOSE_RANGE_*
  // Enumerations: one name per value.
  kWhence,     // SEEK_*
  kFadvise,    // POSIX_FADV_*
  kMadvise,    // MADV_*
  kFcntlCmd,   // F_*
};

// Which flag word each scalar field of a SYSCALL record holds for op `op` (kNone: none).
struct SyscallFlagSets {
  FlagSet aux = FlagSet::kNone;
  FlagSet flags = FlagSet::kNone;
  FlagSet mode = FlagSet::kNone;
};
SyscallFlagSets SyscallFlagSetsOf(uint16_t op);

// Decodes values of the trace's machine. Open flags differ between architectures: the caller
// gives the trace's O_DIRECT and O_DIRECTORY (model::TraceState knows them per architecture);
// where they are not the x86-64 ones, O_NOFOLLOW and O_LARGEFILE (which move with them) are
// left as a number rather than named wrongly.
class FlagNames {
 public:
  FlagNames(uint32_t o_direct, uint32_t o_directory);

  // The longest text Write produces for any value.
  static constexpr size_t kMaxLength = 1024;

  // Writes the names of `value` in `set` at `out` (room for kMaxLength) and returns the end.
  // Names are joined by '|'; bits without a name follow as one hex number ("0x80000000"). A
  // bit set of 0 writes nothing (except kOpen, kProt and kMap, whose 0 has a name); an
  // enumerated value without a name is written in decimal. The text holds only [A-Z0-9_|x],
  // so it needs no quoting in CSV or JSON.
  char* Write(FlagSet set, uint64_t value, char* out) const;
  // The same as a string (tests, slow paths).
  std::string Text(FlagSet set, uint64_t value) const;

 private:
  struct Name {
    uint64_t bits;
    std::string_view name;
  };
  struct Table {
    bool enumeration = false;
    Name names[40];
    size_t count = 0;
  };
  void Add(FlagSet set, std::string_view name);
  void AddValue(FlagSet set, uint64_t bits, std::string_view name);
  Table tables_[static_cast<size_t>(FlagSet::kFcntlCmd) + 1];
};

}  // namespace iotwin::interop
