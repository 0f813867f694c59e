// The system calls the syscall layer captures: this architecture's syscall numbers (from
// <sys/syscall.h>) mapped to the architecture-neutral IOT_OP_* codes of the trace format.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace iotwin::capture {

struct SyscallOp {
  long nr;      // SYS_xxx of this architecture
  uint16_t op;  // IOT_OP_*
};

// Every captured syscall that exists on this architecture (e.g. no open/stat on arm64).
std::span<const SyscallOp> CapturedSyscalls();

// A table indexed by syscall number giving the IOT_OP_* (0: not captured), `size` entries; the
// BPF program consults it first thing on every system call.
std::vector<uint8_t> SyscallNrToOp(size_t size);

}  // namespace iotwin::capture
