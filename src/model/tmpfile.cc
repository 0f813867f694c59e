// ModelBuilder: files made with O_TMPFILE. open(dir, O_TMPFILE | ...) makes an unnamed regular
// file in directory `dir`; the descriptor's I/O is that file's, not the directory's. The file
// gets names later through linkat(fd, "", ..., AT_EMPTY_PATH) or, without CAP_DAC_READ_SEARCH,
// linkat(AT_FDCWD, "/proc/self/fd/N", ..., AT_SYMLINK_FOLLOW).
#include <fcntl.h>

#include "model/model_builder_impl.h"
#include "model/op_fields.h"
#include "model/path.h"

namespace iotwin::model {

bool ModelBuilder::Impl::ProcFdLink(const SyscallStep& s, int* fd) {
  const iot_syscall& sc = s.sc;
  const OpInfo& info = GetOpInfo(sc.op);
  // linkat (the link call that takes flags) following /proc/self/fd/N.
  if (info.names != NameEffect::kLinks || info.path_base != PathBase::kFd ||
      !(sc.flags & AT_SYMLINK_FOLLOW) || (sc.flags & AT_EMPTY_PATH)) {
    return false;
  }
  if (sc.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT)) return false;
  std::optional<std::string_view> path = String(sc.path_id);
  if (!path) return false;
  const int n = ProcSelfFdNumber(*path, sc.tgid);
  if (n < 0 || OfdOf(s.proc, n) == kNone) return false;  // an unknown descriptor: as recorded
  *fd = n;
  return true;
}

uint32_t ModelBuilder::Impl::TmpFileIn(PathId dir, const iot_syscall& sc) {
  Exists(dir, true, 0, nullptr);  // the recorded identity is the new file's, not the directory's
  const auto f = static_cast<uint32_t>(m->files_.size());
  FileInfo fi;
  fi.path = kNone;  // until a link names it
  fi.origin = FileOrigin::kCreated;
  fi.ftype = sc.ftype != 0 ? sc.ftype : kFtypeRegular;
  fi.ino = sc.ino;
  fi.dev = sc.dev;
  m->files_.push_back(fi);
  file_kind.emplace_back();
  return f;
}

}  // namespace iotwin::model
