#include "capture/proc_snapshot.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace iotwin::capture {
namespace {

std::string ProcPath(pid_t pid, const std::string& rest) {
  return "/proc/" + std::to_string(pid) + "/" + rest;
}

Result<std::string> ReadLink(const std::string& path) {
  std::string buf(4096, '\0');
  ssize_t n = readlink(path.c_str(), buf.data(), buf.size());
  if (n < 0) {
    if (errno == ENOENT || errno == ESRCH) return Status::NotFound("{} is gone", path);
    return Status::FromErrno(errno, "readlink " + path);
  }
  buf.resize(static_cast<size_t>(n));
  return buf;
}

}  // namespace

uint32_t KernelDev(uint64_t user_dev) {
  return (static_cast<uint32_t>(major(user_dev)) << 20) | static_cast<uint32_t>(minor(user_dev));
}

bool ProcessExists(pid_t pid) {
  if (pid <= 0) return false;
  // A zombie still has a /proc entry until its parent reaps it, but it runs no more.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
         stat[paren + 2] != 'X';
}

Result<std::vector<FdEntry>> SnapshotFds(pid_t pid) {
  std::string dir = ProcPath(pid, "fd");
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return Status::NotFound("process {} does not exist", pid);
    return Status::FromErrno(errno, "opening " + dir);
  }
  std::vector<FdEntry> out;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    FdEntry f;
    f.fd = atoi(e->d_name);
    auto link = ReadLink(dir + "/" + e->d_name);
    if (!link.ok()) continue;  // closed meanwhile
    f.path = link.value();
    struct stat st;
    if (stat((dir + "/" + e->d_name).c_str(), &st) == 0) {
      f.ino = st.st_ino;
      f.dev = KernelDev(st.st_dev);
      f.size = static_cast<uint64_t>(st.st_size);
      f.ftype = static_cast<uint16_t>((st.st_mode & S_IFMT) >> 12);
    }
    std::ifstream info(ProcPath(pid, "fdinfo/") + e->d_name);
    std::string key;
    while (info >> key) {
      if (key == "pos:") {
        info >> f.pos;
      } else if (key == "flags:") {
        std::string oct;
        info >> oct;
        f.flags = static_cast<uint32_t>(strtoul(oct.c_str(), nullptr, 8));
      } else {
        std::string rest;
        std::getline(info, rest);
      }
    }
    out.push_back(std::move(f));
  }
  closedir(d);
  return out;
}

bool ParseMapsLine(const std::string& line, MapEntry* m) {
  // start-end perms offset major:minor inode [path]
  unsigned long long start, end, off, ino;
  unsigned int maj, min;
  char perms[8] = {};
  int path_at = 0;
  if (sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &maj,
             &min, &ino, &path_at) < 7) {
    return false;
  }
  if (ino == 0) return false;  // anonymous, heap, stack, vdso
  m->start = start;
  m->end = end;
  m->pgoff = off;
  m->ino = ino;
  m->dev = (maj << 20) | min;
  m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
            (perms[2] == 'x' ? PROT_EXEC : 0);
  m->flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE;
  m->path = path_at > 0 && static_cast<size_t>(path_at) <= line.size() ? line.substr(path_at) : "";
  return true;
}

Result<std::vector<MapEntry>> SnapshotFileMaps(pid_t pid) {
  std::ifstream in(ProcPath(pid, "maps"));
  if (!in) return Status::NotFound("process {} does not exist", pid);
  std::vector<MapEntry> out;
  std::string line;
  while (std::getline(in, line)) {
    MapEntry m;
    if (ParseMapsLine(line, &m)) out.push_back(std::move(m));
  }
  return out;
}

Result<pid_t> ThreadGroupOf(pid_t tid) {
  std::ifstream in(ProcPath(tid, "status"));
  if (!in) return Status::NotFound("no process with pid {}", tid);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Tgid:", 0) == 0) return static_cast<pid_t>(atol(line.c_str() + 5));
  }
  return Status::NotFound("no process with pid {}", tid);
}

Result<std::string> ProcessCwd(pid_t pid) { return ReadLink(ProcPath(pid, "cwd")); }

Result<std::string> ProcessComm(pid_t pid) {
  std::ifstream in(ProcPath(pid, "comm"));
  if (!in) return Status::NotFound("process {} does not exist", pid);
  std::string comm;
  std::getline(in, comm);
  return comm;
}

}  // namespace iotwin::capture
