// mem_remap: one thread maps two files of the same page count in turn at the same address,
// reading every page of each mapping, unmapping it and moving to the other CPU before the next
// mapping. For the memory layer's runtime tests: the VMA of an unmapped file, freed on one CPU,
// stays as it was while the next mapping's VMA comes from another CPU's free list; a fault on
// the new mapping must still name the new file. Between rounds it sleeps 2 ms.
//
//   mem_remap FILE_A FILE_B ROUNDS LOG
//
// Creates FILE_A and FILE_B (256 KiB minus a few bytes each, different contents) when they do
// not exist. LOG receives one JSON object: {"ino_a", "ino_b", "rounds", "moved"} (moved: rounds
// that ran on another CPU than the previous one).
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPages = 64;

int Fail(const char* what) {
  fprintf(stderr, "mem_remap: %s: %s\n", what, strerror(errno));
  return 1;
}

bool Create(const char* path, size_t size, uint8_t fill) {
  struct stat st;
  if (stat(path, &st) == 0 && static_cast<size_t>(st.st_size) == size) return true;
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<uint8_t> buf(size, fill);
  const bool ok = write(fd, buf.data(), size) == static_cast<ssize_t>(size);
  close(fd);
  return ok;
}

// Pins the thread to the CPU after the one it runs on: true when it moved.
bool MoveCpu() {
  const int n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const int cpu = sched_getcpu();
  if (n < 2 || cpu < 0) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((cpu + 1) % n, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) return false;
  return sched_getcpu() != cpu;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: mem_remap FILE_A FILE_B ROUNDS LOG\n");
    return 2;
  }
  const char* paths[2] = {argv[1], argv[2]};
  const int rounds = atoi(argv[3]);
  if (rounds <= 0 || rounds > 100000) return 2;
  const size_t sizes[2] = {kPages * kPage - 100, kPages * kPage - 10};
  if (!Create(paths[0], sizes[0], 0x11) || !Create(paths[1], sizes[1], 0x22)) {
    return Fail("create");
  }
  struct stat st[2];
  if (stat(paths[0], &st[0]) != 0 || stat(paths[1], &st[1]) != 0) return Fail("stat");

  void* where = nullptr;
  unsigned sum = 0;
  int moved = 0;
  for (int round = 0; round < rounds; round++) {
    const int which = round % 2;
    int fd = open(paths[which], O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Fail("open");
    void* m = mmap(where, sizes[which], PROT_READ, MAP_SHARED | (where ? MAP_FIXED_NOREPLACE : 0),
                   fd, 0);
    if (m == MAP_FAILED) return Fail("mmap");
    where = m;
    const volatile uint8_t* p = static_cast<const volatile uint8_t*>(m);
    for (size_t page = 0; page < kPages; page++) sum += p[page * kPage];
    if (munmap(m, sizes[which]) != 0) return Fail("munmap");
    close(fd);
    // A pause lets the unmapped VMA's memory sit unused in the allocator (it stays as it was).
    usleep(2000);
    if (MoveCpu()) moved++;
  }

  FILE* log = fopen(argv[4], "w");
  if (!log) return Fail("log");
  fprintf(log, "{\"ino_a\":%llu,\"ino_b\":%llu,\"rounds\":%d,\"moved\":%d,\"checksum\":%u}\n",
          static_cast<unsigned long long>(st[0].st_ino),
          static_cast<unsigned long long>(st[1].st_ino), rounds, moved, sum);
  fclose(log);
  return 0;
}
