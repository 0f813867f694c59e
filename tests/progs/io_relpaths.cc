// io_relpaths LOG DIR: relative paths, *at() calls on directory descriptors, chdir and fchdir:
// what analysis needs to resolve paths to absolute form. Logged (prog_log.h).
#include <sys/stat.h>

#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_relpaths LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string dir = argv[2];
  struct stat st;
  iotwin::progs::BeginMark();
  long r = Sys(SYS_chdir, dir.c_str());
  log.Add(Entry("chdir").Int("fd", -100).Str("path", dir).Int("ret", r));
  r = Sys(SYS_mkdirat, -100, "d1", 0755);
  log.Add(Entry("mkdirat").Int("fd", -100).Str("path", "d1").U64("mode", 0755).Int("ret", r));
  long f1 = Sys(SYS_openat, -100, "d1/f", O_CREAT | O_WRONLY, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", "d1/f")
              .U64("flags", O_CREAT | O_WRONLY)
              .U64("mode", 0644)
              .Int("ret", f1));
  long dfd = Sys(SYS_openat, -100, "d1", O_RDONLY | O_DIRECTORY, 0);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", "d1")
              .U64("flags", O_RDONLY | O_DIRECTORY)
              .U64("mode", 0)
              .Int("ret", dfd));
  long f2 = Sys(SYS_openat, dfd, "f", O_RDONLY, 0);
  log.Add(Entry("openat")
              .Int("fd", dfd)
              .Str("path", "f")
              .U64("flags", O_RDONLY)
              .U64("mode", 0)
              .Int("ret", f2));
  r = Sys(SYS_newfstatat, dfd, "f", &st, 0);
  log.Add(Entry("newfstatat").Int("fd", dfd).Str("path", "f").U64("flags", 0).Int("ret", r));
  r = Sys(SYS_chdir, "d1");
  log.Add(Entry("chdir").Int("fd", -100).Str("path", "d1").Int("ret", r));
  long f3 = Sys(SYS_openat, -100, "../d1/./f", O_RDONLY, 0);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", "../d1/./f")
              .U64("flags", O_RDONLY)
              .U64("mode", 0)
              .Int("ret", f3));
  r = Sys(SYS_chdir, "..");
  log.Add(Entry("chdir").Int("fd", -100).Str("path", "..").Int("ret", r));
  r = Sys(SYS_fchdir, dfd);
  log.Add(Entry("fchdir").Int("fd", dfd).Int("ret", r));
  r = Sys(SYS_renameat, -100, "f", dfd, "g");
  log.Add(Entry("renameat")
              .Int("fd", -100)
              .Str("path", "f")
              .Int("fd2", dfd)
              .Str("path2", "g")
              .Int("ret", r));
  r = Sys(SYS_unlinkat, dfd, "g", 0);
  log.Add(Entry("unlinkat").Int("fd", dfd).Str("path", "g").U64("flags", 0).Int("ret", r));
  for (long fd : {f1, f2, f3, dfd}) {
    r = Sys(SYS_close, fd);
    log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  }
  r = Sys(SYS_chdir, "..");
  log.Add(Entry("chdir").Int("fd", -100).Str("path", "..").Int("ret", r));
  r = Sys(SYS_unlinkat, -100, "d1", AT_REMOVEDIR);
  log.Add(
      Entry("unlinkat").Int("fd", -100).Str("path", "d1").U64("flags", AT_REMOVEDIR).Int("ret", r));
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
