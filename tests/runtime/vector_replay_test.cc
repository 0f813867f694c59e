// iotwin-workload vector-search --small --io libaio on an ext4 file system on a loop device: the
// index built first (not recorded: a user records the serving process, not its index build, and
// the build's journal writes would differ from run to run in the block stream), then 128 queries
// recorded with the block layer and replayed with --pace original and --pace gaps while
// recording the replay: in the replay's own trace each hop's batch is submitted whole (the
// recorded batch size) and only after every read of the previous batches completed, and
// compare's whole verdict passes (exit 0), the per-query measures (reads of each query,
// dependent hops per query, reads in flight per hop, per-query latency) and the block stream
// included, at thresholds for a loaded machine (below). A replay that serialises each
// batch (--async sync) fails on the batch depth.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "block_loop.h"
#include "record_check.h"

namespace iotwin::test {
namespace {

// The io_submit calls that carried requests, in order: their request counts.
std::vector<int64_t> SubmitBatches(const LoadedTrace& t) {
  std::vector<std::pair<uint64_t, int64_t>> calls;
  for (const auto& s : t.syscalls) {
    if (s.sc.op == IOT_OP_IO_SUBMIT && s.sc.ret > 0) calls.emplace_back(s.sc.ts, s.sc.ret);
  }
  std::sort(calls.begin(), calls.end());
  std::vector<int64_t> out;
  for (const auto& c : calls) out.push_back(c.second);
  return out;
}

// The io_submit call that carried each submission: the thread's latest io_submit entered at or
// before it (a batch's requests are stamped just after their call's entry, one nanosecond apart).
std::pair<uint32_t, uint64_t> CarryingSubmit(
    const std::map<uint32_t, std::vector<uint64_t>>& submit_entries, const iot_async_io& e) {
  auto it = submit_entries.find(e.tid);
  if (it == submit_entries.end()) return {e.tid, e.ts};
  auto after = std::upper_bound(it->second.begin(), it->second.end(), e.ts);
  if (after == it->second.begin()) return {e.tid, e.ts};
  return {e.tid, *std::prev(after)};
}

// Requests submitted while an earlier request had not completed (the search never does that:
// each hop waits for all of its reads), other than those of the same io_submit call.
size_t SubmittedBeforeEarlierCompleted(const LoadedTrace& t, size_t* completions) {
  std::map<uint32_t, std::vector<uint64_t>> submit_entries;  // tid -> io_submit entry times
  for (const auto& s : t.syscalls)
    if (s.sc.op == IOT_OP_IO_SUBMIT) submit_entries[s.sc.tid].push_back(s.sc.ts);
  for (auto& [tid, v] : submit_entries) std::sort(v.begin(), v.end());
  std::vector<size_t> order(t.asyncs.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const iot_async_io &a = t.asyncs[x], &b = t.asyncs[y];
    return a.ts != b.ts ? a.ts < b.ts : a.phase == IOT_AIO_SUBMIT && b.phase != IOT_AIO_SUBMIT;
  });
  std::set<uint64_t> in_flight;  // req_id
  size_t early = 0;
  bool batch_open = false;
  std::pair<uint32_t, uint64_t> batch{0, 0};  // (tid, entry time) of the open batch's io_submit
  for (size_t i : order) {
    const iot_async_io& e = t.asyncs[i];
    if (e.phase == IOT_AIO_SUBMIT) {
      const auto carrier = CarryingSubmit(submit_entries, e);
      if (!(batch_open && carrier == batch) && !in_flight.empty()) early++;
      batch_open = true;
      batch = carrier;
      in_flight.insert(e.req_id);
    } else if (e.phase == IOT_AIO_COMPLETE) {
      (*completions)++;
      in_flight.erase(e.req_id);
      batch_open = false;
    }
  }
  return early;
}

const nlohmann::json* Measure(const nlohmann::json& r, const std::string& name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return &m;
  return nullptr;
}

// compare's thresholds for this test, above its defaults where a loaded CI machine moves the
// measures. The loop device's reads are served by the loop worker thread from the page cache of
// its backing file, so its "device" time is CPU time that competes with the replay, its tracer
// and every other test, and differs between the recording and its replays by up to 10x on the
// loaded 2-core VM; compare judges a paced replay against the original paced with the replay's
// own call durations (docs/replay.md, "Pacing"), so what it judges is the replay's issuing, and
// what the machine's load adds to it between calls still counts. Measured (this test, 11 runs at
// load average 1.7 to 6 with concurrent builds; gaps' rates are judged here only because the
// thresholds below name them): iops-rel-err 0.0002-0.12 (original) and up to 0.17 (gaps), series
// errors up to 0.098, idle-rel-err up to 0.17, stall-ms up to 8, query latency p50 up to 0.26,
// iat-ks 0.015-0.09 (gaps) but 0.02-0.17 (original). The large values come from runs where the
// replayer was descheduled between calls; a call due before the previous one returned is paced
// at that return, where the replayer also pays its own cost of leaving one call and entering the
// next (4 us at the median on the loaded VM), which moves the short inter-arrival times and adds
// to a window with little think time. Each threshold is the worst measured with about half more;
// docs/validation.md judges the same scenario at the defaults on a quiet machine. A replay that
// ignored the dependence or the batches fails the per-query measures, judged at their defaults.
std::vector<std::string> LoadedMachineThresholds() {
  return {"--threshold", "iops-rel-err=0.25",          "--threshold", "throughput-rel-err=0.25",
          "--threshold", "iops-series-err=0.15",       "--threshold", "throughput-series-err=0.15",
          "--threshold", "thread-series-err=0.15",     "--threshold", "idle-rel-err=0.25",
          "--threshold", "stall-ms=15",                "--threshold", "iat-ks=0.25"};
}

TEST(VectorReplay, HopsStayDependentAndWholeAndComparePassesPerQuery) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  const RunResult build = test::Run({WorkloadBin(), "vector-search", "--small", "--phase", "build",
                                     "--dir", fs.path("w"), "--quiet"},
                                    120);
  ASSERT_EQ(build.exit_code, 0) << build.err;
  ASSERT_EQ(test::Run({"/bin/sync"}, 60).exit_code, 0);
  const std::string orig = dir / "orig.iotwin";
  const RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", orig, "--no-status", "--", WorkloadBin(), "vector-search",
       "--small", "--phase", "search", "--queries", "128", "--dir", fs.path("w"), "--io", "libaio",
       "--quiet"},
      180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const LoadedTrace original = LoadTrace(orig);
  ASSERT_TRUE(original.error.empty()) << original.error;
  const std::vector<int64_t> batches = SubmitBatches(original);
  ASSERT_GT(batches.size(), 1000u);

  for (const char* pace : {"original", "gaps"}) {
    SCOPED_TRACE(pace);
    const std::string rep = dir / (std::string(pace) + ".iotwin");
    const RunResult replay =
        test::Run({IotwinBin(), "replay", orig, "--root", fs.path(std::string("root-") + pace),
                   "--pace", pace, "--record", rep, "--quiet"},
                  180);
    ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
    const LoadedTrace r = LoadTrace(rep);
    ASSERT_TRUE(r.error.empty()) << r.error;
    // The replay's own trace: the same batches, each submitted after the previous completed.
    EXPECT_EQ(SubmitBatches(r), batches);
    size_t completions = 0;
    EXPECT_EQ(SubmittedBeforeEarlierCompleted(r, &completions), 0u);
    size_t total = 0;
    for (int64_t b : batches) total += static_cast<size_t>(b);
    EXPECT_EQ(completions, total) << "every read's completion reaped by a replayed io_getevents";

    std::vector<std::string> argv = {IotwinBin(), "compare", orig, rep, "--json", "--no-progress"};
    for (const std::string& a : LoadedMachineThresholds()) argv.push_back(a);
    const RunResult cmp = test::Run(argv, 120);
    const nlohmann::json j = nlohmann::json::parse(cmp.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << cmp.err << cmp.out;
    ASSERT_TRUE(j.contains("queries")) << "no per-query measures";
    EXPECT_EQ(j["queries"]["queries"], 128);
    // The whole verdict: every judged measure, timing (thresholds above) and block stream
    // included.
    EXPECT_EQ(cmp.exit_code, 0) << "failed " << j["failed"].dump();
    for (const char* name : {"query-match", "query-hops-err", "hop-depth-err", "iat-ks",
                             "block-requests-rel-err"}) {
      const nlohmann::json* m = Measure(j, name);
      ASSERT_NE(m, nullptr) << name;
      EXPECT_TRUE((*m)["judged"].get<bool>()) << name;
    }
    std::string values;
    for (const auto& m : j["measures"]) {
      if (m["kind"] == "timing" && m.contains("value"))
        values += " " + m["name"].get<std::string>() + "=" + m["value"].dump();
    }
    std::cout << "[ vector-replay ] " << pace << ": verdict " << j["verdict"].get<std::string>()
              << " (failed " << j["failed"].dump() << ")" << values << "\n";
  }

  // Each batch's reads one after another: compare says the batches were not in flight together.
  const std::string serial = dir / "serial.iotwin";
  const RunResult replay =
      test::Run({IotwinBin(), "replay", orig, "--root", fs.path("root-serial"), "--pace", "fast",
                 "--async", "sync", "--record", serial, "--quiet"},
                180);
  ASSERT_EQ(replay.exit_code, 0) << replay.err << replay.out;
  const RunResult cmp = test::Run({IotwinBin(), "compare", orig, serial, "--no-progress"}, 120);
  EXPECT_EQ(cmp.exit_code, 1) << cmp.err;
  EXPECT_NE(cmp.out.find("hop-depth-err"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("batches not in flight together"), std::string::npos) << cmp.out;
  EXPECT_NE(cmp.out.find("in flight at once in the original, 1 in the replay"), std::string::npos)
      << cmp.out;
}

}  // namespace
}  // namespace iotwin::test
