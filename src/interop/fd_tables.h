// FdTables: per-process descriptor tables rebuilt from a stream of system calls, with shared open
// file descriptions (dup and fork share the file position, as in the kernel).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace iotwin::interop {

struct OpenFile {
  std::string path;  // resolved path where known
  uint64_t pos = 0;  // file position
  bool pos_known = false;
  uint32_t flags = 0;  // open flags
  uint64_t ino = 0;
  uint32_t dev = 0;
  uint16_t ftype = 0;  // S_IFMT >> 12, 0 unknown
};

class FdTables {
 public:
  std::shared_ptr<OpenFile> Get(uint32_t tgid, int32_t fd) const;
  void Set(uint32_t tgid, int32_t fd, std::shared_ptr<OpenFile> file);
  void Close(uint32_t tgid, int32_t fd);
  void CloseRange(uint32_t tgid, uint32_t first, uint32_t last);
  // newfd refers to oldfd's open file description; a no-op when oldfd is unknown (newfd is then
  // closed, since whatever it was is gone).
  void Dup(uint32_t tgid, int32_t oldfd, int32_t newfd);
  // The child starts with a copy of the parent's table (sharing open file descriptions).
  void Fork(uint32_t parent_tgid, uint32_t child_tgid);
  // exec closes the descriptors opened with O_CLOEXEC.
  void Exec(uint32_t tgid);
  void Drop(uint32_t tgid);
  // Moves a table to another process id (used when a placeholder pid is resolved).
  void Rename(uint32_t from, uint32_t to);
  size_t open_count() const;
  // Whether any descriptor of the process refers to a file with this path.
  bool HasPath(uint32_t tgid, std::string_view path) const;

 private:
  std::unordered_map<uint32_t, std::unordered_map<int32_t, std::shared_ptr<OpenFile>>> tables_;
};

}  // namespace iotwin::interop
