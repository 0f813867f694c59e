// Snapshots of a running process from /proc, taken when capture attaches to it (`--pid`): its
// open descriptors, file mappings and working directory, so that later calls on descriptors it
// opened before capture started still resolve to files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace iotwin::capture {

struct FdEntry {
  int fd = -1;
  std::string path;    // readlink of /proc/PID/fd/N ("pipe:[123]", "/data/x (deleted)", ...)
  uint64_t pos = 0;    // fdinfo pos
  uint32_t flags = 0;  // fdinfo flags (open flags)
  uint64_t ino = 0;
  uint32_t dev = 0;  // kernel dev_t (major << 20 | minor)
  uint64_t size = 0;
  uint16_t ftype = 0;  // S_IFMT >> 12
};

struct MapEntry {
  uint64_t start = 0, end = 0, pgoff = 0;  // pgoff in bytes
  uint64_t ino = 0;
  uint32_t dev = 0;    // kernel dev_t
  uint32_t prot = 0;   // PROT_*
  uint32_t flags = 0;  // MAP_SHARED / MAP_PRIVATE
  std::string path;
};

// Errors: NotFound when the process does not exist (or exited meanwhile).
Result<std::vector<FdEntry>> SnapshotFds(pid_t pid);
Result<std::vector<MapEntry>> SnapshotFileMaps(pid_t pid);
Result<std::string> ProcessCwd(pid_t pid);
Result<std::string> ProcessComm(pid_t pid);
// True while the process runs (false once it is a zombie or gone).
bool ProcessExists(pid_t pid);

// The process a thread id belongs to (the id itself for a process), or NotFound.
Result<pid_t> ThreadGroupOf(pid_t tid);

// Parses one line of /proc/PID/maps; false for anonymous mappings and malformed lines.
bool ParseMapsLine(const std::string& line, MapEntry* out);

// User-space dev_t (as in struct stat) -> the kernel's internal encoding used in records.
uint32_t KernelDev(uint64_t user_dev);

}  // namespace iotwin::capture
