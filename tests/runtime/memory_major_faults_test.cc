// Major faults are the kernel's own count: a program reading a cold file through a mapping
// reports getrusage's ru_majflt for the loop, and the report's major faults of that file (and
// the trace's raw flags) must match it. Large folios make most faults wait for readahead under
// way, which the kernel counts minor although they map pages read from the device.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

using nlohmann::json;

TEST(MemoryMajorFaults, ReportCountsWhatGetrusageCounts) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string file = dir / "weights.bin", trace = dir / "majflt.iotwin",
                    log = dir / "majflt.json";
  // Create the file outside the trace; the traced run evicts it and maps it.
  RunResult made = test::Run({TestProg("mem_majflt"), file, "32", log});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  RunResult r = RecordCommand(trace, {}, {TestProg("mem_majflt"), file, "32", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json truth = ReadJsonFile(log);
  ASSERT_TRUE(truth.is_object()) << "no log from mem_majflt";
  const uint64_t ino = truth["ino"].get<uint64_t>();
  const int64_t majflt = truth["majflt"].get<int64_t>();
  const int64_t kernel_faults = truth["majflt"].get<int64_t>() + truth["minflt"].get<int64_t>();

  // The raw flags of the file's faults.
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  int64_t flagged = 0, faults = 0;
  for (const iot_page_fault& f : t.faults) {
    if (f.ino != ino) continue;
    ++faults;
    flagged += (f.flags & IOT_PFF_MAJOR) ? 1 : 0;
  }
  ASSERT_GT(faults, 0);
  // The loop's faults are the file's (the mapping is not populated before it); the kernel's
  // count of them may include a stack or heap page.
  EXPECT_NEAR(static_cast<double>(faults), static_cast<double>(kernel_faults),
              2.0 + 0.02 * static_cast<double>(kernel_faults));

  RunResult rep = test::Run({IotwinBin(), "report", "--json", "--top", "0", trace}, 120);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json m = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(m.is_object());
  const json* row = nullptr;
  for (const json& f : m["files"]["rows"])
    if (f.value("ino", uint64_t{0}) == ino) row = &f;
  ASSERT_NE(row, nullptr) << "no row for the file";
  const int64_t reported = (*row)["faults"]["major"].get<int64_t>();
  // A page inserted by readahead between the fault's start and filemap_fault's own lookup can
  // tip one fault either way (docs/memory-layer.md).
  const int64_t slack = 1 + faults / 50;
  EXPECT_LE(std::llabs(flagged - majflt), slack) << "flagged " << flagged << " of " << faults;
  EXPECT_LE(std::llabs(reported - majflt), slack)
      << "report: " << reported << " major of " << faults << " faults; ru_majflt " << majflt;
}

}  // namespace
}  // namespace iotwin::test
