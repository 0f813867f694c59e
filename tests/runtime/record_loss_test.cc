// iotwin record, losses: none at a moderate rate; when the ring is made too small and the
// consumer too slow, every lost event is counted, stored in the trace and reported.
#include <sys/stat.h>

#include "record_check.h"

namespace iotwin::test {
namespace {

std::string MakeDataFile(const TempDir& dir) {
  std::string path = dir / "data.bin";
  std::ofstream out(path, std::ios::binary);
  std::string block(4096, 'd');
  for (int i = 0; i < 256; i++) out << block;
  return path;
}

// preads of `path` (the loader's own preads of libraries are not counted).
size_t CountPreads(const LoadedTrace& t, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  size_t n = 0;
  for (const auto& s : t.syscalls) n += s.sc.op == IOT_OP_PREAD64 && s.sc.ino == st.st_ino;
  return n;
}

TEST(RecordLoss, NoEventLostAtAModerateRate) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--fail-on-loss", "--",
                           TestProg("pread_loop"), data, "100000", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(LostInSummary(t), 0u);
  EXPECT_TRUE(t.losts.empty());
  EXPECT_EQ(CountPreads(t, data), 200000u);
  EXPECT_EQ((*t.summary)["events"]["syscall"].get<uint64_t>(), t.syscalls.size());
}

TEST(RecordLoss, OverflowIsCountedStoredAndReported) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string data = MakeDataFile(dir), trace = dir / "t.iotwin";
  // A 1 MiB ring that the consumer looks at only every 300 ms cannot hold 300k calls.
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--ring-mb", "1", "--wake-kb",
                           "65536", "--poll-ms", "300", "--fail-on-loss", "--",
                           TestProg("pread_loop"), data, "300000"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("LOST"), std::string::npos) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  uint64_t lost = (*t.summary)["lost"]["syscall"].get<uint64_t>();
  EXPECT_GT(lost, 0u);
  // The LOST records are cumulative per CPU: their last values add up to the footer's count.
  std::map<uint16_t, uint64_t> last_per_cpu;
  for (const auto& l : t.losts) {
    if (l.source == IOT_SRC_SYSCALL) last_per_cpu[l.cpu] = l.count;
  }
  uint64_t sum = 0;
  for (auto& [cpu, n] : last_per_cpu) sum += n;
  EXPECT_EQ(sum, lost);
  // Nothing vanished: recorded + lost covers every pread (plus a few start-up calls, lost before
  // they could be told apart).
  size_t preads = CountPreads(t, data);
  EXPECT_LT(preads, 300000u);
  EXPECT_GE(preads + lost, 300000u);
  EXPECT_LE(preads + lost, 300000u + 300);
}

}  // namespace
}  // namespace iotwin::test
