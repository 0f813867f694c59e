#include "interop/fd_tables.h"

#include <fcntl.h>

namespace iotwin::interop {

std::shared_ptr<OpenFile> FdTables::Get(uint32_t tgid, int32_t fd) const {
  auto t = tables_.find(tgid);
  if (t == tables_.end()) return nullptr;
  auto f = t->second.find(fd);
  return f == t->second.end() ? nullptr : f->second;
}

void FdTables::Set(uint32_t tgid, int32_t fd, std::shared_ptr<OpenFile> file) {
  if (fd < 0) return;
  tables_[tgid][fd] = std::move(file);
}

void FdTables::Close(uint32_t tgid, int32_t fd) {
  auto t = tables_.find(tgid);
  if (t != tables_.end()) t->second.erase(fd);
}

void FdTables::CloseRange(uint32_t tgid, uint32_t first, uint32_t last) {
  auto t = tables_.find(tgid);
  if (t == tables_.end()) return;
  for (auto it = t->second.begin(); it != t->second.end();) {
    auto fd = static_cast<uint32_t>(it->first);
    if (fd >= first && fd <= last) {
      it = t->second.erase(it);
    } else {
      ++it;
    }
  }
}

void FdTables::Dup(uint32_t tgid, int32_t oldfd, int32_t newfd) {
  if (newfd < 0 || oldfd == newfd) return;
  auto f = Get(tgid, oldfd);
  if (f) {
    tables_[tgid][newfd] = f;
  } else {
    Close(tgid, newfd);
  }
}

void FdTables::Fork(uint32_t parent_tgid, uint32_t child_tgid) {
  if (parent_tgid == child_tgid) return;
  auto t = tables_.find(parent_tgid);
  if (t == tables_.end()) {
    tables_.erase(child_tgid);
    return;
  }
  auto copy = t->second;
  tables_[child_tgid] = std::move(copy);
}

void FdTables::Exec(uint32_t tgid) {
  auto t = tables_.find(tgid);
  if (t == tables_.end()) return;
  for (auto it = t->second.begin(); it != t->second.end();) {
    if (it->second->flags & O_CLOEXEC) {
      it = t->second.erase(it);
    } else {
      ++it;
    }
  }
}

void FdTables::Drop(uint32_t tgid) { tables_.erase(tgid); }

void FdTables::Rename(uint32_t from, uint32_t to) {
  auto t = tables_.find(from);
  if (t == tables_.end() || from == to) return;
  auto moved = std::move(t->second);
  tables_.erase(t);
  tables_[to] = std::move(moved);
}

bool FdTables::HasPath(uint32_t tgid, std::string_view path) const {
  auto t = tables_.find(tgid);
  if (t == tables_.end()) return false;
  for (const auto& [fd, f] : t->second) {
    if (f->path == path) return true;
  }
  return false;
}

size_t FdTables::open_count() const {
  size_t n = 0;
  for (const auto& [tgid, t] : tables_) n += t.size();
  return n;
}

}  // namespace iotwin::interop
