// mem_store: stores into a shared writable file mapping, then msync(MS_SYNC)s, in two rounds;
// logs every byte range it wrote. For the memory layer's runtime tests (dirtying, write-back and
// --subpage).
//
//   mem_store FILE PAGES PAUSE_MS LOG
//
// Creates FILE with PAGES pages of a known pattern (fsynced, so it starts clean), maps it
// MAP_SHARED read-write and stores into a fixed set of byte ranges; every stored byte differs
// from the byte it replaces, so each 8-byte word a range touches really changes. Round 1, pause,
// msync(MS_SYNC), pause; round 2 (a page written in round 1 and a fresh one), pause, msync,
// pause. LOG receives one JSON object:
//   {"ino", "dev" (user-space st_dev), "pages", "pid",
//    "writes": [{"off", "len", "round"}], "msync_rounds": 2}
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

uint8_t Pattern(size_t off) { return static_cast<uint8_t>(off * 7 + 3); }

struct Write {
  size_t off, len;
  int round;
};

int Fail(const char* what) {
  fprintf(stderr, "mem_store: %s: %s\n", what, strerror(errno));
  return 1;
}

void Pause(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: mem_store FILE PAGES PAUSE_MS LOG\n");
    return 2;
  }
  const char* path = argv[1];
  const size_t pages = strtoull(argv[2], nullptr, 10);
  const long pause_ms = strtol(argv[3], nullptr, 10);
  if (pages < 10) return 2;
  const size_t size = pages * kPage;

  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) return Fail("create");
  std::vector<uint8_t> buf(size);
  for (size_t i = 0; i < size; i++) buf[i] = Pattern(i);
  if (write(fd, buf.data(), size) != static_cast<ssize_t>(size)) return Fail("write");
  if (fsync(fd) != 0) return Fail("fsync");
  struct stat st;
  if (fstat(fd, &st) != 0) return Fail("fstat");

  auto* map = static_cast<volatile uint8_t*>(
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (map == MAP_FAILED) return Fail("mmap");

  const std::vector<Write> writes = {
      {0 * kPage + 100, 8, 1},    // one aligned word
      {0 * kPage + 4000, 3, 1},   // part of a word
      {2 * kPage + 8, 64, 1},     // eight words
      {3 * kPage + 4093, 6, 1},   // across the page 3 / page 4 boundary
      {5 * kPage, kPage, 1},      // a whole page
      {7 * kPage + 1234, 1, 1},   // one byte
      {0 * kPage + 200, 16, 2},   // round 2: a page written back in round 1
      {9 * kPage + 4095, 1, 2},   // and a fresh page, its last byte
  };
  for (int round = 1; round <= 2; round++) {
    for (const Write& w : writes) {
      if (w.round != round) continue;
      for (size_t i = w.off; i < w.off + w.len; i++) map[i] = static_cast<uint8_t>(~map[i]);
    }
    Pause(pause_ms);
    if (msync(const_cast<uint8_t*>(map), size, MS_SYNC) != 0) return Fail("msync");
    Pause(pause_ms);
  }

  FILE* log = fopen(argv[4], "w");
  if (!log) return Fail("log");
  fprintf(log, "{\"ino\":%llu,\"dev\":%llu,\"pages\":%zu,\"pid\":%d,\"msync_rounds\":2,\"writes\":[",
          static_cast<unsigned long long>(st.st_ino), static_cast<unsigned long long>(st.st_dev),
          pages, static_cast<int>(getpid()));
  for (size_t i = 0; i < writes.size(); i++) {
    fprintf(log, "%s{\"off\":%zu,\"len\":%zu,\"round\":%d}", i ? "," : "", writes[i].off,
            writes[i].len, writes[i].round);
  }
  fprintf(log, "]}\n");
  fclose(log);
  munmap(const_cast<uint8_t*>(map), size);
  close(fd);
  return 0;
}
