// known_io DIR: two threads at once, each on its own file DIR/tN.dat: 300 pwrites of 4 KiB at a
// stride of 8 KiB, an fsync, then 300 preads of the same blocks. Calls are issued back to back,
// so a replay's own cost per call shows directly in its span (replay_pacing_test.cc).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kCalls = 300;
constexpr size_t kBlock = 4096;
constexpr off_t kStride = 8192;

bool RunThread(const std::string& path) {
  static thread_local char buf[kBlock];
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = true;
  for (int i = 0; i < kCalls && ok; i++) {
    buf[0] = static_cast<char>(i);
    ok = pwrite(fd, buf, kBlock, i * kStride) == static_cast<ssize_t>(kBlock);
  }
  ok = ok && fsync(fd) == 0;
  for (int i = 0; i < kCalls && ok; i++) {
    ok = pread(fd, buf, kBlock, i * kStride) == static_cast<ssize_t>(kBlock);
  }
  return close(fd) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: known_io DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok[2] = {false, false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++) {
    threads.emplace_back([&, t] { ok[t] = RunThread(dir + "/t" + std::to_string(t) + ".dat"); });
  }
  for (auto& th : threads) th.join();
  if (!ok[0] || !ok[1]) {
    perror("known_io");
    return 1;
  }
  return 0;
}
