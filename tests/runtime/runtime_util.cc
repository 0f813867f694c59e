#include "runtime_util.h"

#include <cstdlib>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace iotwin::test {

RunResult Run(const std::vector<std::string>& argv, int timeout_s,
              const std::vector<std::string>& extra_env) {
  RunResult r;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (const auto& e : extra_env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    dprintf(2, "exec %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  bool killed = false;
  while (open_fds > 0) {
    int rc = poll(fds, 2, 200);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!killed && now.tv_sec - start.tv_sec > timeout_s) {
      kill(pid, SIGKILL);
      killed = true;
    }
    if (rc <= 0) continue;
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_fds--;
        continue;
      }
      (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool CanLoadBpf() { return geteuid() == 0; }

bool BpfRequired() {
  const char* v = getenv("IOTWIN_REQUIRE_BPF");
  return v && std::strcmp(v, "1") == 0;
}

// IOTWIN_TEST_BIN runs the tests against another build (an older one, to see a regression test
// fail, or the static binary).
std::string IotwinBin() {
  const char* other = std::getenv("IOTWIN_TEST_BIN");
  return other && *other ? other : IOTWIN_BIN;
}
std::string WorkloadBin() { return IOTWIN_WORKLOAD_BIN; }
std::string TestProg(const std::string& name) { return std::string(IOTWIN_TEST_PROGS_DIR) + "/" + name; }

}  // namespace iotwin::test
