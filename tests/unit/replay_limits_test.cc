// What a replay may take from the machine: threads (thread_limit.h), buffer memory
// (payload_pool.h) and bytes written (write_budget.h), against traces that claim too much.
#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "asan_check.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/fill.h"
#include "replay/plan.h"
#include "replay/replay.h"
#include "replay/thread_limit.h"
#include "replay/write_budget.h"
#include "trace_builder.h"

namespace iotwin::replay {
namespace {

using test::TraceBuilder;

// A temporary directory removed with its contents, even when an assertion fails.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string t = std::string(tmp && *tmp ? tmp : "/tmp") + "/iotwin-limits-XXXXXX";
    path_ = mkdtemp(t.data()) ? t : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `threads` threads of one process, each creating its own file and writing `len` bytes to it
// (`read_only`: the file is opened O_RDONLY and the write fails with EBADF, as recorded, so the
// replay allocates buffers for `len` bytes and writes nothing).
TraceBuilder ManyWriters(uint32_t threads, uint64_t len, bool read_only = false) {
  TraceBuilder b;
  b.step = 1'000;
  for (uint32_t t = 0; t < threads; t++) {
    const uint32_t tid = 1000 + t;
    const int fd = static_cast<int>(3 + t);
    b.Thread(1000, tid);
    b.Openat(tid, "/data/f" + std::to_string(t), O_CREAT | (read_only ? O_RDONLY : O_WRONLY), fd);
    b.Pwrite(tid, fd, 0, len, read_only ? -EBADF : static_cast<int64_t>(len));
    b.Close(tid, fd);
  }
  return b;
}

ReplayPlan PlanOf(const model::TraceModel& m) {
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  EXPECT_TRUE(mapper.ok());
  auto p = BuildPlan(m, *mapper, 1.0);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

bool DirIsEmpty(const std::string& dir) {
  return std::filesystem::is_empty(dir);
}

// ---- bytes written -----------------------------------------------------------------------

TEST(ReplayLimits, PlannedWritesAreWhatTheCallsWriteAndNoMore) {
  TraceBuilder b;
  b.Openat(7, "/data/big", O_CREAT | O_WRONLY, 3);
  for (uint64_t k = 0; k < 12; k++) b.Pwrite(7, 3, k << 26, uint64_t{1} << 26, int64_t{1} << 26);
  // A length no write can have, with the result the trace holds: the replay writes the result.
  b.Write(7, 3, UINT64_MAX, 4096);
  // The same length where the write failed: the kernel's cap, not 2^64 - 1.
  b.Write(7, 3, UINT64_MAX, -EFAULT);
  // An offset at the end of the number line: the end saturates, never wraps.
  b.Pwrite(7, 3, UINT64_MAX - 10, 4096, 4096);
  auto m = test::BuildModel(b);
  ASSERT_TRUE(m);
  ReplayPlan plan = PlanOf(*m);
  EXPECT_EQ(plan.write_calls, 15u);
  const uint64_t expected = (uint64_t{12} << 26) + 4096 + kMaxIoBytes + 4096;
  EXPECT_EQ(plan.write_bytes, expected);
  // The file ends at the saturated end: growth is counted, not wrapped to a small number.
  EXPECT_EQ(plan.growth_bytes, UINT64_MAX);
  ASSERT_EQ(plan.growth_by_base.size(), 1u);
}

TEST(ReplayLimits, GrowthCountsOnlyBytesPastThePreparedSize) {
  TraceBuilder b;
  // A pre-existing 1 MiB file rewritten in place, then extended by 64 KiB.
  b.Openat(7, "/data/old", O_WRONLY, 3, uint64_t{1} << 20);
  b.Pwrite(7, 3, 0, uint64_t{1} << 20, int64_t{1} << 20);
  b.Pwrite(7, 3, uint64_t{1} << 20, 65536, 65536);
  auto m = test::BuildModel(b);
  ASSERT_TRUE(m);
  ReplayPlan plan = PlanOf(*m);
  EXPECT_EQ(plan.write_bytes, (uint64_t{1} << 20) + 65536);
  EXPECT_EQ(plan.growth_bytes, 65536u);
}

TEST(ReplayLimits, DryRunStatesWhatTheReplayWrites) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  TraceBuilder b;
  b.Openat(7, "/data/big", O_CREAT | O_WRONLY, 3);
  for (uint64_t k = 0; k < 12; k++) b.Pwrite(7, 3, k << 26, uint64_t{1} << 26, int64_t{1} << 26);
  const std::string trace = dir.path() + "/t.iotwin";
  ASSERT_TRUE(b.WriteFile(trace).ok());
  ReplayOptions o;
  o.trace = trace;
  o.dry_run = true;
  o.progress = false;
  auto r = RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->summary["writes"]["bytes"], uint64_t{12} << 26) << r->summary.dump();
  EXPECT_EQ(r->summary["writes"]["calls"], 12u);
  EXPECT_NE(r->text.find("12 calls write up to 805306368 bytes"), std::string::npos) << r->text;
}

TEST(ReplayLimits, WriteBudgetStopsAtMaxWrite) {
  WriteBudget budget(1000, {});
  EXPECT_TRUE(budget.Admit(600));
  EXPECT_FALSE(budget.Admit(500));
  EXPECT_TRUE(budget.stopped());
  EXPECT_NE(budget.why().find("--max-write 1000"), std::string::npos) << budget.why();
  EXPECT_FALSE(budget.Admit(1));  // stays stopped
}

TEST(ReplayLimits, WriteBudgetStopsBeforeTheFileSystemFills) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  WriteBudget budget(0, {dir.path()});
  EXPECT_TRUE(budget.Admit(4096));
  // More than any file system here holds.
  EXPECT_FALSE(budget.Admit(uint64_t{1} << 62));
  EXPECT_NE(budget.why().find("free for this replay"), std::string::npos) << budget.why();
  // Huge admissions never wrap the running total into a small one.
  WriteBudget capped(UINT64_MAX - 1, {});
  EXPECT_TRUE(capped.Admit(UINT64_MAX - 2));
  EXPECT_FALSE(capped.Admit(UINT64_MAX - 2));
}

// ---- threads -------------------------------------------------------------------------------

TEST(ReplayLimits, TooManyThreadsAreRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string root = dir.path() + "/root";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  const std::string trace = dir.path() + "/t.iotwin";
  ASSERT_TRUE(ManyWriters(600, 4096).WriteFile(trace).ok());
  ReplayOptions o;
  o.trace = trace;
  o.root = root;
  o.pace = PaceMode::kFast;
  o.progress = false;
  o.max_threads = 500;
  auto r = RunReplay(o);
  ASSERT_FALSE(r.ok());
  const std::string msg = r.status().ToString();
  EXPECT_NE(msg.find("needs 601 threads"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-threads 500"), std::string::npos) << msg;
  EXPECT_TRUE(DirIsEmpty(root));

  // The dry run says so.
  o.dry_run = true;
  auto d = RunReplay(o);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->summary["threads_needed"], 601u);
  EXPECT_EQ(d->summary["thread_limit"]["limit"], 500u);
  EXPECT_NE(d->text.find("the replay would be refused"), std::string::npos) << d->text;
}

TEST(ReplayLimits, DefaultCeilingRefusesTwentyThousandThreads) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string root = dir.path() + "/root";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  const std::string trace = dir.path() + "/t.iotwin";
  ASSERT_TRUE(ManyWriters(20000, 0).WriteFile(trace).ok());
  ReplayOptions o;
  o.trace = trace;
  o.root = root;
  o.pace = PaceMode::kFast;
  o.backend = BackendKind::kNull;
  o.progress = false;
  auto r = RunReplay(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("needs 20001 threads"), std::string::npos)
      << r.status().ToString();
  EXPECT_TRUE(DirIsEmpty(root));
}

// Peak memory of a child running `fn` (KiB), or -1 when it failed.
template <typename Fn>
long ChildPeakKib(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn() ? 0 : 1);
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return ru.ru_maxrss;
}

TEST(ReplayLimits, BufferMemoryStaysBoundedWhateverTheThreadCount) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string root = dir.path() + "/root";
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  const std::string trace = dir.path() + "/t.iotwin";
  // 1500 threads each with a 1 MiB write: at 1 MiB of filled buffer a thread, 1.5 GiB.
  ASSERT_TRUE(ManyWriters(1500, uint64_t{1} << 20, true).WriteFile(trace).ok());
  long kib = ChildPeakKib([&] {
    ReplayOptions o;
    o.trace = trace;
    o.root = root;
    o.pace = PaceMode::kFast;
    o.fill = FillSpec{FillKind::kRandom, 1.0};
    o.progress = false;
    auto r = RunReplay(o);
    if (!r.ok()) std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return r.ok() && r->exit_code == 0;
  });
  ASSERT_GT(kib, 0) << "the replay failed";
  std::printf("peak RSS of a 1500-thread replay: %ld KiB\n", kib);
#ifndef IOTWIN_TEST_ASAN
  EXPECT_LT(kib, 600 * 1024) << "peak RSS " << kib << " KiB";
#endif
  EXPECT_TRUE(std::filesystem::exists(root + "/data/f1499"));
}

// Tasks (threads) the real uid `uid` runs, as RLIMIT_NPROC counts them.
uint64_t TasksOf(uid_t uid) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    std::ifstream in(e.path() / "status");
    std::string line;
    bool mine = false;
    uint64_t threads = 0;
    while (std::getline(in, line)) {
      if (line.rfind("Uid:", 0) == 0) mine = std::strtoul(line.c_str() + 4, nullptr, 10) == uid;
      if (line.rfind("Threads:", 0) == 0) threads = std::strtoull(line.c_str() + 8, nullptr, 10);
    }
    if (mine) n += threads;
  }
  return n;
}

// The system refuses a thread halfway through Setup: an error naming it, and the threads already
// started are released (no std::terminate, no hang).
TEST(ReplayLimits, ThreadCreationFailureIsAnErrorNotAnAbort) {
  TraceBuilder b = ManyWriters(60, 4096);
  auto m = test::BuildModel(b);
  ASSERT_TRUE(m);
  ReplayPlan plan = PlanOf(*m);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
      _exit(4);
    }
    const rlim_t cap = TasksOf(getuid()) + 20;
    rlimit rl{cap, cap};
    if (setrlimit(RLIMIT_NPROC, &rl) != 0) _exit(5);
    ReplayOptions o;
    o.backend = BackendKind::kNull;
    o.pace = PaceMode::kFast;
    auto backend = MakeNullBackend();
    Status st;
    {
      ReplayEngine engine(plan, o, backend.get());
      st = engine.Setup();
    }
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    if (st.ok()) _exit(2);
    _exit(st.ToString().find("cannot start replay thread") != std::string::npos ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 4) GTEST_SKIP() << "cannot become uid 65534";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace iotwin::replay
