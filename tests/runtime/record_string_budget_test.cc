// A traced command that names many distinct long paths and marker labels: the recorder's string
// table stops at its budget (lowered here through IOTWIN_MAX_STRING_BYTES / IOTWIN_MAX_STRINGS so
// that a few thousand names reach it), counts what went past it, and every consumer reads the
// trace (docs/security.md, "Memory").
#include <unistd.h>

#include <fstream>

#include "format/trace_reader.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

TEST(RecordStringBudget, NamesAndLabelsPastTheBudgetLeaveAReadableTrace) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
  TempDir dir;
  const std::string trace = dir / "t.iotwin", script = dir / "names.py";
  // 3,000 stats of distinct 1000-byte paths, then 3,000 distinct 300-byte marker labels.
  std::ofstream(script) << R"(import os
for i in range(3000):
    try:
        os.stat("/nonexistent-%05d-" % i + "p" * 980)
    except OSError:
        pass
m = os.open(os.environ["IOTWIN_MARKER"], os.O_WRONLY)
for i in range(3000):
    os.write(m, b"I label-%05d-%s\n" % (i, b"l" * 286))
)";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--", "/usr/bin/python3",
                     script},
                    120, {"IOTWIN_MAX_STRING_BYTES=262144", "IOTWIN_MAX_STRINGS=4000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto reader = TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  uint64_t strings = 0;
  for (;;) {
    auto n = (*reader)->Next();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (!*n) break;
    strings += (*n)->type == IOT_REC_STRING;
  }
  EXPECT_LE(strings, 4001u);  // the budget's names and the shared one
  ASSERT_TRUE((*reader)->summary().has_value());
  const nlohmann::json& over = (*(*reader)->summary())["strings_over_budget"];
  ASSERT_TRUE(over.is_object()) << (*reader)->summary()->dump();
  EXPECT_GT(over["digested"].get<uint64_t>(), 0u);
  EXPECT_GT(over["shared"].get<uint64_t>(), 1000u);

  RunResult report = test::Run({IotwinBin(), "report", trace, "--no-progress"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("past the writer's string budget"), std::string::npos) << report.out;
  RunResult dry = test::Run({IotwinBin(), "replay", trace, "--dry-run", "--root", dir / "root"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
}

}  // namespace
}  // namespace iotwin::test
