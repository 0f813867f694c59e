// replay_bench: how well `iotwin replay` keeps time and how fast it goes (not a test).
//
//   1. Schedule error of `original` pacing: single-thread traces of cached 4 KiB preads at
//      1k, 10k and 50k ops/s are replayed with the sync back end (and the null back end, which
//      isolates the scheduler); issue time - target time, median / p99 / max, and the rate
//      actually achieved. Targets at 10k ops/s: median < 20 us, p99 < 200 us. The null back end
//      is also run side by side with the worker's wait variants: `--spin-us 0` (sleep only:
//      clock_nanosleep to the deadline) against the default hybrid (sleep to 50 us before it,
//      then spin), and the sync and null back ends again with `--rt-priority 1` (the replay's
//      threads in SCHED_FIFO), which tells the wait's own error from time spent waiting for a
//      CPU. --hog N adds N busy-looping processes during this part, to show how the p99 follows
//      the machine's load.
//   2. `fast` replay of a 4 KiB random-read trace against fio doing the same: fio's own
//      randread job (psync, same file, same count) and fio replaying the very same operations
//      from an iolog (replay_no_stall). Runs alternate A/B and the medians are compared; target
//      >= 0.95x fio's IOPS. Reads hit the page cache (warm), so this measures per-operation
//      overhead, not the disk.
//
// Usage: replay_bench [--smoke] [--iotwin PATH] [--json OUT] [--dir DIR] [--hog N]
// Figures are noisy on a shared 2-core machine: run it when nothing else is compiling.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/unit/trace_builder.h"

using nlohmann::json;
using iotwin::test::TraceBuilder;

namespace {

struct Cmd {
  int status = -1;
  std::string out;
};

Cmd RunCapture(const std::vector<std::string>& argv) {
  int p[2];
  if (pipe(p) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    close(p[0]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(p[1]);
  Cmd c;
  char buf[65536];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) c.out.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return c;
}

json ParseJson(const std::string& s) {
  size_t brace = s.find('{');
  if (brace == std::string::npos) return nullptr;
  try {
    return json::parse(s.substr(brace));
  } catch (...) {
    return nullptr;
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr uint64_t kFileBytes = 256ull << 20;
constexpr const char* kPath = "/bench/data.bin";

// One thread, `n` preads of 4 KiB at random 4 KiB-aligned offsets, `interval_ns` apart.
std::string MakeTrace(const std::string& dir, const std::string& name, uint64_t n,
                      uint64_t interval_ns, std::vector<uint64_t>* offsets) {
  TraceBuilder b;
  b.step = 1000;
  b.dur = 500;
  b.Openat(100, kPath, O_RDONLY, 3, kFileBytes);
  b.step = interval_ns;
  b.dur = std::min<uint64_t>(2000, interval_ns / 2);
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<uint64_t> pick(0, kFileBytes / 4096 - 1);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t off = pick(rng) * 4096;
    if (offsets) offsets->push_back(off);
    b.Pread(100, 3, off, 4096, 4096, kFileBytes);
  }
  b.Close(100, 3);
  std::string path = dir + "/" + name + ".iotwin";
  auto st = b.WriteFile(path);
  if (!st.ok()) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), st.ToString().c_str());
    std::exit(2);
  }
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  int hogs = 0;
  std::string iotwin = IOTWIN_BIN_PATH, json_out, dir;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--smoke") smoke = true;
    else if (a == "--iotwin" && i + 1 < argc) iotwin = argv[++i];
    else if (a == "--json" && i + 1 < argc) json_out = argv[++i];
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--hog" && i + 1 < argc) hogs = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--smoke] [--iotwin PATH] [--json OUT] [--dir DIR] [--hog N]\n",
                   argv[0]);
      return 2;
    }
  }
  bool own_dir = dir.empty();
  if (own_dir) {
    char tmpl[] = "/var/tmp/iotwin-replay-bench-XXXXXX";
    if (!mkdtemp(tmpl)) return 2;
    dir = tmpl;
  }
  json results;
  results["smoke"] = smoke;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  results["cpus"] = cpus;
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) > 0) results["loadavg_1min_at_start"] = load[0];

  // ---- 1. schedule error of original pacing ----
  std::printf("original pacing, single thread, cached 4 KiB preads (issue - target)\n");
  std::printf("  %-8s %-10s %8s %9s %9s %10s %9s\n", "rate", "back/wait", "ops", "p50 us", "p99 us",
              "max us", "achieved");
  json pacing = json::array();
  const double seconds = smoke ? 0.3 : 3.0;
  std::string root = dir + "/root";
  // Busy loops competing for the CPUs while pacing is measured (--hog N).
  std::vector<pid_t> hog_pids;
  for (int h = 0; h < hogs; h++) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) asm volatile("" ::: "memory");  // burns a CPU until killed
    }
    if (pid > 0) hog_pids.push_back(pid);
  }
  auto stop_hogs = [&] {
    for (pid_t pid : hog_pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    hog_pids.clear();
  };
  results["hogs"] = hogs;
  struct Variant {
    const char* label;
    const char* backend;
    const char* spin_us;
    bool fifo;
  };
  const std::vector<Variant> variants = {{"sync", "sync", "50", false},
                                         {"sync/rt", "sync", "50", true},
                                         {"null", "null", "50", false},
                                         {"null/sleep", "null", "0", false},
                                         {"null/rt", "null", "50", true}};
  for (uint64_t rate : {1000ull, 10000ull, 50000ull}) {
    uint64_t n = static_cast<uint64_t>(rate * seconds);
    std::string trace = MakeTrace(dir, "pace" + std::to_string(rate), n, 1'000'000'000ull / rate, nullptr);
    for (const Variant& v : variants) {
      const char* backend = v.label;
      std::filesystem::remove_all(root);
      std::vector<std::string> argv = {iotwin, "replay", trace, "--root", root, "--pace",
                                       "original", "--cache", "warm", "--backend", v.backend,
                                       "--spin-us", v.spin_us, "--json", "-q"};
      if (v.fifo) argv.insert(argv.end(), {"--rt-priority", "1"});
      Cmd c = RunCapture(argv);
      json s = ParseJson(c.out);
      if (c.status != 0 || s.is_null()) {
        std::fprintf(stderr, "replay failed (%d): %s\n", c.status, c.out.c_str());
        stop_hogs();
        return 1;
      }
      const json& e = s["schedule_error_ns"];
      double achieved = s["duration_s"].get<double>() > 0
                            ? s["ops"].get<double>() / s["duration_s"].get<double>() : 0;
      std::printf("  %-8llu %-10s %8llu %9.1f %9.1f %10.1f %9.0f\n",
                  static_cast<unsigned long long>(rate), backend,
                  static_cast<unsigned long long>(n), e["p50"].get<double>() / 1e3,
                  e["p99"].get<double>() / 1e3, e["max"].get<double>() / 1e3, achieved);
      pacing.push_back({{"rate", rate}, {"backend", v.backend}, {"variant", v.label},
                        {"spin_us", v.spin_us}, {"fifo", v.fifo}, {"ops", n},
                        {"p50_ns", e["p50"]}, {"p99_ns", e["p99"]}, {"max_ns", e["max"]},
                        {"achieved_ops_s", achieved}, {"mismatches", s["mismatches"]["total"]}});
    }
  }
  stop_hogs();
  results["original_pacing"] = pacing;

  // ---- 2. fast replay vs fio ----
  const uint64_t n = smoke ? 20000 : 300000;
  std::vector<uint64_t> offsets;
  std::string trace = MakeTrace(dir, "fast", n, 10'000, &offsets);
  std::filesystem::remove_all(root);
  Cmd prep = RunCapture({iotwin, "replay", trace, "--root", root, "--prepare-only", "--cache",
                         "warm", "--json"});
  if (prep.status != 0) {
    std::fprintf(stderr, "prepare failed: %s\n", prep.out.c_str());
    return 1;
  }
  std::string file = root + kPath;
  std::string iolog = dir + "/fast.iolog";
  {
    std::ofstream f(iolog);
    f << "fio version 2 iolog\n" << file << " add\n" << file << " open\n";
    for (uint64_t off : offsets) f << file << " read " << off << " 4096\n";
    f << file << " close\n";
  }
  auto iotwin_run = [&]() -> double {
    Cmd c = RunCapture({iotwin, "replay", trace, "--root", root, "--pace", "fast", "--cache",
                        "warm", "--json", "-q"});
    json s = ParseJson(c.out);
    if (c.status != 0 || s.is_null()) return 0;
    const json& p = s["per_op"]["pread64"];
    // IOPS of the reads over the replay's wall time (open/close included in the time).
    return p["count"].get<double>() / s["duration_s"].get<double>();
  };
  auto fio_run = [&](bool iolog_mode) -> double {
    std::vector<std::string> args = {"fio", "--name=r", "--output-format=json", "--thread",
                                     "--ioengine=psync", "--invalidate=0", "--bs=4k"};
    if (iolog_mode) {
      args.push_back("--read_iolog=" + iolog);
      args.push_back("--replay_no_stall=1");
    } else {
      args.push_back("--filename=" + file);
      args.push_back("--rw=randread");
      args.push_back("--size=" + std::to_string(kFileBytes));
      args.push_back("--number_ios=" + std::to_string(n));
      args.push_back("--norandommap");
      args.push_back("--randrepeat=0");
    }
    Cmd c = RunCapture(args);
    json j = ParseJson(c.out);
    if (c.status != 0 || j.is_null()) return 0;
    return j["jobs"][0]["read"]["iops"].get<double>();
  };
  // Warm the cache once through each path.
  iotwin_run();
  fio_run(false);
  std::vector<double> a, f_job, f_log;
  int pairs = smoke ? 1 : 5;
  for (int i = 0; i < pairs; i++) {
    a.push_back(iotwin_run());
    f_job.push_back(fio_run(false));
    f_log.push_back(fio_run(true));
  }
  double mi = Median(a), mj = Median(f_job), ml = Median(f_log);
  std::printf("\nfast replay of %llu random 4 KiB preads (page cache), medians of %d runs\n",
              static_cast<unsigned long long>(n), pairs);
  std::printf("  iotwin replay --pace fast  %10.0f IOPS\n", mi);
  std::printf("  fio randread (psync)       %10.0f IOPS   iotwin/fio = %.3f\n", mj, mj > 0 ? mi / mj : 0);
  std::printf("  fio read_iolog (no stall)  %10.0f IOPS   iotwin/fio = %.3f\n", ml, ml > 0 ? mi / ml : 0);
  results["fast_vs_fio"] = {{"ops", n},          {"runs", pairs},
                            {"iotwin_iops", a},  {"fio_randread_iops", f_job},
                            {"fio_iolog_iops", f_log},
                            {"ratio_vs_fio_randread", mj > 0 ? mi / mj : 0},
                            {"ratio_vs_fio_iolog", ml > 0 ? mi / ml : 0}};
  if (getloadavg(load, 3) > 0) results["loadavg_1min_at_end"] = load[0];
  if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}
