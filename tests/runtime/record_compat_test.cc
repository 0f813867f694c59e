// iotwin record with the compat syscall object (bpf/syscall.bpf.c built with -DIOT_NO_KFUNC_CAST,
// for kernels without the bpf_rdonly_cast kfunc such as Debian 12's 6.1), forced here with
// IOTWIN_BPF_COMPAT=1: it must record the same calls and the same file identities (dev, ino,
// size, position) as the fast object, and the trace header must say which object ran.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <tuple>

#include "record_check.h"

namespace iotwin::test {
namespace {

constexpr const char* kForceCompat = "IOTWIN_BPF_COMPAT=1";

struct Recorded {
  RunResult run;
  LoadedTrace trace;
};

Recorded Record(const std::string& trace, const std::vector<std::string>& command,
                const std::vector<std::string>& env) {
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  Recorded r;
  r.run = Run(argv, 120, env);
  r.trace = LoadTrace(trace);
  return r;
}

void ExpectClean(const Recorded& r) {
  EXPECT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_TRUE(r.trace.error.empty()) << r.trace.error;
  ASSERT_TRUE(r.trace.summary.has_value());
  EXPECT_EQ(LostInSummary(r.trace), 0u) << r.trace.summary->dump();
}

std::string SyscallReason(const LoadedTrace& t) {
  if (!t.meta.contains("layers") || !t.meta["layers"].contains("syscall")) return "";
  return t.meta["layers"]["syscall"].value("reason", "");
}

bool HasNote(const LoadedTrace& t, const std::string& prefix) {
  if (!t.meta.contains("capture") || !t.meta["capture"].contains("notes")) return false;
  for (const auto& n : t.meta["capture"]["notes"]) {
    if (n.is_string() && n.get<std::string>().rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Whether `iotwin check` finds the bpf_rdonly_cast kfunc (then record's default is the fast
// object).
bool KernelHasKfuncCast() {
  RunResult r = Run({IotwinBin(), "check", "--json"}, 60);
  auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("features")) return false;
  return j["features"]["kfunc_rdonly_cast"].value("supported", false);
}

// The kernel's dev_t of a stat(2) st_dev (major << 20 | minor), as records carry it.
uint32_t KernelDev(dev_t d) { return (major(d) << 20) | minor(d); }

TEST(RecordCompat, CompatObjectMatchesTheProgramsLog) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  mkdir((dir / "work").c_str(), 0755);
  Recorded r = Record(dir / "trace.iotwin", {TestProg("io_mix"), dir / "calls.log", dir / "work"},
                      {kForceCompat});
  ExpectClean(r);
  auto log = ReadLog(dir / "calls.log");
  EXPECT_GT(log.size(), 50u);
  auto problems = CompareCalls(log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  std::string reason = SyscallReason(r.trace);
  EXPECT_NE(reason.find("compat syscall object (forced by IOTWIN_BPF_COMPAT)"), std::string::npos)
      << reason;
  EXPECT_TRUE(HasNote(r.trace, "syscall: compat syscall object")) << r.trace.meta["capture"];
}

TEST(RecordCompat, FastAndCompatObjectsSeeTheSameFileIdentities) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  // pread_loop wants >= 1 MiB; an odd size shows that i_size is read, not rounded.
  std::string data = dir / "data.bin";
  {
    FILE* f = fopen(data.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::vector<char> block(4096, 'x');
    for (int i = 0; i < 300; i++) fwrite(block.data(), 1, block.size(), f);
    fwrite(block.data(), 1, 123, f);
    fclose(f);
  }
  struct stat st {};
  ASSERT_EQ(stat(data.c_str(), &st), 0);
  std::vector<std::string> command = {TestProg("pread_loop"), data, "200"};

  Recorded fast = Record(dir / "fast.iotwin", command, {});
  Recorded compat = Record(dir / "compat.iotwin", command, {kForceCompat});
  ExpectClean(fast);
  ExpectClean(compat);
  if (KernelHasKfuncCast()) {
    EXPECT_NE(SyscallReason(fast.trace).find("fast syscall object"), std::string::npos)
        << SyscallReason(fast.trace);
    EXPECT_FALSE(HasNote(fast.trace, "syscall:")) << fast.trace.meta["capture"];
  }
  EXPECT_NE(SyscallReason(compat.trace).find("compat syscall object"), std::string::npos)
      << SyscallReason(compat.trace);

  // The data file, by the identity each object read in the kernel: every call on it carries
  // stat(2)'s dev, ino and size, and both runs see it as often.
  auto data_calls = [&](const LoadedTrace& t) {
    size_t n = 0;
    for (const auto& s : t.syscalls) {
      if (s.sc.ino != st.st_ino) continue;
      n++;
      EXPECT_EQ(s.sc.dev, KernelDev(st.st_dev)) << OpName(s.sc.op);
      EXPECT_EQ(s.sc.fsize, static_cast<uint64_t>(st.st_size)) << OpName(s.sc.op);
      EXPECT_EQ(s.sc.ftype, S_IFREG >> 12) << OpName(s.sc.op);
    }
    return n;
  };
  size_t fast_n = data_calls(fast.trace);
  size_t compat_n = data_calls(compat.trace);
  EXPECT_GE(fast_n, 200u);  // the 200 preads, plus open/lseek/close
  EXPECT_EQ(compat_n, fast_n);

  // Every other regular file both runs touched (the program, its libraries) has one identity
  // in both traces.
  using Identity = std::tuple<uint32_t, uint64_t, uint16_t>;  // dev, size, ftype
  std::map<uint64_t, Identity> fast_files;
  for (const auto& s : fast.trace.syscalls) {
    if (s.sc.ino != 0 && s.sc.ftype == (S_IFREG >> 12)) {
      fast_files[s.sc.ino] = {s.sc.dev, s.sc.fsize, s.sc.ftype};
    }
  }
  size_t common = 0;
  for (const auto& s : compat.trace.syscalls) {
    if (s.sc.ino == 0 || s.sc.ftype != (S_IFREG >> 12)) continue;
    auto it = fast_files.find(s.sc.ino);
    if (it == fast_files.end() || std::get<0>(it->second) != s.sc.dev) continue;
    common++;
    EXPECT_EQ(it->second, Identity(s.sc.dev, s.sc.fsize, s.sc.ftype))
        << OpName(s.sc.op) << " ino " << s.sc.ino;
  }
  EXPECT_GT(common, fast_n);  // the data file and at least one library
}

}  // namespace
}  // namespace iotwin::test
