#include "replay/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include <fmt/format.h>

#include "model/path.h"

namespace iotwin::replay {

namespace {

constexpr uint64_t kBeneath = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

int Openat2(int dirfd, const char* path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0;
  how.resolve = resolve;
  long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

int Ret(int rc) { return rc < 0 ? -errno : rc; }

// The real path of an open directory, from /proc (only for relative symlink targets).
std::string RealPathOf(int fd) {
  char link[64], buf[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

Status Sandbox::ConfineThread(const PathMapper& mapper) {
  const auto& maps = mapper.maps();
  for (size_t i = 0; i < maps.size(); i++) {
    for (size_t j = 0; j < maps.size(); j++) {
      if (i != j && model::PathIsWithin(maps[i].first, maps[j].first)) {
        return Status::Unsupported("nested --map prefixes ({} within {})", maps[i].first,
                                   maps[j].first);
      }
    }
  }
  // A private root and cwd for this thread alone (CLONE_FS), and for --map targets a private
  // mount namespace in which each target is bound at its recorded prefix inside the root.
  if (unshare(maps.empty() ? CLONE_FS : CLONE_FS | CLONE_NEWNS) != 0) {
    return Status::FromErrno(errno, "unshare");
  }
  if (!maps.empty()) {
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return Status::FromErrno(errno, "mount --make-rprivate /");
    }
    for (const auto& [from, to] : maps) {
      std::string point = MountPoint(mapper, from);
      if (mount(to.c_str(), point.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        return Status::FromErrno(errno, fmt::format("bind {} at {}", to, point));
      }
    }
  }
  if (chroot(mapper.root().c_str()) != 0) return Status::FromErrno(errno, "chroot " + mapper.root());
  if (chdir("/") != 0) return Status::FromErrno(errno, "chdir /");
  return Status::Ok();
}

std::string Sandbox::MountPoint(const PathMapper& mapper, std::string_view recorded_prefix) {
  return mapper.root() + std::string(recorded_prefix);
}

Result<std::shared_ptr<const Sandbox>> Sandbox::Open(const PathMapper& mapper) {
  auto sb = std::make_shared<Sandbox>();
  sb->mapper_ = mapper;
  for (const std::string& b : mapper.Bases()) {
    Base base;
    base.path = b;
    base.fd.Reset(open(b.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!base.fd.valid()) {
      return Status::FromErrno(errno, "open the sandbox directory " + b);
    }
    base.real = RealPathOf(base.fd.get());
    if (base.real.empty()) base.real = b;
    // Probe openat2 once: without it nothing below can be enforced.
    int probe = Openat2(base.fd.get(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0, kBeneath);
    if (probe == -ENOSYS) {
      return Status::Unsupported(
          "this kernel has no openat2(2) (Linux 5.6+): iotwin cannot confine a replay to the "
          "sandbox {} and refuses to replay", b);
    }
    if (probe < 0) return Status::FromErrno(-probe, "openat2 " + b);
    close(probe);
    sb->bases_.push_back(std::move(base));
  }
  std::stable_sort(sb->bases_.begin(), sb->bases_.end(),
                   [](const Base& a, const Base& b) { return a.path.size() > b.path.size(); });
  return std::shared_ptr<const Sandbox>(std::move(sb));
}

const Sandbox::Base* Sandbox::Locate(std::string_view target, std::string* rel) const {
  if (target.find('\0') != std::string_view::npos) return nullptr;
  for (const Base& b : bases_) {
    if (!model::PathIsWithin(target, b.path)) continue;
    std::string_view r = target.substr(b.path.size());
    while (!r.empty() && r[0] == '/') r.remove_prefix(1);
    rel->assign(r);
    // Mapped targets are normalised; anything else (a "." or ".." component, an empty one) is
    // not ours to resolve.
    size_t start = 0;
    while (start < rel->size()) {
      size_t end = rel->find('/', start);
      if (end == std::string::npos) end = rel->size();
      std::string_view c(rel->data() + start, end - start);
      if (c.empty() || c == "." || c == "..") return nullptr;
      start = end + 1;
    }
    return &b;
  }
  return nullptr;
}

bool Sandbox::Contains(std::string_view target) const {
  std::string rel;
  return Locate(target, &rel) != nullptr;
}

int Sandbox::OpenParent(std::string_view target, Parent* out) const {
  std::string rel;
  out->base = Locate(target, &rel);
  if (!out->base) return -EINVAL;
  if (rel.empty()) return -EBUSY;  // the base itself has no parent inside the sandbox
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos) {
    out->fd = out->base->fd.get();
    out->name = rel;
    return 0;
  }
  out->name = rel.substr(slash + 1);
  rel.resize(slash);
  int fd = Openat2(out->base->fd.get(), rel.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, 0, kBeneath);
  if (fd < 0) return fd;
  out->owned.Reset(fd);
  out->fd = fd;
  return 0;
}

int Sandbox::OpenFile(std::string_view target, uint64_t flags, uint64_t mode,
                      uint64_t resolve) const {
  std::string rel;
  const Base* b = Locate(target, &rel);
  if (!b) return -EINVAL;
  resolve &= ~static_cast<uint64_t>(RESOLVE_BENEATH | RESOLVE_IN_ROOT);
  return Openat2(b->fd.get(), rel.empty() ? "." : rel.c_str(), flags, mode, resolve | kBeneath);
}

int Sandbox::OpenPath(std::string_view target, bool follow) const {
  return OpenFile(target, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), 0);
}

int Sandbox::Stat(std::string_view target, bool follow, struct stat* st) const {
  UniqueFd fd(OpenPath(target, follow));
  if (!fd.valid()) return fd.Release();
  return Ret(fstatat(fd.get(), "", st, AT_EMPTY_PATH));
}

int Sandbox::Statx(std::string_view target, int flags, unsigned mask, struct statx* stx) const {
  UniqueFd fd(OpenPath(target, (flags & AT_SYMLINK_NOFOLLOW) == 0));
  if (!fd.valid()) return fd.Release();
  flags = (flags & ~AT_SYMLINK_NOFOLLOW) | AT_EMPTY_PATH;
  return Ret(static_cast<int>(syscall(SYS_statx, fd.get(), "", flags, mask, stx)));
}

int Sandbox::Kind(std::string_view target) const {
  struct stat st;
  int rc = Stat(target, false, &st);
  return rc < 0 ? rc : static_cast<int>(st.st_mode & S_IFMT);
}

int Sandbox::Mkdir(std::string_view target, mode_t mode) const {
  Parent p;
  if (int rc = OpenParent(target, &p); rc < 0) return rc == -EBUSY ? -EEXIST : rc;
  return Ret(mkdirat(p.fd, p.name.c_str(), mode));
}

int Sandbox::MakeSocketFile(std::string_view target, mode_t mode) const {
  Parent p;
  if (int rc = OpenParent(target, &p); rc < 0) return rc == -EBUSY ? -EADDRINUSE : rc;
  const int rc = Ret(mknodat(p.fd, p.name.c_str(), S_IFSOCK | (mode & 07777), 0));
  return rc == -EEXIST ? -EADDRINUSE : rc;
}

int Sandbox::Unlink(std::string_view target, int flags) const {
  Parent p;
  if (int rc = OpenParent(target, &p); rc < 0) return rc;
  return Ret(unlinkat(p.fd, p.name.c_str(), flags));
}

int Sandbox::Rename(std::string_view from, std::string_view to, unsigned flags) const {
  Parent a, b;
  if (int rc = OpenParent(from, &a); rc < 0) return rc;
  if (int rc = OpenParent(to, &b); rc < 0) return rc;
  return Ret(static_cast<int>(
      syscall(SYS_renameat2, a.fd, a.name.c_str(), b.fd, b.name.c_str(), flags)));
}

int Sandbox::Link(std::string_view from, std::string_view to, bool follow) const {
  Parent b;
  if (int rc = OpenParent(to, &b); rc < 0) return rc;
  if (follow) {
    // The source's final symlink is followed beneath the base, then linked by descriptor.
    UniqueFd src(OpenPath(from, true));
    if (!src.valid()) return src.Release();
    return Ret(linkat(src.get(), "", b.fd, b.name.c_str(), AT_EMPTY_PATH));
  }
  Parent a;
  if (int rc = OpenParent(from, &a); rc < 0) return rc;
  return Ret(linkat(a.fd, a.name.c_str(), b.fd, b.name.c_str(), 0));
}

int Sandbox::LinkDescriptor(int fd, std::string_view to, bool through_proc) const {
  Parent b;
  if (int rc = OpenParent(to, &b); rc < 0) return rc;
  if (through_proc) {
    // The replay's own descriptor's magic link, never a path of the host's tree.
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    const int rc = Ret(linkat(AT_FDCWD, self, b.fd, b.name.c_str(), AT_SYMLINK_FOLLOW));
    if (rc != -ENOENT || access("/proc/self/fd", F_OK) == 0) return rc;
  }
  return Ret(linkat(fd, "", b.fd, b.name.c_str(), AT_EMPTY_PATH));
}

int Sandbox::Symlink(std::string_view points_to, std::string_view link) const {
  Parent p;
  if (int rc = OpenParent(link, &p); rc < 0) return rc;
  std::string rel;
  const Base* tb = Locate(points_to, &rel);
  std::string text;
  if (tb == p.base) {
    // Relative from where the link's directory really is: the lexical mapped path can differ
    // when a directory on the way is itself a symlink.
    std::string dir = p.fd == p.base->fd.get() ? p.base->real : RealPathOf(p.fd);
    if (!model::PathIsWithin(dir, p.base->real)) return -EXDEV;
    std::string to = p.base->real;
    if (!rel.empty()) to += "/" + rel;
    text = model::RelativePath(dir, to);
  } else if (tb != nullptr) {
    text = std::string(points_to);  // another base: see the header
  } else {
    return -EINVAL;
  }
  int rc = Ret(symlinkat(text.c_str(), p.fd, p.name.c_str()));
  if (rc == 0) NoteLink(text);
  return rc;
}

namespace {

// Runs `body` (returning >= 0 or -errno) with the calling thread's working directory in open
// directory `dirfd`, then moves it back.
template <typename Body>
int InDirectory(int dirfd, Body body) {
  UniqueFd saved(open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!saved.valid()) return -errno;
  if (fchdir(dirfd) != 0) return -errno;
  int rc = body();
  if (fchdir(saved.get()) != 0 && rc >= 0) rc = -errno;
  return rc;
}

// Where the working directory is in the calling thread's root.
int CwdPath(std::string* out) {
  char buf[PATH_MAX];
  const char* cwd = getcwd(buf, sizeof buf);
  if (cwd == nullptr) return errno == ERANGE ? -ENAMETOOLONG : -errno;
  if (cwd[0] != '/') return -ENOENT;  // not reachable from the root
  out->assign(cwd);
  return 0;
}

// Where open directory `dirfd` is in the calling thread's root.
int CwdPathOf(int dirfd, std::string* out) {
  return InDirectory(dirfd, [out] { return CwdPath(out); });
}

// The number of ".." components a relative symlink text starts with; `rest`: where the rest
// starts.
size_t LeadingUps(std::string_view text, size_t* rest) {
  size_t ups = 0, pos = 0;
  while (text.substr(pos, 2) == ".." && (pos + 2 == text.size() || text[pos + 2] == '/')) {
    ups++;
    pos = std::min(text.size(), pos + 3);
  }
  if (rest) *rest = pos;
  return ups;
}

// Components of a normalised absolute path ("/" has none).
size_t Depth(std::string_view path) {
  return path == "/" ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

// Symlink `name` in `dirfd`, `depth` directories below its base: a text climbing above the
// base is replaced by one that stops there.
void ClampLink(int dirfd, const char* name, size_t depth) {
  char buf[PATH_MAX];
  ssize_t n = readlinkat(dirfd, name, buf, sizeof buf);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof buf)) return;
  const std::string_view text(buf, static_cast<size_t>(n));
  size_t rest;
  if (LeadingUps(text, &rest) <= depth) return;
  std::string clamped;
  for (size_t i = 0; i < depth; i++) clamped += i == 0 ? ".." : "/..";
  if (rest < text.size()) {
    if (!clamped.empty()) clamped += '/';
    clamped += text.substr(rest);
  }
  if (clamped.empty()) clamped = ".";
  // Made beside it and renamed over it: the name never points outside, nor goes missing.
  const std::string tmp = std::string(name) + ".iotwin-clamp";
  if (symlinkat(clamped.c_str(), dirfd, tmp.c_str()) != 0) {
    unlinkat(dirfd, name, 0);  // what cannot be fixed must not stay
    return;
  }
  if (renameat(dirfd, tmp.c_str(), dirfd, name) != 0) {
    unlinkat(dirfd, tmp.c_str(), 0);
    unlinkat(dirfd, name, 0);
  }
}

// Every symlink beneath directory `top` (`depth` below its base), walked without following
// any symlink or leaving its mount. Returns the entries it visited.
uint64_t ClampLinksBeneath(int top, size_t depth) {
  uint64_t visited = 0;
  std::vector<std::pair<std::string, size_t>> todo{{".", depth}};
  while (!todo.empty()) {
    std::string rel = std::move(todo.back().first);
    const size_t d = todo.back().second;
    todo.pop_back();
    int fd = Openat2(top, rel.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                     kBeneath | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
    if (fd < 0) continue;
    DIR* dir = fdopendir(fd);
    if (!dir) {
      close(fd);
      continue;
    }
    while (dirent* e = readdir(dir)) {
      const std::string_view n = e->d_name;
      if (n == "." || n == "..") continue;
      visited++;
      unsigned char type = e->d_type;
      struct stat st;
      if (type == DT_UNKNOWN && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        type = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
      }
      if (type == DT_LNK) ClampLink(fd, e->d_name, d);
      if (type == DT_DIR) todo.emplace_back(rel + "/" + e->d_name, d + 1);
    }
    closedir(dir);
  }
  return visited;
}

// The --map prefix `path` (a path in a confined root) lies under, or "/" for the root's own.
std::string_view InRootBase(const PathMapper& mapper, std::string_view path) {
  for (const auto& [from, to] : mapper.maps()) {
    if (model::PathIsWithin(path, from)) return from;
  }
  return "/";
}

}  // namespace

std::string Sandbox::InRootLinkText(std::string_view dir, std::string_view points_to) const {
  // From the root's own directories a relative text stays in the root for a walker outside too
  // (a --map prefix is a directory of the root there); from a --map target it would climb out
  // of the target.
  const std::string_view base = InRootBase(mapper_, dir);
  if (base != "/" && base != InRootBase(mapper_, points_to)) {
    return mapper_.Map(points_to);  // another base: see the header
  }
  return model::RelativePath(dir, points_to);
}

int Sandbox::SymlinkInRoot(std::string_view points_to, std::string_view link, bool at) const {
  if (points_to.find('\0') != std::string_view::npos || link.find('\0') != std::string_view::npos ||
      points_to.empty() || points_to[0] != '/' || link.empty() || link[0] != '/') {
    return -EINVAL;
  }
  const std::string normal = model::NormalizePath(link);
  if (normal == "/") return -EEXIST;
  const std::string parent(model::ParentPath(normal));
  const std::string name(model::BaseName(normal));
  UniqueFd dir(open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return -errno;
  // In that directory the final name is all that is resolved: the link lands where its text
  // was computed for, whatever renames other threads make meanwhile.
  return InDirectory(dir.get(), [&] {
    std::string real;
    if (int rc = CwdPath(&real); rc < 0) return rc;
    const std::string text = InRootLinkText(real, model::NormalizePath(points_to));
#ifdef SYS_symlink
    int rc = at ? Ret(symlinkat(text.c_str(), dir.get(), name.c_str()))
                : Ret(static_cast<int>(syscall(SYS_symlink, text.c_str(), name.c_str())));
#else
    int rc = Ret(symlinkat(text.c_str(), at ? dir.get() : AT_FDCWD, name.c_str()));
#endif
    if (rc == 0) NoteLink(text);
    return rc;
  });
}

void Sandbox::NoteLink(std::string_view text) const {
  if (LeadingUps(text, nullptr) > 0) climbing_links_.store(true, std::memory_order_relaxed);
}

bool Sandbox::MayGiveNewNames() const {
  return !climbing_links_.load(std::memory_order_relaxed) ||
         walked_.load(std::memory_order_relaxed) < kMaxClampWalk;
}

void Sandbox::ClampMovedLinks(std::string_view name, bool in_root) const {
  if (!climbing_links_.load(std::memory_order_relaxed) || name.find('\0') != std::string_view::npos) {
    return;
  }
  // The directory holding `name`, and how deep it really is below its base.
  UniqueFd dir;
  std::string real, leaf;
  std::string_view base;
  if (in_root) {
    const std::string normal = model::NormalizePath(name);
    if (normal == "/") return;
    leaf = model::BaseName(normal);
    dir.Reset(open(std::string(model::ParentPath(normal)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid() || CwdPathOf(dir.get(), &real) < 0) return;
    base = InRootBase(mapper_, real);
  } else {
    Parent p;
    if (OpenParent(name, &p) < 0) return;
    leaf = p.name;
    dir.Reset(fcntl(p.fd, F_DUPFD_CLOEXEC, 0));
    real = p.fd == p.base->fd.get() ? p.base->real : RealPathOf(p.fd);
    base = p.base->real;
  }
  if (!dir.valid() || !model::PathIsWithin(real, base)) return;
  const size_t depth = Depth(real) - Depth(base);
  struct stat st;
  if (fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    ClampLink(dir.get(), leaf.c_str(), depth);
  } else if (S_ISDIR(st.st_mode)) {
    UniqueFd top(Openat2(dir.get(), leaf.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                         kBeneath | RESOLVE_NO_SYMLINKS));
    if (top.valid()) {
      walked_.fetch_add(ClampLinksBeneath(top.get(), depth + 1), std::memory_order_relaxed);
    }
  }
}

int Sandbox::Truncate(std::string_view target, int64_t length) const {
  UniqueFd fd(OpenFile(target, O_WRONLY | O_CLOEXEC, 0));
  if (!fd.valid()) return fd.Release();
  return Ret(ftruncate(fd.get(), static_cast<off_t>(length)));
}

int Sandbox::Chdir(std::string_view target) const {
  UniqueFd fd(OpenFile(target, O_PATH | O_DIRECTORY | O_CLOEXEC, 0));
  if (!fd.valid()) return fd.Release();
  return Ret(fchdir(fd.get()));
}

}  // namespace iotwin::replay
