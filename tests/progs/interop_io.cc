// Test program for the strace import round trip: performs a fixed set of file system calls from
// two threads and logs each one (op tid fd offset length ret path) to LOG, so a test can compare
// what strace (or iotwin record) saw with what really happened.
// Usage: interop_io DIR LOG
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

FILE* g_log = nullptr;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
char g_buf[1 << 16];

long Tid() { return syscall(SYS_gettid); }

void Log(const char* op, int fd, long long offset, long long length, long long ret,
         const std::string& path = "-") {
  pthread_mutex_lock(&g_mu);
  std::fprintf(g_log, "%s %ld %d %lld %lld %lld %s\n", op, Tid(), fd, offset, length, ret,
               path.c_str());
  std::fflush(g_log);
  pthread_mutex_unlock(&g_mu);
}

long long Ret(long long r) { return r < 0 ? -errno : r; }

void* Worker(void* arg) {
  std::string path = std::string(static_cast<const char*>(arg)) + "/other file.bin";
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  Log("openat", -100, 0, 0, Ret(fd), path);
  for (int i = 0; i < 4; i++) {
    ssize_t n = pwrite(fd, g_buf, 512, i * 512);
    Log("pwrite64", fd, i * 512, 512, Ret(n));
  }
  Log("fdatasync", fd, 0, 0, Ret(fdatasync(fd)));
  Log("close", fd, 0, 0, Ret(close(fd)));
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR LOG\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  g_log = std::fopen(argv[2], "w");
  if (!g_log) return 1;
  std::memset(g_buf, 'x', sizeof g_buf);

  std::string data = dir + "/data.bin";
  int fd = open(data.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  Log("openat", -100, 0, 0, Ret(fd), data);
  Log("pwrite64", fd, 0, 8192, Ret(pwrite(fd, g_buf, 8192, 0)));
  Log("pwrite64", fd, 65536, 4096, Ret(pwrite(fd, g_buf, 4096, 65536)));
  Log("lseek", fd, 4096, 0, Ret(lseek(fd, 4096, SEEK_SET)));
  Log("read", fd, 4096, 4096, Ret(read(fd, g_buf, 4096)));
  Log("write", fd, 8192, 100, Ret(write(fd, g_buf, 100)));
  Log("pread64", fd, 65536, 16384, Ret(pread(fd, g_buf, 16384, 65536)));

  pthread_t t;
  pthread_create(&t, nullptr, Worker, const_cast<char*>(dir.c_str()));
  pthread_join(t, nullptr);

  Log("fsync", fd, 0, 0, Ret(fsync(fd)));
  std::string missing = dir + "/does-not-exist";
  int bad = open(missing.c_str(), O_RDONLY);
  Log("openat", -100, 0, 0, Ret(bad), missing);
  Log("close", fd, 0, 0, Ret(close(fd)));
  std::fclose(g_log);
  return 0;
}
