#include "replay/path_mapper.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/fd.h"
#include "model/path.h"

namespace iotwin::replay {

using model::NormalizePath;
using model::PathIsWithin;

Result<PathMapper> PathMapper::Create(const std::string& root,
                                      const std::vector<std::pair<std::string, std::string>>& maps) {
  PathMapper m;
  if (root.empty() || root[0] != '/') {
    return Status::Invalid("replay root '{}' must be an absolute path", root);
  }
  m.root_ = NormalizePath(root);
  if (m.root_ == "/") return Status::Invalid("replay root cannot be '/'");
  for (const auto& [from, to] : maps) {
    if (from.empty() || from[0] != '/' || to.empty() || to[0] != '/') {
      return Status::Invalid("--map {}={}: both prefixes must be absolute", from, to);
    }
    std::string nt = NormalizePath(to);
    if (nt == "/") return Status::Invalid("--map {}={}: the target cannot be '/'", from, to);
    m.maps_.emplace_back(NormalizePath(from), nt);
  }
  std::stable_sort(m.maps_.begin(), m.maps_.end(), [](const auto& a, const auto& b) {
    return a.first.size() > b.first.size();
  });
  return m;
}

std::string PathMapper::Map(std::string_view recorded) const {
  for (const auto& [from, to] : maps_) {
    if (PathIsWithin(recorded, from)) return model::ReplacePrefix(recorded, from, to);
  }
  return model::ReplacePrefix(recorded, "/", root_);
}

const std::string& PathMapper::BaseOf(std::string_view recorded) const {
  for (const auto& [from, to] : maps_) {
    if (PathIsWithin(recorded, from)) return to;
  }
  return root_;
}

std::string PathMapper::MapSymlinkTarget(std::string_view link, std::string_view target) const {
  // Always absolute: a relative target with ".." could climb out of the sandbox when a directory
  // on the link's path is itself a symlink; an absolute mapped target only crosses directories
  // of the sandbox and symlinks the replay made the same way.
  return Map(model::ResolvePath(model::ParentPath(link), target));
}

PathMapper PathMapper::WithSuffix(const std::string& suffix) const {
  PathMapper m = *this;
  m.root_ += suffix;
  for (auto& [from, to] : m.maps_) to += suffix;
  return m;
}

std::vector<std::string> PathMapper::Bases() const {
  std::vector<std::string> out{root_};
  for (const auto& [from, to] : maps_) {
    if (std::find(out.begin(), out.end(), to) == out.end()) out.push_back(to);
  }
  return out;
}

Status PathMapper::CheckBeneath(const std::string& target) const {
  // Find the base this target lies under.
  std::string found;
  for (const auto& b : Bases()) {
    if (PathIsWithin(target, b) && b.size() > found.size()) found = b;
  }
  if (found.empty()) return Status::Internal("'{}' is not under the sandbox", target);
  const std::string* base = &found;
  UniqueFd base_fd(open(base->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!base_fd.valid()) {
    if (errno == ENOENT) return Status::Ok();  // created by prepare
    return Status::FromErrno(errno, "open " + *base);
  }
  // Walk up from the full path to the longest prefix that exists.
  std::string rel = target.size() > base->size() ? target.substr(base->size() + 1) : ".";
  while (true) {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, base_fd.get(), rel.c_str(), &how, sizeof how);
    if (fd >= 0) {
      close(static_cast<int>(fd));
      return Status::Ok();
    }
    int err = errno;
    if (err == EXDEV || err == ELOOP) {
      return Status::Permission(
          "'{}' leaves the sandbox '{}' through a symlink (openat2 RESOLVE_BENEATH: {}); refusing "
          "to replay into it", target, *base, err == EXDEV ? "EXDEV" : "ELOOP");
    }
    if (err == ENOSYS) return Status::Ok();  // kernel without openat2: lexical safety only
    if (err != ENOENT && err != ENOTDIR) return Status::FromErrno(err, "openat2 " + target);
    size_t slash = rel.rfind('/');
    if (slash == std::string::npos) return Status::Ok();
    rel.resize(slash);
  }
}

}  // namespace iotwin::replay
