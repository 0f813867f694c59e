// iotwin record, application intent: markers written to $IOTWIN_MARKER and uprobes on named
// functions become INTENT records on the same timeline as the calls.
#include "record_check.h"

namespace iotwin::test {
namespace {

TEST(RecordIntent, MarkerWritesBecomeIntentRecords) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "t.iotwin", log = dir / "log";
  RunResult r = test::Run(
      {IotwinBin(), "record", "-o", trace, "--", TestProg("io_markers"), log, dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["bad_markers"], 1);  // the malformed one, counted, not recorded
  auto entries = ReadLog(log);
  // The pwrites between the markers are there, and nothing else: the marker writes, made
  // between the same brackets, are not syscall records.
  auto problems = CompareCalls(entries, t);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  std::vector<nlohmann::json> markers;
  for (const auto& e : entries) {
    if (e.value("kind", "") == "marker" && e["kind_char"] != "X") markers.push_back(e);
  }
  ASSERT_EQ(markers.size(), 6u);
  ASSERT_EQ(t.intents.size(), markers.size());
  for (size_t i = 0; i < markers.size(); i++) {
    const auto& m = markers[i];
    const iot_intent& in = t.intents[i];
    EXPECT_EQ(t.intent_labels[i], m["label"].get<std::string>()) << i;
    uint16_t kind = m["kind_char"] == "B"   ? IOT_INTENT_BEGIN
                    : m["kind_char"] == "E" ? IOT_INTENT_END
                                            : IOT_INTENT_INSTANT;
    EXPECT_EQ(in.kind, kind) << i;
    EXPECT_EQ(in.value, m["value"].get<uint64_t>()) << i;
    EXPECT_EQ(in.source, IOT_INTENT_SRC_MARKER);
    EXPECT_EQ(in.tid, m["tid"].get<uint32_t>());
  }
  // On the same timeline: "I step 42" comes after the first pwrite and before the second.
  std::vector<uint64_t> pwrites;
  for (const auto& s : t.syscalls) {
    if (s.sc.op == IOT_OP_PWRITE64 && s.sc.tid == markers[0]["tid"].get<uint32_t>()) {
      pwrites.push_back(s.sc.ts);
    }
  }
  ASSERT_EQ(pwrites.size(), 3u);
  EXPECT_LT(t.intents[0].ts, pwrites[0]);
  EXPECT_GT(t.intents[1].ts, pwrites[0]);
  EXPECT_LT(t.intents[1].ts, pwrites[1]);
}

TEST(RecordIntent, UprobesOnANamedFunction) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string trace = dir / "t.iotwin";
  std::string prog = TestProg("io_uprobe_target");
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--uprobe",
                           prog + ":iotwin_probe_target=phase", "--", prog, "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  size_t begins = 0, ends = 0;
  for (size_t i = 0; i < t.intents.size(); i++) {
    EXPECT_EQ(t.intent_labels[i], "phase");
    EXPECT_EQ(t.intents[i].source, IOT_INTENT_SRC_UPROBE);
    if (t.intents[i].kind == IOT_INTENT_BEGIN) begins++;
    if (t.intents[i].kind == IOT_INTENT_END) ends++;
  }
  EXPECT_EQ(begins, 4u);
  EXPECT_EQ(ends, 4u);
  // A function that does not exist is a clear error.
  r = test::Run({IotwinBin(), "record", "-o", dir / "u.iotwin", "--uprobe",
                 prog + ":iotwin_no_such_function", "--", prog, "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("iotwin_no_such_function"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace iotwin::test
