// io_libaio LOG DIR: Linux AIO (libaio's iocb layout, system calls made directly): io_setup,
// io_submit of a batch of writes and one of reads, io_getevents, io_destroy. Logs the system
// calls between brackets and every iocb ({"kind": "submit"}) and event ({"kind": "complete"}).
#include <libaio.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_libaio LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/aio.dat";
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) iotwin::progs::Die("open");
  alignas(4096) static char buf[6][8192];
  unsigned long ctx = 0;
  iotwin::progs::BeginMark();
  long r = Sys(SYS_io_setup, 32, &ctx);
  log.Add(Entry("io_setup").U64("length", 32).U64("aux", ctx).Int("ret", r));
  for (int phase = 0; phase < 2; phase++) {
    struct iocb cbs[3];
    struct iocb* ptrs[3];
    for (int i = 0; i < 3; i++) {
      uint64_t off = 8192 * i, len = 4096 * (1 + (i % 2));
      if (phase == 0) {
        io_prep_pwrite(&cbs[i], fd, buf[i], len, off);
      } else {
        io_prep_pread(&cbs[i], fd, buf[3 + i], len, off);
      }
      cbs[i].data = reinterpret_cast<void*>(static_cast<uintptr_t>(500 + 10 * phase + i));
      ptrs[i] = &cbs[i];
      log.Add(Entry::Kind("submit")
                  .Int("opcode", cbs[i].aio_lio_opcode)
                  .Int("fd", fd)
                  .U64("offset", off)
                  .U64("length", len)
                  .U64("user_data", 500 + 10 * phase + i)
                  .U64("iocb", reinterpret_cast<uintptr_t>(&cbs[i])));
    }
    r = Sys(SYS_io_submit, ctx, 3L, ptrs);
    log.Add(Entry("io_submit").U64("aux", 3).Int("ret", r));
    struct io_event events[3];
    long got = Sys(SYS_io_getevents, ctx, 3L, 3L, events, nullptr);
    log.Add(Entry("io_getevents").U64("aux", 3).U64("length", 3).Int("ret", got));
    for (long i = 0; i < got; i++) {
      log.Add(Entry::Kind("complete")
                  .U64("user_data", reinterpret_cast<uintptr_t>(events[i].data))
                  .U64("iocb", reinterpret_cast<uintptr_t>(events[i].obj))
                  .Int("res", events[i].res));
    }
  }
  r = Sys(SYS_io_destroy, ctx);
  log.Add(Entry("io_destroy").U64("aux", ctx).Int("ret", r));
  iotwin::progs::EndMark();
  close(fd);
  log.Flush();
  return 0;
}
