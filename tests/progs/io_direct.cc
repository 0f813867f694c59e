// io_direct LOG DIR: O_DIRECT reads and writes of aligned 4 KiB blocks, logged (prog_log.h).
#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_direct LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/direct.dat";
  alignas(4096) static char buf[16384];
  memset(buf, 7, sizeof buf);
  const uint64_t flags = O_CREAT | O_RDWR | O_DIRECT;
  iotwin::progs::BeginMark();
  long fd = Sys(SYS_openat, -100, path.c_str(), flags, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", path)
              .U64("flags", flags)
              .U64("mode", 0644)
              .Int("ret", fd));
  if (fd < 0) {
    iotwin::progs::EndMark();
    log.Flush();
    return 4;  // the file system has no O_DIRECT
  }
  for (int i = 0; i < 4; i++) {
    long r = Sys(SYS_pwrite64, fd, buf, 4096, 4096 * i);
    log.Add(
        Entry("pwrite64").Int("fd", fd).U64("length", 4096).U64("offset", 4096 * i).Int("ret", r));
  }
  long r = Sys(SYS_pread64, fd, buf, 16384, 0);
  log.Add(Entry("pread64").Int("fd", fd).U64("length", 16384).U64("offset", 0).Int("ret", r));
  r = Sys(SYS_pread64, fd, buf + 1, 4096, 0);  // misaligned buffer: EINVAL
  log.Add(Entry("pread64").Int("fd", fd).U64("length", 4096).U64("offset", 0).Int("ret", r));
  r = Sys(SYS_read, fd, buf, 8192);
  log.Add(Entry("read").Int("fd", fd).U64("length", 8192).U64("offset", 0).Int("ret", r));
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
