// io_rwf LOG DIR: preadv2 / pwritev2 with per-call RWF_* flags and with offset -1 (use and
// advance the file position), logged (prog_log.h).
#include <sys/uio.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_rwf LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/rwf.dat";
  static char buf[8192];
  struct iovec iov[2] = {{buf, 1000}, {buf + 1000, 3096}};
  const uint64_t kCur = UINT64_MAX;  // offset -1 as recorded
  iotwin::progs::BeginMark();
  long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", path)
              .U64("flags", O_CREAT | O_RDWR | O_TRUNC)
              .U64("mode", 0644)
              .Int("ret", fd));
  struct {
    bool write;
    uint64_t offset;
    int flags;
  } calls[] = {
      {true, 0, RWF_DSYNC},     {true, 4096, RWF_SYNC},
      {true, kCur, RWF_APPEND}, {true, 8192, RWF_HIPRI},
      {false, 0, RWF_NOWAIT},   {false, 4096, RWF_HIPRI},
      {false, kCur, 0},         {false, 100, RWF_NOWAIT | RWF_HIPRI},
  };
  for (const auto& c : calls) {
    long r = Sys(c.write ? SYS_pwritev2 : SYS_preadv2, fd, iov, 2, static_cast<long>(c.offset), 0L,
                 c.flags);
    log.Add(Entry(c.write ? "pwritev2" : "preadv2")
                .Int("fd", fd)
                .U64("aux", 2)
                .U64("length", 4096)
                .U64("offset", c.offset)
                .U64("flags", c.flags)
                .Int("ret", r)
                .Str("iov", "1000,3096"));
  }
  long r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
