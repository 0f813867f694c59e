// Replayed timing of a real program: known_io (two threads, each 300 pwrites of 4 KiB, an fsync,
// 300 preads, back to back) is recorded, then replayed with --record in gaps and original
// pacing; the replay's active span (its first to last data call, from its own recording) must
// be close to the recorded one.
//
// Tolerances are generous for a shared 2-core VM, where the fsyncs alone vary by milliseconds
// from run to run: the fastest of three replays may exceed the recorded span by 20% plus 4 ms,
// and the slowest must reach 70% of it. A replay half again as long as the recording (87 ms of
// calls against 57 ms) fails.
#include <algorithm>
#include <cstdint>
#include <string>

#include "record_check.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

// First enter to last exit of known_io's data calls (4 KiB pwrite64 and pread64, fsync) in the
// trace at `path`; 0 when it holds none.
uint64_t DataCallSpanNs(const std::string& path, size_t* calls) {
  LoadedTrace t = LoadTrace(path);
  EXPECT_TRUE(t.error.empty()) << path << ": " << t.error;
  uint64_t first = UINT64_MAX, last = 0;
  *calls = 0;
  for (const SyscallRec& s : t.syscalls) {
    // The 4 KiB transfers are known_io's own (the loader's preads are of other sizes).
    const bool transfer = (s.sc.op == IOT_OP_PWRITE64 || s.sc.op == IOT_OP_PREAD64) &&
                          s.sc.length == 4096;
    if (!transfer && s.sc.op != IOT_OP_FSYNC) continue;
    ++*calls;
    first = std::min<uint64_t>(first, s.sc.ts);
    last = std::max<uint64_t>(last, s.sc.ts + s.sc.dur);
  }
  return *calls ? last - first : 0;
}

class ReplayTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    IOTWIN_REQUIRE_BPF_OR_SKIP();
    char tmpl[] = "/var/tmp/iotwin-replay-timing-XXXXXX";  // a disk file system: fsync is real
    ASSERT_TRUE(mkdtemp(tmpl));
    base_ = tmpl;
    const std::string data = base_ + "/data";
    ASSERT_EQ(mkdir(data.c_str(), 0755), 0);
    orig_ = base_ + "/orig.iotwin";
    RunResult rec = test::Run({IotwinBin(), "record", "-o", orig_, "--no-status", "--",
                         TestProg("known_io"), data},
                        120);
    ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
    size_t calls = 0;
    recorded_span_ = DataCallSpanNs(orig_, &calls);
    ASSERT_EQ(calls, 2u * 601u) << "known_io's data calls are not all in its recording";
  }
  void TearDown() override {
    if (!base_.empty()) test::Run({"/bin/rm", "-rf", base_}, 60);
  }

  // The data-call spans of `tries` recorded replays in `pace`, ns, shortest first.
  std::vector<uint64_t> ReplaySpans(const std::string& pace, int tries) {
    std::vector<uint64_t> spans;
    for (int i = 0; i < tries; i++) {
      const std::string tag = pace + std::to_string(i);
      const std::string rep = base_ + "/" + tag + ".iotwin";
      auto r = RunReplayCmd({orig_, "--root", base_ + "/root-" + tag, "--pace", pace, "--record",
                             rep, "--json", "-q"},
                            180);
      EXPECT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
      if (r.run.exit_code != 0) return {};
      EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump();
      size_t calls = 0;
      const uint64_t span = DataCallSpanNs(rep, &calls);
      EXPECT_EQ(calls, 2u * 601u) << pace << ": the replay's recording lacks data calls";
      spans.push_back(span);
    }
    std::sort(spans.begin(), spans.end());
    return spans;
  }

  std::string base_, orig_;
  uint64_t recorded_span_ = 0;
};

constexpr uint64_t kSlackNs = 4'000'000;

// The fastest of three replays bounds the replay's own overhead (a slower one may have met a
// slower disk: the toy's fsyncs dominate it); the slowest bounds how far pacing may run ahead of
// the recorded gaps (a faster one may have met a faster disk).
void ExpectSpans(const std::vector<uint64_t>& spans, uint64_t recorded, const char* pace) {
  ASSERT_FALSE(spans.empty());
  EXPECT_LE(spans.front(), recorded * 120 / 100 + kSlackNs)
      << pace << " replay spans " << spans.front() / 1e6 << " ms at best against "
      << recorded / 1e6 << " ms recorded";
  EXPECT_GE(spans.back(), recorded * 70 / 100)
      << pace << " replay spans " << spans.back() / 1e6 << " ms at most against "
      << recorded / 1e6 << " ms recorded";
}

TEST_F(ReplayTiming, GapsPacingSpansTheRecordedActiveWindow) {
  if (base_.empty()) return;  // skipped in SetUp
  ExpectSpans(ReplaySpans("gaps", 3), recorded_span_, "gaps");
}

TEST_F(ReplayTiming, OriginalPacingSpansTheRecordedActiveWindow) {
  if (base_.empty()) return;
  ExpectSpans(ReplaySpans("original", 3), recorded_span_, "original");
}

}  // namespace
}  // namespace iotwin::test
