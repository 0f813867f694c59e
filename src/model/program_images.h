// Program images: the executable and the dynamic loader that execve maps into a process. No
// system call names them and no mmap maps them, so a trace knows them only by inode, through
// their page faults, some of which execute. A data scope leaves them out
// (Scope::AdmitsProgramImages); the report (streaming) and the trace model both ask this class,
// so they agree on which files these are.
#pragma once

#include <cstdint>
#include <set>
#include <utility>

#include "format/records.h"

namespace iotwin::model {

class ProgramImages {
 public:
  using Key = std::pair<uint32_t, uint64_t>;  // (dev, ino)

  // Any record of a trace, whole (the reader's size checks done).
  void Add(const iot_rec_hdr* rec) {
    switch (rec->type) {
      case IOT_REC_PAGE_FAULT: {
        const auto* f = reinterpret_cast<const iot_page_fault*>(rec);
        if ((f->flags & IOT_PFF_EXEC) && f->ino) executed_.insert({f->dev, f->ino});
        break;
      }
      case IOT_REC_SYSCALL: {
        const auto* s = reinterpret_cast<const iot_syscall*>(rec);
        if (s->ino) named_.insert({s->dev, s->ino});
        break;
      }
      case IOT_REC_FD_SNAPSHOT: {
        const auto* s = reinterpret_cast<const iot_fd_snapshot*>(rec);
        if (s->ino) named_.insert({s->dev, s->ino});
        break;
      }
      case IOT_REC_MAP_SNAPSHOT: {
        const auto* s = reinterpret_cast<const iot_map_snapshot*>(rec);
        if (s->ino) named_.insert({s->dev, s->ino});
        break;
      }
      default:
        break;
    }
  }

  // The files that executed and were never named.
  std::set<Key> Images() const {
    std::set<Key> out;
    for (const Key& k : executed_)
      if (!named_.contains(k)) out.insert(k);
    return out;
  }

 private:
  std::set<Key> executed_, named_;
};

}  // namespace iotwin::model
