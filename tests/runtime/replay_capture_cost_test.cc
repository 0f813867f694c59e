// Think time without the capture's cost: `iotwin record` measures what tracing adds to each call
// and keeps it in the trace's header (capture.cost); `gaps` and `original` pacing take it out of
// the recorded think time unless --raw-gaps.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "memory_trace.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

// A real recording's header holds a measured cost: positive (the programs run on every traced
// call) and below what any capture costs per call (20 us; a few hundred ns to a few us here).
TEST(ReplayCaptureCost, RecordingStoresAPositiveBoundedCostPerCall) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  const std::string data = tmp / "loop.dat";
  {
    int fd = open(data.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    std::vector<char> buf(1 << 20, 'l');
    ASSERT_EQ(write(fd, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
    close(fd);
  }
  const std::string trace = tmp / "t.iotwin";
  RunResult rec = RecordCommand(trace, {"--no-block", "--no-sched", "--no-nvme"},
                                {TestProg("pread_loop"), data, "2000"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  RunResult dump = test::Run({IotwinBin(), "dump", "--json", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  nlohmann::json j = nlohmann::json::parse(dump.out, nullptr, false);
  const auto ptr = nlohmann::json::json_pointer("/meta/capture/cost");
  ASSERT_TRUE(j.contains(ptr)) << dump.out.substr(0, 2000);
  const auto& cost = j.at(ptr);
  EXPECT_GT(cost["per_call_ns"].get<uint64_t>(), 0u) << cost.dump();
  EXPECT_LT(cost["per_call_ns"].get<uint64_t>(), 20'000u) << cost.dump();
  EXPECT_GT(cost["traced_call_ns"].get<uint64_t>(), cost["untraced_call_ns"].get<uint64_t>());
}

// The calibration runs a traced process before the workload; the files it touches (iotwin's own
// libraries, libc among them) are the workload's too, and the workload's first touch of each must
// still record its page-cache state, which `--cache as-captured` replays.
TEST(ReplayCaptureCost, CalibrationLeavesTheWorkloadsCacheStatesWhole) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  const std::string trace = tmp / "t.iotwin";
  RunResult rec = RecordCommand(trace, {"--no-block", "--no-sched", "--no-nvme"}, {"/bin/true"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  struct stat libc_st {};
  ASSERT_EQ(stat("/lib/x86_64-linux-gnu/libc.so.6", &libc_st), 0);
  RunResult dump = test::Run({IotwinBin(), "dump", "--records", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const std::string wanted = "ino=" + std::to_string(libc_st.st_ino) + " ";
  bool libc = false;
  size_t at = 0;
  while ((at = dump.out.find("\ncache_state ", at)) != std::string::npos) {
    const size_t end = dump.out.find('\n', at + 1);
    if (dump.out.substr(at, end - at).find(wanted) != std::string::npos) libc = true;
    at = end;
  }
  EXPECT_TRUE(libc) << "no cache_state of libc (" << wanted << "), which /bin/true maps\n"
                    << dump.out.substr(0, 4000);
}

constexpr int kCalls = 4000;
constexpr uint64_t kSpacingNs = 100'000;  // recorded: a call every 100 us
constexpr uint64_t kCostNs = 95'000;      // of which the capture's, per the header

// One thread reading a 4 KiB page in a loop, a call every 100 us, of which the header says the
// capture took 95 us per call: the untraced program ran one every 5 us.
std::string LoopTrace(const TempDir& tmp) {
  TraceBuilder b;
  b.meta()["capture"]["cost"] = {{"per_call_ns", kCostNs}};
  b.step = kSpacingNs;
  b.Thread(100, 100);
  b.Openat(100, "/data/page", O_RDONLY, 3, 4096);
  for (int i = 0; i < kCalls; i++) b.Pread(100, 3, 0, 4096, 4096, 4096);
  b.Close(100, 3);
  return WriteTrace(b, tmp / "loop.iotwin");
}

double WindowS(const std::string& trace, const std::string& root, const std::string& pace,
               bool raw) {
  std::vector<std::string> args = {trace, "--root", root, "--pace", pace, "--json", "-q"};
  if (raw) args.push_back("--raw-gaps");
  auto r = RunReplayCmd(args);
  EXPECT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  if (!r.summary.is_object() || !r.summary.contains("window_s")) return -1;
  return r.summary["window_s"].get<double>();
}

// Raw, the replay keeps the traced pace: 4,000 calls 100 us apart (gaps: less the 2 us floor),
// about 0.39 s; compensated, 5 us apart, about 0.02 s. The margin asked, 0.2 s, is ten times
// what the compensated replay takes: noise would have to stall that one replay alone for it.
TEST(ReplayCaptureCost, CompensatedReplayOfALoopIsFasterThanRaw) {
  TempDir tmp;
  const std::string trace = LoopTrace(tmp);
  for (const char* pace_name : {"gaps", "original"}) {
    const std::string pace = pace_name;
    SCOPED_TRACE(pace);
    const double raw = WindowS(trace, tmp / ("root-raw-" + pace), pace, true);
    const double compensated = WindowS(trace, tmp / ("root-" + pace), pace, false);
    EXPECT_GT(raw, kCalls * (kSpacingNs - 2'000) / 1e9 * 0.95);
    EXPECT_GE(compensated, 0);
    EXPECT_LT(compensated + 0.2, raw) << "raw " << raw << " s, compensated " << compensated;
    RecordProperty(pace + "_raw_s", std::to_string(raw));
    RecordProperty(pace + "_compensated_s", std::to_string(compensated));
  }
}

}  // namespace
}  // namespace iotwin::test
