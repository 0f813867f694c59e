// Two processes racing on shared names and on one file's end, in lockstep: each round both
// mkdir the same name (one gets 0, the other EEXIST), both rmdir it (0 / ENOENT), both create
// the same file with O_CREAT|O_EXCL (a descriptor / EEXIST) and unlink it (0 / ENOENT), then
// both append to one log (O_APPEND) and ask its size with lseek(SEEK_END). Which process wins
// each race is up to the scheduler; a replay must reproduce every result as recorded.
//
// usage: io_races DIR ROUNDS
// Prints "races: mkdir won A/B ..." so that a test can check both processes won some races.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// A two-party barrier in shared memory: both processes leave it together, so their next calls
// overlap.
struct Barrier {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  void Wait() {
    const int g = generation.load();
    if (arrived.fetch_add(1) == 1) {
      arrived.store(0);
      generation.fetch_add(1);
      return;
    }
    while (generation.load() == g) sched_yield();
  }
};

struct Wins {
  std::atomic<int> mkdir[2];
  std::atomic<int> excl[2];
};

void Round(const std::string& dir, int i, int me, Barrier* b, Wins* w, int log, int seek) {
  const std::string d = dir + "/d" + std::to_string(i), f = dir + "/f" + std::to_string(i);
  b->Wait();
  if (mkdir(d.c_str(), 0755) == 0) w->mkdir[me]++;
  b->Wait();
  rmdir(d.c_str());
  b->Wait();
  int fd = open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd >= 0) {
    w->excl[me]++;
    close(fd);
  }
  b->Wait();
  unlink(f.c_str());
  b->Wait();
  // 64 bytes: no append straddles a page, whose partly updated size lseek could see (it reads
  // i_size without the inode lock; no replay can reproduce such a size).
  char rec[64] = {};
  std::snprintf(rec, sizeof rec, "%d:%d\n", me, i);
  if (write(log, rec, sizeof rec) != static_cast<ssize_t>(sizeof rec)) std::perror("write");
  lseek(seek, 0, SEEK_END);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: io_races DIR ROUNDS\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int rounds = std::atoi(argv[2]);
  void* shared = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  auto* b = new (shared) Barrier;
  auto* w = new (static_cast<char*>(shared) + 256) Wins;
  const std::string log_path = dir + "/log";
  close(open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  pid_t child = fork();
  if (child < 0) return 1;
  const int me = child == 0 ? 1 : 0;
  int log = open(log_path.c_str(), O_WRONLY | O_APPEND);
  int seek = open(log_path.c_str(), O_RDONLY);
  if (log < 0 || seek < 0) return 1;
  for (int i = 0; i < rounds; i++) Round(dir, i, me, b, w, log, seek);
  close(log);
  close(seek);
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("races: mkdir won %d/%d excl won %d/%d\n", w->mkdir[0].load(), w->mkdir[1].load(),
              w->excl[0].load(), w->excl[1].load());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
