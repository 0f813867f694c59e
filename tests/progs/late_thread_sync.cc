// late_thread_sync FILE: a thread created at the start sleeps 1 s, then fdatasyncs the file the
// main thread has been appending to (a 4 KiB write every 100 ms, the last at ~0.9 s). Its first
// call depends on those writes; in gaps pacing its recorded 1 s gap runs from its creation, not
// from the end of that wait.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace {
int fd = -1;

void* Syncer(void*) {
  usleep(1000000);
  fdatasync(fd);
  return nullptr;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  pthread_t t;
  pthread_create(&t, nullptr, Syncer, nullptr);
  char buf[4096] = {0};
  for (int i = 0; i < 9; i++) {
    usleep(100000);
    if (write(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) return 1;
  }
  pthread_join(t, nullptr);
  return 0;
}
