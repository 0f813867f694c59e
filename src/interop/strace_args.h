// Decoders of strace's printed arguments: integers and flag expressions, offset pointers
// ("[4096]", "[0 => 4096]"), close_range bounds, fcntl commands and record locks, flock
// operations, iovec arrays, stat structures, iocb opcodes. Each takes the text of one argument
// (or the split argument list) and answers a value, never touching importer state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "iotwin_abi.h"

namespace iotwin::interop::strace {

using Args = std::vector<std::string_view>;

// Argument `i` as an integer: a number, NULL (0), "[N]" / "[N => M]" (the value at entry), or
// a flag expression; nullopt when none of those.
std::optional<int64_t> IntArg(const Args& a, size_t i);
// IntArg, 0 when absent or unreadable.
uint64_t UArg(const Args& a, size_t i);
// An offset pointer argument (copy_file_range, splice, sendfile): the offset at entry of "[N]" or
// "[N => M]", kNoOffset (UINT64_MAX) for NULL, as the capture records it.
uint64_t OffsetPointerArg(const Args& a, size_t i);
// A flag expression ("O_RDONLY|O_CLOEXEC"), 0 when absent or unreadable.
uint32_t FlagsArg(const Args& a, size_t i);
// A close_range bound: strace prints it unsigned, or (older versions) as a descriptor, -y
// decorated and the maximum as -1. nullopt when it is no 32-bit value.
std::optional<uint32_t> RangeBound(const Args& a, size_t i);

// fcntl's command: the 32-bit ABI's *LK64 spellings are the same requests.
uint32_t FcntlCommand(std::string_view text);
bool IsLockCommand(uint32_t cmd);
// Lock types (F_RDLCK ...) and flock operations (LOCK_EX|LOCK_NB ...), or a number.
std::optional<uint64_t> LockSymbols(std::string_view expr);
// "{l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}" into the record's lock fields
// (op_fields.h: type in flags, whence in aux, start in offset, length in length); sc->mode
// holds the command. A struct strace could not read (an address) leaves the type unknown (-1).
// For F_GETLK strace prints the struct after the call: with no conflict its type is F_UNLCK,
// which no request can be, so the request is taken as a write lock's. Counts in `counters`.
void LockRequest(std::string_view arg, iot_syscall* sc, std::map<std::string, uint64_t>* counters);

// Sum of iov_len in "[{iov_base=..., iov_len=4096}, ...]" (saturating); *lens gets each
// length. *complete is false when strace left elements out: "[...]" (-s 0) or a trailing
// "..." (more elements than -s allows).
uint64_t IovTotal(std::string_view iov, std::vector<uint64_t>* lens, bool* complete);

// The file type and size strace printed in a stat structure ({st_mode=S_IFDIR|0755,
// st_size=4096, ...}, or stx_mode/stx_size for statx): a directory type is what tells a replay
// that "/" or a package directory is not a file. Type as DT_* (S_IF* >> 12), 0 when not shown.
void StatFields(std::string_view stat_text, iot_syscall* sc);

// An iocb's opcode as strace prints it: IOCB_CMD_<name> by the op table's libaio names, or a
// number; 255 (no opcode) for anything else.
uint8_t LibaioOpcode(std::string_view text);

// The identity the importer gives a file strace names (no inode numbers in its output): a hash
// of its -y path, never 0.
uint64_t PathIdentity(std::string_view target);
std::string Basename(std::string_view path);

}  // namespace iotwin::interop::strace
