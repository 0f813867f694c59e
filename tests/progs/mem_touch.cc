// mem_touch: reads a file through a shared mapping, page by page in a logged order, with a cold
// page cache; also touches anonymous memory. For the memory layer's runtime tests.
//
//   mem_touch FILE SIZE_MB STRIDE_PAGES THREADS LOG
//
// Creates FILE (SIZE_MB of non-zero data, fsynced) when it does not exist, evicts it from the
// page cache (posix_fadvise DONTNEED), maps it MAP_SHARED read-only and starts THREADS threads:
// thread t reads one byte of pages t*STRIDE, (t+THREADS)*STRIDE, ... in that order. Before
// that, the main thread writes 8 MiB of anonymous memory. LOG receives one JSON object:
//   {"ino", "dev" (st_dev as user space sees it), "pages", "anon_start", "anon_end",
//    "threads": [{"tid", "touched": [page, ...]}]}
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr size_t kPage = 4096;

struct Thread {
  const volatile uint8_t* map = nullptr;
  size_t first = 0, step = 0, pages = 0;
  pid_t tid = 0;
  std::vector<size_t> touched;
  unsigned sum = 0;
};

void* Touch(void* arg) {
  auto* t = static_cast<Thread*>(arg);
  t->tid = static_cast<pid_t>(syscall(SYS_gettid));
  for (size_t p = t->first; p < t->pages; p += t->step) {
    t->sum += t->map[p * kPage + (p % 61) * 8];
    t->touched.push_back(p);
  }
  return nullptr;
}

int Fail(const char* what) {
  fprintf(stderr, "mem_touch: %s: %s\n", what, strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: mem_touch FILE SIZE_MB STRIDE_PAGES THREADS LOG\n");
    return 2;
  }
  const char* path = argv[1];
  const size_t size = strtoull(argv[2], nullptr, 10) << 20;
  const size_t stride = strtoull(argv[3], nullptr, 10);
  const size_t nthreads = strtoull(argv[4], nullptr, 10);
  if (size == 0 || stride == 0 || nthreads == 0 || nthreads > 64) return 2;

  struct stat st;
  if (stat(path, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Fail("create");
    std::vector<uint8_t> buf(1 << 20);
    for (size_t off = 0; off < size; off += buf.size()) {
      for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<uint8_t>((off + i) * 13 + 1);
      if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) {
        return Fail("write");
      }
    }
    if (fsync(fd) != 0) return Fail("fsync");
    close(fd);
  }

  // Anonymous memory first: its faults must not reach the trace.
  const size_t anon_size = 8 << 20;
  auto* anon = static_cast<uint8_t*>(
      mmap(nullptr, anon_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (anon == MAP_FAILED) return Fail("mmap anonymous");
  memset(anon, 0x5a, anon_size);

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Fail("open");
  if (fstat(fd, &st) != 0) return Fail("fstat");
  // Cold cache: the file is clean and unmapped, so every page can be dropped.
  if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) return Fail("fadvise");
  void* m = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return Fail("mmap");

  std::vector<Thread> threads(nthreads);
  std::vector<pthread_t> ids(nthreads);
  for (size_t t = 0; t < nthreads; t++) {
    threads[t].map = static_cast<const volatile uint8_t*>(m);
    threads[t].first = t * stride;
    threads[t].step = nthreads * stride;
    threads[t].pages = size / kPage;
    pthread_create(&ids[t], nullptr, Touch, &threads[t]);
  }
  unsigned sum = 0;
  for (size_t t = 0; t < nthreads; t++) {
    pthread_join(ids[t], nullptr);
    sum += threads[t].sum;
  }

  FILE* log = fopen(argv[5], "w");
  if (!log) return Fail("log");
  fprintf(log, "{\"ino\":%llu,\"dev\":%llu,\"pages\":%zu,\"anon_start\":%llu,\"anon_end\":%llu,"
          "\"checksum\":%u,\"threads\":[",
          static_cast<unsigned long long>(st.st_ino), static_cast<unsigned long long>(st.st_dev),
          size / kPage, static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(anon)),
          static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(anon) + anon_size), sum);
  for (size_t t = 0; t < nthreads; t++) {
    fprintf(log, "%s{\"tid\":%d,\"touched\":[", t ? "," : "", threads[t].tid);
    for (size_t i = 0; i < threads[t].touched.size(); i++) {
      fprintf(log, "%s%zu", i ? "," : "", threads[t].touched[i]);
    }
    fprintf(log, "]}");
  }
  fprintf(log, "]}\n");
  fclose(log);
  munmap(m, size);
  close(fd);
  return 0;
}
