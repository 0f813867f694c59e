#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <utility>

namespace iotwin {

namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Whether `entry` (a symlink, a FIFO, a device) may be followed or written into: this user's or
// root's. Anyone else's may have been planted to redirect the output.
bool TrustedOwner(const struct stat& entry) {
  return entry.st_uid == ::geteuid() || entry.st_uid == 0;
}

// Descriptor N of a name /proc/self/fd/N (as `record -o -` passes standard output), or -1.
int OwnDescriptor(const std::string& path) {
  constexpr std::string_view kPrefix = "/proc/self/fd/";
  if (path.size() <= kPrefix.size() || path.size() > kPrefix.size() + 9 ||
      path.compare(0, kPrefix.size(), kPrefix) != 0) {
    return -1;
  }
  int fd = 0;
  for (size_t i = kPrefix.size(); i < path.size(); i++) {
    if (path[i] < '0' || path[i] > '9') return -1;
    fd = fd * 10 + (path[i] - '0');
  }
  return fd;
}

// Where the output for `path` goes: `*name` is the name to replace (or to open in place when
// `*in_place`), after following the symlinks the rule trusts.
Status Resolve(const std::string& path, std::string* name, bool* in_place) {
  std::string p = path;
  for (int hops = 0; hops < 40; hops++) {
    if (OwnDescriptor(p) >= 0) {  // `-o -`, or /dev/stdout -> /proc/self/fd/1
      *name = p;
      *in_place = true;
      return Status::Ok();
    }
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) return Status::FromErrno(errno, "cannot use " + p);
      *name = p;
      *in_place = false;
      return Status::Ok();
    }
    if (S_ISDIR(st.st_mode)) return Status::Invalid("{} is a directory", p);
    if (S_ISREG(st.st_mode)) {
      *name = p;
      *in_place = false;
      return Status::Ok();
    }
    if (!TrustedOwner(st)) {  // planted: replaced by the rename, never followed or opened
      *name = p;
      *in_place = false;
      return Status::Ok();
    }
    if (!S_ISLNK(st.st_mode)) {  // a FIFO, a device or a socket
      *name = p;
      *in_place = true;
      return Status::Ok();
    }
    // Followed one link at a time, so that each one's owner is checked.
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) return Status::FromErrno(errno, "cannot read symlink " + p);
    const std::string link(buf, static_cast<size_t>(n));
    p = !link.empty() && link[0] == '/' ? link : DirName(p) + "/" + link;
  }
  return Status::FromErrno(ELOOP, "cannot use " + path);
}

}  // namespace

OutputFile::OutputFile(OutputFile&& o) noexcept
    : name_(std::move(o.name_)),
      temp_(std::exchange(o.temp_, {})),
      published_(std::exchange(o.published_, false)),
      fd_(std::move(o.fd_)) {}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    Discard();
    name_ = std::move(o.name_);
    temp_ = std::exchange(o.temp_, {});
    published_ = std::exchange(o.published_, false);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

OutputFile::~OutputFile() { Discard(); }

Result<OutputFile> OutputFile::Create(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::Invalid("no output file name");
  OutputFile out;
  bool in_place = false;
  IOTWIN_RETURN_IF_ERROR(Resolve(path, &out.name_, &in_place));
  if (in_place && OwnDescriptor(out.name_) >= 0) {
    // One of this process's descriptors, which no one else can name: opened again (a new
    // offset) and written in place from its start.
    out.fd_.Reset(::open(out.name_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    if (!out.fd_.valid()) return Status::FromErrno(errno, "cannot open " + out.name_);
    return out;
  }
  if (in_place) {
    // No O_CREAT, no symlink: an existing FIFO or device only; checked again on the descriptor.
    out.fd_.Reset(::open(out.name_.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!out.fd_.valid()) return Status::FromErrno(errno, "cannot open " + out.name_);
    struct stat st;
    if (::fstat(out.fd_.get(), &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
      return Status::Invalid("{} changed while it was opened; refusing to write into it",
                             out.name_);
    }
    return out;
  }
  const std::string dir = DirName(out.name_), base = BaseName(out.name_);
  std::string tried;
  for (int attempt = 0; attempt < 100; attempt++) {
    tried = fmt::format("{}/.{}.partial-{}-{}", dir, base, ::getpid(), attempt);
    out.fd_.Reset(::open(tried.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         mode));
    if (out.fd_.valid()) {
      out.temp_ = tried;
      return out;
    }
    if (errno != EEXIST) break;
  }
  return Status::FromErrno(errno, "cannot create " + tried);
}

Result<OutputFile> OutputFile::ForDescriptor(int fd, std::string name) {
  OutputFile out;
  out.name_ = std::move(name);
  out.fd_.Reset(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!out.fd_.valid()) return Status::FromErrno(errno, "cannot use " + out.name_);
  return out;
}

Status OutputFile::Write(const void* data, size_t size) {
  if (!fd_.valid()) return Status::Internal("{} written while not open", name_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_.get(), p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot write " + written_path());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status OutputFile::Publish() {
  if (!fd_.valid()) return Status::Internal("{} published while not open", name_);
  if (temp_.empty()) return Status::Ok();
  if (::rename(temp_.c_str(), name_.c_str()) != 0) {
    return Status::FromErrno(errno, "cannot rename " + temp_ + " to " + name_);
  }
  temp_.clear();
  published_ = true;
  return Status::Ok();
}

Status OutputFile::Commit() {
  if (!fd_.valid()) return Status::Internal("{} committed while not open", name_);
  if ((!temp_.empty() || published_) && ::fsync(fd_.get()) != 0 && errno != EINVAL) {
    return Status::FromErrno(errno, "cannot write " + written_path());
  }
  published_ = false;
  if (::close(fd_.Release()) != 0) return Status::FromErrno(errno, "cannot write " + written_path());
  if (temp_.empty()) return Status::Ok();
  if (::rename(temp_.c_str(), name_.c_str()) != 0) {
    return Status::FromErrno(errno, "cannot rename " + temp_ + " to " + name_);
  }
  temp_.clear();
  return Status::Ok();
}

void OutputFile::Discard() {
  struct stat by_fd, by_name;
  if (published_ && fd_.valid() && ::fstat(fd_.get(), &by_fd) == 0 &&
      ::lstat(name_.c_str(), &by_name) == 0 && by_fd.st_dev == by_name.st_dev &&
      by_fd.st_ino == by_name.st_ino) {
    ::unlink(name_.c_str());
  }
  published_ = false;
  fd_.Reset();
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

}  // namespace iotwin
