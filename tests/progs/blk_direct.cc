// blk_direct LOG FILE MODE [ARGS]: O_DIRECT reads for the block-layer runtime tests, logged
// (prog_log.h).
//   prepare BYTES   write BYTES to FILE with O_DIRECT; 4 KiB block i holds the index of the
//                   block a dependent read goes to next; fsync
//   read16m         one pread64 of 16 MiB at offset 0 (the block layer splits it)
//   reads N SIZE    N preads of SIZE bytes at offsets 0, SIZE, 2*SIZE...
//   chain N         N dependent 4 KiB reads: each reads the block the previous one named
#include <sys/stat.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

namespace {

constexpr uint64_t kBlock = 4096;

void* Buffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kBlock, bytes)) iotwin::progs::Die("posix_memalign");
  memset(p, 0, bytes);
  return p;
}

long Pread(iotwin::progs::Log& log, long fd, void* buf, uint64_t len, uint64_t off) {
  long r = Sys(SYS_pread64, fd, buf, len, off);
  log.Add(Entry("pread64").Int("fd", fd).U64("length", len).U64("offset", off).Int("ret", r));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: blk_direct LOG FILE prepare BYTES | read16m | reads N SIZE | chain N\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = argv[2], mode = argv[3];
  if (mode == "prepare" && argc == 5) {
    uint64_t bytes = strtoull(argv[4], nullptr, 0);
    uint64_t blocks = bytes / kBlock;
    long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0644);
    if (fd < 0) iotwin::progs::Die("open");
    const uint64_t chunk = 1 << 20;
    auto* buf = static_cast<uint64_t*>(Buffer(chunk));
    for (uint64_t off = 0; off < bytes; off += chunk) {
      for (uint64_t b = 0; b < chunk / kBlock; b++) {
        uint64_t block = off / kBlock + b;
        buf[b * kBlock / 8] = (block * 7919 + 13) % blocks;  // the next block of a chain
      }
      if (Sys(SYS_pwrite64, fd, buf, chunk, off) != static_cast<long>(chunk)) {
        iotwin::progs::Die("pwrite");
      }
    }
    Sys(SYS_fsync, fd);
    Sys(SYS_close, fd);
    return 0;
  }
  long fd = Sys(SYS_openat, -100, path.c_str(), O_RDONLY | O_DIRECT, 0);
  log.Add(Entry("openat").Int("fd", -100).Str("path", path).Int("ret", fd));
  if (fd < 0) {
    log.Flush();
    return 4;
  }
  int rc = 0;
  if (mode == "read16m") {
    const uint64_t len = 16ull << 20;
    void* buf = Buffer(len);
    if (Pread(log, fd, buf, len, 0) != static_cast<long>(len)) rc = 5;
  } else if (mode == "reads" && argc == 6) {
    uint64_t n = strtoull(argv[4], nullptr, 0), size = strtoull(argv[5], nullptr, 0);
    void* buf = Buffer(size);
    for (uint64_t i = 0; i < n; i++) {
      if (Pread(log, fd, buf, size, i * size) != static_cast<long>(size)) rc = 5;
    }
  } else if (mode == "chain" && argc == 5) {
    uint64_t n = strtoull(argv[4], nullptr, 0);
    auto* buf = static_cast<uint64_t*>(Buffer(kBlock));
    uint64_t block = 0;
    for (uint64_t i = 0; i < n; i++) {
      if (Pread(log, fd, buf, kBlock, block * kBlock) != static_cast<long>(kBlock)) {
        rc = 5;
        break;
      }
      block = buf[0];  // pointer chasing: the next read depends on this one's data
    }
  } else {
    fprintf(stderr, "blk_direct: bad mode %s\n", mode.c_str());
    rc = 2;
  }
  Sys(SYS_close, fd);
  log.Flush();
  return rc;
}
