// iotwin record, processes and life cycle: exit status, kills, start failures, many children,
// --duration, --pid attach, --cgroup, --user, signals to iotwin, bad input.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "record_check.h"

namespace iotwin::test {
namespace {

std::string MakeDataFile(const TempDir& dir, size_t bytes = 1 << 20) {
  std::string path = dir / "data.bin";
  std::ofstream out(path, std::ios::binary);
  std::string block(4096, 'd');
  for (size_t n = 0; n < bytes; n += block.size()) out << block;
  return path;
}

int ReadPid(const std::string& path) {
  std::ifstream in(path);
  int pid = 0;
  in >> pid;
  return pid;
}

const iot_proc* FindProc(const LoadedTrace& t, uint16_t kind, uint32_t tgid) {
  for (const auto& p : t.procs) {
    if (p.kind == kind && p.tgid == tgid) return &p;
  }
  return nullptr;
}

TEST(RecordProcess, ExitStatusOfTheCommandIsPropagated) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "t.iotwin";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--", "/bin/sh", "-c", "exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["exit_status"], 7);
  EXPECT_EQ((*t.summary)["stop_reason"], "command exited");
  EXPECT_EQ(t.meta["command"], nlohmann::json({"/bin/sh", "-c", "exit 7"}));
  EXPECT_GE(t.clocks, 2u);  // anchors at start and end
}

TEST(RecordProcess, KilledCommandLeavesAValidTraceThatSaysSo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin", pidfile = dir / "pid";
  Spawned rec = Spawn({IotwinBin(), "record", "-o", trace, "--", TestProg("io_wait"), dir / "log",
                       pidfile, dir / "never", data});
  ASSERT_TRUE(WaitForFile(pidfile)) << "the traced program never started";
  int pid = ReadPid(pidfile);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  RunResult r = WaitSpawned(rec);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_FALSE(t.truncated);
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["exit_status"], 128 + SIGKILL);
  const iot_proc* exit = FindProc(t, IOT_PROC_EXIT, static_cast<uint32_t>(pid));
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ(exit->exit_code & 0x7f, SIGKILL);
  EXPECT_TRUE(exit->flags & IOT_PROCF_KILLED);
  EXPECT_TRUE(exit->flags & IOT_PROCF_GROUP_DEAD);
}

TEST(RecordProcess, CommandThatCannotStartIsAClearErrorAndLeavesNoFile) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "t.iotwin";
  RunResult r =
      test::Run({IotwinBin(), "record", "-o", trace, "--", "/nonexistent/iotwin-no-such-cmd"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot run '/nonexistent/iotwin-no-such-cmd'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
  EXPECT_FALSE(std::filesystem::exists(trace));

  std::string not_exec = dir / "script";
  std::ofstream(not_exec) << "#!/bin/sh\n";
  chmod(not_exec.c_str(), 0644);
  r = test::Run({IotwinBin(), "record", "-o", trace, "--", not_exec});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(RecordProcess, BadInputIsRefusedWithoutOutput) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "t.iotwin";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--pid", "2147483"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no process with pid 2147483"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "record", "-o", trace});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nothing to trace"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "record", "-o", trace, "--cgroup", "iotwin-no-such-cgroup"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no cgroup"), std::string::npos) << r.err;
  r = test::Run(
      {IotwinBin(), "record", "-o", trace, "--user", "iotwin-no-such-user", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no such user"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("e.g. --user nobody"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "record", "-o", trace, "--uprobe", "nocolon", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(RecordProcess, WithoutPrivilegesItSaysSo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "no setpriv";
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  std::string trace = dir / "t.iotwin";
  RunResult r = test::Run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           IotwinBin(), "record", "-o", trace, "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs root"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
}

TEST(RecordProcess, ManyChildrenAreAllFollowed) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir, 512 * 500 + 4096), trace = dir / "t.iotwin";
  RunResult r =
      test::Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_forker"), data, "500"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(LostInSummary(t), 0u) << t.summary->dump();
  std::set<uint32_t> forked, exited;
  uint32_t parent = 0;
  for (const auto& p : t.procs) {
    if (p.kind == IOT_PROC_START) parent = p.tgid;
  }
  for (const auto& p : t.procs) {
    if (p.kind == IOT_PROC_FORK && p.tgid == parent) forked.insert(p.child_tgid);
    if (p.kind == IOT_PROC_EXIT && (p.flags & IOT_PROCF_GROUP_DEAD) && forked.count(p.tgid)) {
      exited.insert(p.tgid);
    }
  }
  EXPECT_EQ(forked.size(), 500u);
  EXPECT_EQ(exited.size(), 500u);
  // Child i preads offset 512*i: every offset once, each from a forked child.
  std::set<uint64_t> offsets;
  for (const auto& s : t.syscalls) {
    if (s.sc.op == IOT_OP_PREAD64 && forked.count(s.sc.tgid)) {
      EXPECT_EQ(s.sc.ret, 512);
      offsets.insert(s.sc.offset);
    }
  }
  EXPECT_EQ(offsets.size(), 500u);
  if (!offsets.empty()) {
    EXPECT_EQ(*offsets.rbegin(), 512u * 499);
  }
}

TEST(RecordProcess, DurationStopsTheTraceButNotTheCommand) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin";
  auto start = std::chrono::steady_clock::now();
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--duration", "1", "--",
                           TestProg("io_ticker"), data, "2.5", "3"});
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3) << r.err;  // the command's status, once it finished
  EXPECT_GE(elapsed, 2.4);
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["stop_reason"], "duration");
  double dur = (*t.summary)["duration_ns"].get<uint64_t>() / 1e9;
  EXPECT_GE(dur, 0.95);
  EXPECT_LT(dur, 2.0);
  uint64_t first = UINT64_MAX, last = 0;
  size_t preads = 0;
  for (const auto& s : t.syscalls) {
    if (s.sc.op != IOT_OP_PREAD64) continue;
    preads++;
    first = std::min(first, s.sc.ts);
    last = std::max(last, s.sc.ts);
  }
  EXPECT_GT(preads, 10u);
  EXPECT_LT((last - first) / 1e9, 1.3);
}

TEST(RecordProcess, AttachToARunningProcessSnapshotsItsDescriptors) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin", pidfile = dir / "pid";
  std::string go = dir / "go", log = dir / "log";
  Spawned prog = Spawn({TestProg("io_wait"), log, pidfile, go, data});
  ASSERT_TRUE(WaitForFile(pidfile));
  int pid = ReadPid(pidfile);
  Spawned rec = Spawn({IotwinBin(), "record", "-o", trace, "--pid", std::to_string(pid)});
  ASSERT_TRUE(WaitForFile(trace));
  usleep(300 * 1000);  // the trace file exists once the BPF programs are attached
  std::ofstream(go) << "go\n";
  RunResult pr = WaitSpawned(prog);
  EXPECT_EQ(pr.exit_code, 0) << pr.err;
  RunResult r = WaitSpawned(rec, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;

  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["stop_reason"], "all processes exited");
  EXPECT_EQ(t.meta["capture"]["mode"], "pid");
  const iot_proc* attach = FindProc(t, IOT_PROC_ATTACH, static_cast<uint32_t>(pid));
  ASSERT_NE(attach, nullptr);
  EXPECT_STREQ(attach->comm, "io_wait");

  std::vector<nlohmann::json> calls = ReadLog(log);
  ASSERT_EQ(calls.size(), 3u);
  int fd = calls[0]["fd"].get<int>();
  struct stat st;
  ASSERT_EQ(stat(data.c_str(), &st), 0);
  bool snapshot = false;
  for (size_t i = 0; i < t.fd_snapshots.size(); i++) {
    const auto& s = t.fd_snapshots[i];
    if (s.tgid == static_cast<uint32_t>(pid) && s.fd == fd) {
      snapshot = true;
      EXPECT_EQ(s.ino, st.st_ino);
      EXPECT_EQ(s.fsize, static_cast<uint64_t>(st.st_size));
      EXPECT_EQ(t.fd_snapshot_paths[i], std::filesystem::canonical(data).string());
    }
  }
  EXPECT_TRUE(snapshot) << "no snapshot of fd " << fd;
  EXPECT_FALSE(t.map_snapshots.empty());  // at least the program's own executable
  auto problems = CompareCalls(calls, t);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  for (const auto& s : t.syscalls) {
    if (s.sc.op == IOT_OP_PREAD64 && s.sc.fd == fd) {
      EXPECT_EQ(s.sc.ino, st.st_ino);
    }
  }
}

TEST(RecordProcess, SignalToIotwinStopsCleanlyAfterTheCommand) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin";
  Spawned rec =
      Spawn({IotwinBin(), "record", "-o", trace, "--", TestProg("io_ticker"), data, "30"});
  ASSERT_TRUE(WaitForFile(trace));
  usleep(500 * 1000);
  kill(rec.pid, SIGTERM);
  RunResult r = WaitSpawned(rec, 20);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;  // the command died of the forwarded signal
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_FALSE(t.truncated);
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["stop_reason"], "signal Terminated");
  bool killed = false;
  for (const auto& p : t.procs) {
    if (p.kind == IOT_PROC_EXIT && (p.exit_code & 0x7f) == SIGTERM) killed = true;
  }
  EXPECT_TRUE(killed);
}

TEST(RecordProcess, UserDropsPrivilegesOfTheCommand) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  std::string trace = dir / "t.iotwin", out = dir / "uid";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--user", "nobody", "--", "/bin/sh",
                           "-c", "id -u > " + out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFileText(out), "65534\n");
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.meta["capture"]["user"], "nobody");
  bool opened = false;
  for (const auto& s : t.syscalls) {
    if (s.path == out && s.sc.ret >= 0) opened = true;
  }
  EXPECT_TRUE(opened);
}

TEST(RecordProcess, CgroupTracesItsMembersOnly) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  std::string root;
  {
    std::ifstream in("/proc/self/mounts");
    std::string dev, mnt, type, rest;
    while (root.empty() && in >> dev >> mnt >> type && std::getline(in, rest)) {
      if (type == "cgroup2") root = mnt;
    }
  }
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
  std::string name = "iotwin-test-" + std::to_string(getpid());
  std::string cg = root + "/" + name;
  ASSERT_EQ(mkdir(cg.c_str(), 0755), 0) << strerror(errno);
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin";
  Spawned member = Spawn({TestProg("io_ticker"), data, "4"});
  Spawned outsider = Spawn({TestProg("io_ticker"), data, "4"});
  std::ofstream(cg + "/cgroup.procs") << member.pid << "\n";
  RunResult r =
      test::Run({IotwinBin(), "record", "-o", trace, "--cgroup", name, "--duration", "1.5"});
  RunResult mr = WaitSpawned(member), orr = WaitSpawned(outsider);
  rmdir(cg.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  size_t member_calls = 0, outsider_calls = 0;
  for (const auto& s : t.syscalls) {
    if (s.sc.tgid == static_cast<uint32_t>(member.pid)) member_calls++;
    if (s.sc.tgid == static_cast<uint32_t>(outsider.pid)) outsider_calls++;
  }
  EXPECT_GT(member_calls, 20u);
  EXPECT_EQ(outsider_calls, 0u);
  EXPECT_EQ(t.meta["capture"]["mode"], "cgroup");
}

}  // namespace
}  // namespace iotwin::test
