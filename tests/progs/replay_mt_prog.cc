// replay_mt_prog DIR: a small multi-threaded, multi-process file workload for replay tests.
// DIR must hold in.bin (at least 1 MiB). Threads write their own files with pwrite, pwritev2,
// writev and fsync, read a shared descriptor with pread/preadv; a forked child appends a log,
// renames a temp file into place, dup2s and seeks; the main thread maps in.bin. It prints one
// line per action group to stdout ("what it did"), which the tests compare with the trace.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string g_dir;
int g_shared_fd = -1;

void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void* Worker(void* arg) {
  long id = reinterpret_cast<long>(arg);
  std::string path = g_dir + "/out/t" + std::to_string(id) + ".dat";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) Die("open worker file");
  static thread_local char buf[65536];
  std::memset(buf, 'a' + static_cast<int>(id), sizeof buf);
  for (int i = 0; i < 16; i++) {
    if (pwrite(fd, buf, 4096, i * 4096) != 4096) Die("pwrite");
  }
  iovec iov[3] = {{buf, 512}, {buf + 512, 4096}, {buf + 8192, 1000}};
  if (pwritev2(fd, iov, 3, 65536, RWF_DSYNC) != 5608) Die("pwritev2");
  if (lseek(fd, 0, SEEK_END) < 0) Die("lseek");
  if (writev(fd, iov, 2) != 4608) Die("writev");
  if (fsync(fd) != 0) Die("fsync");
  // The shared descriptor of in.bin, read by every thread at its own offsets.
  for (int i = 0; i < 8; i++) {
    if (pread(g_shared_fd, buf, 8192, (id * 8 + i) * 8192) != 8192) Die("pread shared");
  }
  if (preadv(fd, iov, 3, 0) != 5608) Die("preadv");
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  std::printf("thread %ld: wrote %s\n", id, path.c_str());
  return nullptr;
}

void Child() {
  std::string tmp = g_dir + "/out/ckpt.tmp", fin = g_dir + "/out/ckpt";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) Die("open tmp");
  char buf[8192];
  std::memset(buf, 'c', sizeof buf);
  for (int i = 0; i < 4; i++) {
    if (write(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) Die("write tmp");
  }
  if (fdatasync(fd) != 0) Die("fdatasync");
  if (ftruncate(fd, 20000) != 0) Die("ftruncate");
  close(fd);
  if (rename(tmp.c_str(), fin.c_str()) != 0) Die("rename");
  int log = open((g_dir + "/out/child.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (log < 0) Die("open log");
  int copy = dup2(log, 20);
  if (copy != 20) Die("dup2");
  for (int i = 0; i < 5; i++) {
    if (write(copy, "line\n", 5) != 5) Die("append");
  }
  close(log);
  close(copy);
  // The inherited shared descriptor: its position is shared with the parent.
  if (lseek(g_shared_fd, 4096, SEEK_SET) != 4096) Die("child lseek");
  if (read(g_shared_fd, buf, 4096) != 4096) Die("child read");
  struct stat st;
  if (stat(fin.c_str(), &st) != 0 || st.st_size != 20000) Die("stat ckpt");
  std::printf("child: checkpoint %s\n", fin.c_str());
  std::fflush(stdout);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  if (mkdir((g_dir + "/out").c_str(), 0755) != 0) Die("mkdir out");
  g_shared_fd = open((g_dir + "/in.bin").c_str(), O_RDONLY);
  if (g_shared_fd < 0) Die("open in.bin");
  pthread_t th[3];
  for (long i = 0; i < 3; i++) pthread_create(&th[i], nullptr, Worker, reinterpret_cast<void*>(i));
  for (auto& t : th) pthread_join(t, nullptr);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) Child();
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("child failed");
  // A mapping of in.bin, touched page by page.
  void* p = mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, g_shared_fd, 0);
  if (p == MAP_FAILED) Die("mmap");
  long sum = 0;
  for (int i = 0; i < 256; i += 8) sum += static_cast<volatile char*>(p)[i * 4096];
  madvise(p, 1 << 20, MADV_DONTNEED);
  munmap(p, 1 << 20);
  off_t pos = lseek(g_shared_fd, 0, SEEK_CUR);  // 8192: moved by the child's read
  close(g_shared_fd);
  if (unlink((g_dir + "/out/t0.dat").c_str()) != 0) Die("unlink");
  std::printf("main: shared position after child %lld, mapped sum %ld\n",
              static_cast<long long>(pos), static_cast<long>(sum));
  return 0;
}
