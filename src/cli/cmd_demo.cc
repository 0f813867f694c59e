// `iotwin demo`: the main job on a built-in default. Records the kv-offload workload, reports it,
// replays it into a sandbox while recording the replay, and compares the two traces. Each step runs
// the real subcommand as a child process, so the demo exercises exactly what a user would type.
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"

namespace iotwin::cli {
namespace {

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "iotwin";
  buf[n] = '\0';
  return buf;
}

// iotwin-workload is installed beside iotwin; in a build tree it lives in ../../workloads.
std::string FindWorkloadBinary(const std::string& self) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(self).parent_path();
  for (const fs::path& p : {dir / "iotwin-workload", dir / "../../workloads/iotwin-workload"}) {
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "iotwin-workload";  // from PATH
}

int RunStep(const std::vector<std::string>& argv) {
  std::string shown;
  for (const auto& a : argv) shown += (shown.empty() ? "" : " ") + a;
  fmt::print("\n$ {}\n", shown);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -errno;
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fmt::print(stderr, "iotwin demo: cannot run {}: {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

CommandSpec SetupDemo(CLI::App& parent) {
  struct Options {
    std::string dir = "/var/tmp/iotwin-demo";
    bool keep = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "demo", "Record the kv-offload workload, report it, replay it and compare the replay");
  sub->add_option("--dir", opt->dir, "working directory (recreated)")->capture_default_str();
  sub->add_flag("--keep", opt->keep, "keep the working directory afterwards");
  return {sub, [opt] {
            namespace fs = std::filesystem;
            const std::string self = SelfPath();
            const std::string workload = FindWorkloadBinary(self);
            const fs::path dir = opt->dir;
            std::error_code ec;
            fs::remove_all(dir, ec);
            fs::create_directories(dir / "workload", ec);
            if (ec) {
              fmt::print(stderr, "iotwin demo: cannot create {}: {}\n", dir.string(), ec.message());
              return kExitError;
            }
            const std::string trace = (dir / "kv-offload.iotwin").string();
            const std::string replay_trace = (dir / "kv-offload.replay.iotwin").string();
            fmt::print("iotwin demo: an LMCache-style KV-cache offload workload (put, then get with "
                       "reuse), captured with eBPF, characterised, replayed in a sandbox and "
                       "judged.\nWorking directory: {}\n",
                       dir.string());
            struct Step {
              const char* what;
              std::vector<std::string> argv;
            };
            std::vector<Step> steps = {
                {"record",
                 {self, "record", "-o", trace, "--", workload, "kv-offload", "--dir",
                  (dir / "workload").string(), "--chunks", "64", "--gets", "256", "--compute-us", "1000"}},
                {"report", {self, "report", trace}},
                {"replay",
                 {self, "replay", trace, "--root", (dir / "replay-root").string(), "--pace",
                  "original", "--record", replay_trace}},
                {"compare", {self, "compare", trace, replay_trace}},
            };
            int failed = 0;
            for (const auto& step : steps) {
              int rc = RunStep(step.argv);
              if (rc != 0) {
                fmt::print(stderr, "iotwin demo: step '{}' exited with status {}\n", step.what,
                           rc);
                failed = rc;
                break;  // later steps need this step's output
              }
            }
            if (!opt->keep && failed == 0) fs::remove_all(dir / "workload", ec);
            if (failed == 0) {
              fmt::print("\niotwin demo: all steps succeeded; traces are in {}\n", dir.string());
              return kExitOk;
            }
            return failed == kExitNegative ? kExitNegative : kExitError;
          }};
}

}  // namespace iotwin::cli
