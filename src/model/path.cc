#include "model/path.h"

#include <charconv>
#include <vector>

namespace iotwin::model {

std::string NormalizePath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') i++;
    size_t j = i;
    while (j < path.size() && path[j] != '/') j++;
    std::string_view comp = path.substr(i, j - i);
    i = j;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(comp);
  }
  if (parts.empty()) return "/";
  std::string out;
  for (auto c : parts) {
    out += '/';
    out += c;
  }
  return out;
}

std::string ResolvePath(std::string_view base, std::string_view path) {
  if (!path.empty() && path[0] == '/') return NormalizePath(path);
  std::string joined(base);
  joined += '/';
  joined += path;
  return NormalizePath(joined);
}

std::string_view ParentPath(std::string_view p) {
  size_t slash = p.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return p.substr(0, slash);
}

std::string_view BaseName(std::string_view p) {
  size_t slash = p.rfind('/');
  if (slash == std::string_view::npos) return p;
  return p.substr(slash + 1);
}

bool PathIsWithin(std::string_view path, std::string_view prefix) {
  if (prefix == "/") return !path.empty() && path[0] == '/';
  if (path.size() < prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

std::string ReplacePrefix(std::string_view path, std::string_view prefix,
                          std::string_view replacement) {
  std::string_view rest = prefix == "/" ? path : path.substr(prefix.size());
  if (rest == "/") rest = {};
  while (replacement.size() > 1 && replacement.back() == '/') replacement.remove_suffix(1);
  if (replacement == "/" && !rest.empty()) replacement = {};
  std::string out;
  out.reserve(replacement.size() + rest.size() + 1);
  out.append(replacement.data(), replacement.size());
  out.append(rest.data(), rest.size());
  if (out.empty()) out.push_back('/');
  return out;
}

bool IsPseudoFsPath(std::string_view p) {
  if (PathIsWithin(p, "/proc") || PathIsWithin(p, "/sys")) return true;
  if (PathIsWithin(p, "/dev")) return !PathIsWithin(p, "/dev/shm");
  return false;
}

FileKind ClassifyFile(uint16_t ftype, std::string_view normalized, bool types_recorded) {
  switch (ftype) {
    case 1: return FileKind::kPipe;
    case 2: return FileKind::kCharDevice;
    case 6: return FileKind::kStorage;  // a block device, wherever its node is
    case 12: return FileKind::kSocket;
    default: break;
  }
  if (!normalized.empty() && normalized[0] == '/' && IsPseudoFsPath(normalized))
    return FileKind::kPseudoFs;
  // Anonymous inodes have no path; a file known by an absolute path whose type no record gave
  // (a mapping held at attach, a name only unlinked or renamed) is a file.
  const bool has_path = !normalized.empty() && normalized[0] == '/';
  if (ftype == 0 && types_recorded && !has_path) return FileKind::kAnonInode;
  return FileKind::kStorage;
}

std::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kStorage: return "storage";
    case FileKind::kPipe: return "pipe";
    case FileKind::kSocket: return "socket";
    case FileKind::kCharDevice: return "char device";
    case FileKind::kAnonInode: return "anon inode";
    case FileKind::kPseudoFs: return "pseudo fs";
  }
  return "storage";
}

std::string_view FileKindKey(FileKind kind) {
  switch (kind) {
    case FileKind::kCharDevice: return "char_device";
    case FileKind::kAnonInode: return "anon_inode";
    case FileKind::kPseudoFs: return "pseudo_fs";
    default: return FileKindName(kind);
  }
}

std::string RelativePath(std::string_view from, std::string_view to) {
  // Longest common prefix ending at a component boundary.
  size_t common = 0, i = 0;
  while (i < from.size() && i < to.size() && from[i] == to[i]) {
    i++;
    if ((i == from.size() || from[i] == '/') && (i == to.size() || to[i] == '/')) common = i;
  }
  if (to.substr(0, 1) != "/") common = 0;
  if (from == "/") common = 1;  // the root has no component to climb out of
  std::string out;
  for (size_t k = common; k < from.size(); k++) {
    if (from[k] == '/') out += out.empty() ? ".." : "/..";
  }
  std::string_view rest = to.substr(common);
  if (!rest.empty() && rest[0] == '/') rest.remove_prefix(1);
  if (!rest.empty()) {
    if (!out.empty()) out += '/';
    out += rest;
  }
  return out.empty() ? "." : out;
}

int ProcSelfFdNumber(std::string_view path, uint32_t tgid) {
  constexpr std::string_view kProc = "/proc/", kFd = "/fd/";
  if (path.substr(0, kProc.size()) != kProc) return -1;
  path.remove_prefix(kProc.size());
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos) return -1;
  const std::string_view who = path.substr(0, slash);
  if (who != "self" && who != "thread-self" && who != std::to_string(tgid)) return -1;
  path.remove_prefix(slash);
  if (path.substr(0, kFd.size()) != kFd) return -1;
  path.remove_prefix(kFd.size());
  int fd = -1;
  auto [end, ec] = std::from_chars(path.data(), path.data() + path.size(), fd);
  if (ec != std::errc() || end != path.data() + path.size() || fd < 0) return -1;
  return fd;
}

}  // namespace iotwin::model
