// blk_writeback LOG FILE MODE BYTES: page-cache writes whose write-back the block-layer runtime
// tests attribute to FILE, logged (prog_log.h).
//   fsync   buffered pwrite64 of BYTES in 64 KiB calls, then fsync (write-back in this thread)
//   mmap    ftruncate to BYTES, a store into every page of a shared mapping, msync(MS_SYNC)
//   syncfs  buffered pwrite64 of BYTES, then syncfs (the flusher threads write back)
//   wait    buffered pwrite64 of BYTES, create FILE.written, wait (at most 60 s) until FILE.synced
//           exists: another, untraced process writes the pages back meanwhile
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: blk_writeback LOG FILE fsync|mmap|syncfs|wait BYTES\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = argv[2], mode = argv[3];
  uint64_t bytes = strtoull(argv[4], nullptr, 0);
  long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0644);
  log.Add(Entry("openat").Int("fd", -100).Str("path", path).Int("ret", fd));
  if (fd < 0) {
    log.Flush();
    return 4;
  }
  int rc = 0;
  if (mode == "fsync" || mode == "syncfs" || mode == "wait") {
    const uint64_t chunk = 64 << 10;
    std::string data(chunk, 'w');
    for (uint64_t off = 0; off < bytes; off += chunk) {
      long r = Sys(SYS_pwrite64, fd, data.data(), chunk, off);
      log.Add(Entry("pwrite64").Int("fd", fd).U64("length", chunk).U64("offset", off).Int("ret", r));
      if (r != static_cast<long>(chunk)) rc = 5;
    }
    if (mode == "wait") {
      std::string written = path + ".written", synced = path + ".synced";
      close(open(written.c_str(), O_CREAT | O_WRONLY, 0644));
      struct stat st;
      for (int i = 0; i < 6000 && stat(synced.c_str(), &st) != 0; i++) usleep(10000);
      if (stat(synced.c_str(), &st) != 0) rc = 6;
    } else {
      long r = mode == "fsync" ? Sys(SYS_fsync, fd) : Sys(SYS_syncfs, fd);
      log.Add(Entry(mode).Int("fd", fd).Int("ret", r));
    }
  } else if (mode == "mmap") {
    long r = Sys(SYS_ftruncate, fd, bytes);
    log.Add(Entry("ftruncate").Int("fd", fd).U64("length", bytes).Int("ret", r));
    auto* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED) iotwin::progs::Die("mmap");
    for (uint64_t off = 0; off < bytes; off += 4096) p[off] = 'm';
    r = Sys(SYS_msync, p, bytes, MS_SYNC);
    log.Add(Entry("msync").U64("offset", reinterpret_cast<uint64_t>(p)).U64("length", bytes).Int("ret", r));
    munmap(p, bytes);
  } else {
    fprintf(stderr, "blk_writeback: bad mode %s\n", mode.c_str());
    rc = 2;
  }
  Sys(SYS_close, fd);
  log.Flush();
  return rc;
}
