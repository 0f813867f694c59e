// io_scope PIDFILE GOFILE DIR: the names a data scope must resolve. Opens DIR/data/inherited.bin
// (absolute) and publishes its pid in PIDFILE, then waits (without file-I/O system calls) until
// GOFILE exists, so that `iotwin record --pid` attaches with that descriptor already open. Then:
// chdir(DIR) and reads data/rel.bin by a relative path; opens DIR/data as a directory and reads
// dirfd.bin through openat on it; reads lib/libfake.so.1 (a shared library by name) relative to
// the cwd; reads /proc/self/status; preads the inherited descriptor. Bytes read: rel.bin 10,000,
// dirfd.bin 20,000, inherited.bin 40,000, libfake.so.1 80,000 (each file must be at least that
// long). Exits 0, or 1 naming the call that failed.
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  perror(what);
  exit(1);
}

// Reads `bytes` from `fd` in 4 KiB calls (the last one shorter).
void ReadBytes(int fd, size_t bytes, const char* what) {
  std::vector<char> buf(4096);
  while (bytes > 0) {
    const size_t n = bytes < buf.size() ? bytes : buf.size();
    const ssize_t got = read(fd, buf.data(), n);
    if (got != static_cast<ssize_t>(n)) Die(what);
    bytes -= n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: io_scope PIDFILE GOFILE DIR\n");
    return 2;
  }
  const std::string dir = argv[3];
  const int inherited = open((dir + "/data/inherited.bin").c_str(), O_RDONLY);
  if (inherited < 0) Die("inherited.bin");
  const std::string tmp = std::string(argv[1]) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) Die("pidfile");
  fprintf(f, "%d\n", getpid());
  fclose(f);
  rename(tmp.c_str(), argv[1]);
  // access(2) is faccessat, which the capture does not record: the wait leaves no trace.
  struct timespec tick = {0, 10 * 1000 * 1000};
  while (access(argv[2], F_OK) != 0) nanosleep(&tick, nullptr);

  if (chdir(dir.c_str()) != 0) Die("chdir");
  const int rel = open("data/rel.bin", O_RDONLY);
  if (rel < 0) Die("data/rel.bin");
  ReadBytes(rel, 10000, "read rel.bin");
  const int data_dir = open("data", O_RDONLY | O_DIRECTORY);
  if (data_dir < 0) Die("data");
  const int via_dirfd = openat(data_dir, "dirfd.bin", O_RDONLY);
  if (via_dirfd < 0) Die("dirfd.bin");
  ReadBytes(via_dirfd, 20000, "read dirfd.bin");
  const int lib = open("lib/libfake.so.1", O_RDONLY);
  if (lib < 0) Die("lib/libfake.so.1");
  ReadBytes(lib, 80000, "read libfake.so.1");
  const int status = open("/proc/self/status", O_RDONLY);
  if (status < 0) Die("/proc/self/status");
  char small[256];
  if (read(status, small, sizeof small) <= 0) Die("read /proc/self/status");
  std::vector<char> buf(40000);
  if (pread(inherited, buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size()))
    Die("pread inherited.bin");
  for (int fd : {rel, via_dirfd, data_dir, lib, status, inherited}) close(fd);
  return 0;
}
