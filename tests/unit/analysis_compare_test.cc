// compare judges the storage calls a replay re-issues: calls on descriptors the trace never
// opened (an inherited stdout), anonymous memory and addresses (which differ run to run) must
// not count against a replay; with --all-calls they do.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "analysis/compare.h"
#include "analysis/distance.h"
#include "trace_builder.h"
#include "interop_test_util.h"

namespace iotwin::analysis {
namespace {

using test::FullCaptureMeta;
using test::TraceBuilder;
constexpr uint64_t kStart = 2'000'000'000;
constexpr uint32_t kDev = 0x800001;

// One thread: an anonymous mmap, a write to stdout (fd 1, never opened), munmap of `addr`,
// then a file opened and read three times.
TraceBuilder Workload(uint64_t addr, bool loader_calls, uint64_t step_ns) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart;
  if (loader_calls) {
    iot_syscall m = TraceBuilder::Sys(IOT_OP_MMAP, 7, ts += step_ns);
    m.length = 8192;
    m.flags = MAP_PRIVATE | MAP_ANONYMOUS;
    m.ret = static_cast<int64_t>(addr);
    t.Add(m);
    t.Io(IOT_OP_WRITE, 7, ts += step_ns, 1000, 1, 0, 0, 0, 271, 271);
  }
  iot_syscall u = TraceBuilder::Sys(IOT_OP_MUNMAP, 7, ts += step_ns);
  u.offset = addr;  // munmap's address
  u.length = 8192;
  t.Add(u);
  t.Open(7, ts += step_ns, "/data/kv/chunk0", 3, kDev, 42);
  for (uint64_t i = 0; i < 3; i++)
    t.Io(IOT_OP_PREAD64, 7, ts += step_ns, 1000, 3, kDev, 42, i * 131072, 131072, 131072);
  t.CloseAt(7, ts += step_ns, 3, kDev, 42);
  return t;
}


double Measure(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return m["value"].get<double>();
  ADD_FAILURE() << "no measure " << name;
  return -1;
}

TEST(Compare, JudgesTheCallsReplayReissues) {
  interop::testing::ScratchDir f;
  std::string orig = f / "orig.iotwin", rep = f / "rep.iotwin";
  ASSERT_TRUE(Workload(0x7f0000001000, true, 10'000).WriteFile(orig, {}).ok());
  // The replay: no loader calls, its own mapping address, same file calls and timing.
  ASSERT_TRUE(Workload(0x7e0000005000, false, 10'000).WriteFile(rep, {}).ok());

  CompareOptions o;
  auto r = CompareTraces(orig, rep, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Measure(*r, "seq-match"), 1.0) << r->dump();
  EXPECT_EQ(Measure(*r, "op-count-rel-err"), 0.0);
  EXPECT_EQ(Measure(*r, "bytes-rel-err"), 0.0);
  const auto& scope = (*r)["scope"]["original"];
  EXPECT_EQ(scope["excluded"].get<uint64_t>(), 3u) << scope.dump();  // mmap, write, munmap
  EXPECT_EQ(scope["reasons"]["unknown_fd"].get<uint64_t>(), 1u) << scope.dump();
  EXPECT_EQ((*r)["scope"]["replay"]["excluded"].get<uint64_t>(), 1u);  // its munmap
  EXPECT_EQ((*r)["verdict"], "pass") << RenderCompareText(*r);

  o.storage_calls_only = false;
  auto all = CompareTraces(orig, rep, o);
  ASSERT_TRUE(all.ok());
  EXPECT_LT(Measure(*all, "seq-match"), 1.0);
  EXPECT_GT(Measure(*all, "bytes-rel-err"), 0.0);  // the 271-byte stdout write
  EXPECT_EQ((*all)["verdict"], "fail");
}

TEST(Compare, AddressesOfMappingCallsAreNotArguments) {
  interop::testing::ScratchDir f;
  std::string a = f / "a.iotwin", b = f / "b.iotwin";
  ASSERT_TRUE(Workload(0x7f0000001000, false, 10'000).WriteFile(a, {}).ok());
  ASSERT_TRUE(Workload(0x7e0000005000, false, 10'000).WriteFile(b, {}).ok());
  CompareOptions o;
  o.storage_calls_only = false;
  auto r = CompareTraces(a, b, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Measure(*r, "seq-match"), 1.0) << "a munmap at another address is the same call";
}

// Bytes this process has read through read-like calls so far (/proc/self/io rchar); nullopt
// where the kernel keeps no I/O accounting.
std::optional<uint64_t> BytesReadByThisProcess() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return std::nullopt;
}

// compare reads each trace once: the judged calls (the model) and the measures (the Analyzer)
// come from one pass over the file, not one pass each.
TEST(Compare, ReadsEachTraceOnce) {
  interop::testing::ScratchDir f;
  std::string orig = f / "orig.iotwin", rep = f / "rep.iotwin";
  TraceBuilder a = Workload(0x7f0000001000, true, 10'000);
  TraceBuilder b = Workload(0x7e0000005000, false, 10'000);
  for (uint64_t i = 0; i < 2000; i++) {  // enough records that the chunks outweigh the footer
    a.Io(IOT_OP_PREAD64, 7, kStart + 1'000'000 + i * 1000, 500, 3, kDev, 42, i * 4096, 4096, 4096);
    b.Io(IOT_OP_PREAD64, 7, kStart + 1'000'000 + i * 1000, 500, 3, kDev, 42, i * 4096, 4096, 4096);
  }
  ASSERT_TRUE(a.WriteFile(orig, {}).ok());
  ASSERT_TRUE(b.WriteFile(rep, {}).ok());
  const uint64_t sizes = std::filesystem::file_size(orig) + std::filesystem::file_size(rep);

  const std::optional<uint64_t> before = BytesReadByThisProcess();
  if (!before) GTEST_SKIP() << "no /proc/self/io (kernel without task I/O accounting)";
  auto r = CompareTraces(orig, rep, CompareOptions{});
  const std::optional<uint64_t> after = BytesReadByThisProcess();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(after.has_value());
  // One pass reads the header, the footer and every chunk once: the file's size.
  EXPECT_LE(*after - *before, sizes + sizes / 4)
      << "compare read " << *after - *before << " bytes of two traces of " << sizes << " bytes";
  EXPECT_EQ((*r)["verdict"], "pass") << RenderCompareText(*r);
}

TEST(Distance, KsFromAFloorIgnoresDifferencesBelowIt) {
  LogLinearHistogram a, b;
  for (int i = 0; i < 50; i++) a.Add(1'000);   // 1 us
  for (int i = 0; i < 50; i++) b.Add(4'000);   // 4 us: replay overhead
  for (int i = 0; i < 50; i++) a.Add(100'000);
  for (int i = 0; i < 50; i++) b.Add(100'000);
  EXPECT_NEAR(KsDistance(a, b), 0.5, 1e-12);
  EXPECT_EQ(KsDistanceFrom(a, b, 10'000), 0.0);
  // Differences above the floor still count.
  LogLinearHistogram c;
  for (int i = 0; i < 100; i++) c.Add(50'000);
  EXPECT_NEAR(KsDistanceFrom(a, c, 10'000), 0.5, 1e-12);
}

}  // namespace
}  // namespace iotwin::analysis
