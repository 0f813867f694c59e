// mem_majflt: reads every page of a file through a read-only shared mapping with a cold page
// cache, one thread, front to back, and writes the kernel's own count of the faults it took
// (getrusage RUSAGE_THREAD around the loop). For the memory layer's major-fault test.
//
//   mem_majflt FILE SIZE_MB LOG
//
// Creates FILE (SIZE_MB of non-zero data, fsynced) when it does not exist, evicts it from the
// page cache (posix_fadvise DONTNEED) and reads one byte of each page at an offset inside the
// page (as numpy reads past a .npy header). LOG receives one JSON object:
//   {"ino", "pages", "majflt", "minflt"}
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

int Fail(const char* what) {
  fprintf(stderr, "mem_majflt: %s: %s\n", what, strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: mem_majflt FILE SIZE_MB LOG\n");
    return 2;
  }
  const std::string path = argv[1];
  const size_t bytes = std::stoul(argv[2]) << 20;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return Fail("create");
    std::vector<char> chunk(1 << 20, 'm');
    for (size_t done = 0; done < bytes; done += chunk.size()) {
      if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) {
        return Fail("write");
      }
    }
    if (fsync(fd) != 0) return Fail("fsync");
    close(fd);
  }
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0) return Fail("open");
  if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return Fail("fadvise");
  const size_t pages = static_cast<size_t>(st.st_size) / kPage;
  void* m = mmap(nullptr, pages * kPage, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return Fail("mmap");
  const auto* map = static_cast<const volatile uint8_t*>(m);
  struct rusage before, after;
  getrusage(RUSAGE_THREAD, &before);
  unsigned sum = 0;
  for (size_t p = 0; p < pages; p++) sum += map[p * kPage + 128];
  getrusage(RUSAGE_THREAD, &after);
  FILE* log = fopen(argv[3], "w");
  if (!log) return Fail("log");
  fprintf(log, "{\"ino\": %llu, \"pages\": %zu, \"majflt\": %ld, \"minflt\": %ld, \"sum\": %u}\n",
          static_cast<unsigned long long>(st.st_ino), pages, after.ru_majflt - before.ru_majflt,
          after.ru_minflt - before.ru_minflt, sum);
  fclose(log);
  munmap(m, pages * kPage);
  close(fd);
  return 0;
}
