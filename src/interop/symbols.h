// Names of kernel constants as strace prints them (O_*, AT_*, SEEK_*, MAP_*, PROT_*, MS_*, MADV_*,
// POSIX_FADV_*, FALLOC_FL_*, RWF_*, F_*, CLONE_*, RENAME_*, RESOLVE_*, SYNC_FILE_RANGE_*, signals)
// and errno names, with their Linux values.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace iotwin::interop {

// Value of one constant name ("O_CREAT" -> 0100), from <fcntl.h> and friends.
std::optional<uint64_t> SymbolValue(std::string_view name);

// Value of an expression as strace prints flag sets: "O_RDWR|O_CREAT|0x80000", a number
// (decimal, 0x hex, 0 octal) or a single name. Unknown names are skipped and counted in
// *unknown when given. Returns nullopt when nothing at all could be read.
std::optional<uint64_t> FlagsValue(std::string_view expr, int* unknown = nullptr);

// errno value of "ENOENT" (2); also the kernel-internal ERESTART* codes strace shows.
std::optional<int> ErrnoValue(std::string_view name);

// Signal number of "SIGKILL" (9).
std::optional<int> SignalValue(std::string_view name);

}  // namespace iotwin::interop
