// Names, comms, labels and header strings from a trace reach text output escaped by the one rule
// of base/bytes_text.h: no terminal control (C0 but '\n' and '\t', DEL, C1 such as U+009B CSI)
// from a trace reaches `report`, `layers` or replay's messages, and a CSV cell never starts a
// spreadsheet formula.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "analysis/report_text.h"
#include "trace_builder.h"
#include "base/bytes_text.h"
#include "correlate/layers_report.h"
#include "interop/exporters.h"
#include "interop_test_util.h"
#include "replay/replay.h"

namespace iotwin {
namespace {

using nlohmann::json;

// ESC CSI (colour), OSC (set the window title, ended by BEL), U+009B (the one-byte CSI as UTF-8),
// C0 controls and DEL.
constexpr std::string_view kCsiName = "/d/\x1b[2Jcleared";
constexpr std::string_view kOscName = "\x1b]0;pwned\x07";
constexpr std::string_view kC1Name = "/d/\xc2\x9b" "31mred";
constexpr std::string_view kC0Name = "/d/bell\x07" "back\x08\x7f";

// The first terminal control in `text` (its offset), or npos: a C0 control but '\n' and '\t',
// DEL, or a C1 control (U+0080..U+009F, "\xc2\x80".."\xc2\x9f" in UTF-8, or such a byte alone).
size_t FirstControl(std::string_view text) {
  for (size_t i = 0; i < text.size(); i++) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return i;
    if (c == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return i;
    }
  }
  return std::string_view::npos;
}

::testing::AssertionResult NoControls(std::string_view text) {
  const size_t at = FirstControl(text);
  if (at == std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "control byte at " << at << ": "
         << BytesToText(text.substr(at > 40 ? at - 40 : 0, 80));
}

TEST(TerminalText, BytesToTextLeavesNoControl) {
  for (std::string_view name : {kCsiName, kOscName, kC1Name, kC0Name}) {
    EXPECT_TRUE(NoControls(BytesToText(name))) << BytesToText(name);
    EXPECT_EQ(TextToBytes(BytesToText(name)), std::string(name));
  }
  EXPECT_EQ(BytesToText(kC1Name), "/d/\\xc2\\x9b31mred");
  EXPECT_EQ(LinesToText("a\x1b\nb\n\nc"), "a\\x1b\nb\n\nc");
}

test::TraceBuilder HostileTrace() {
  json meta = test::FullCaptureMeta();
  meta["host"]["hostname"] = std::string(kOscName);
  meta["host"]["kernel"] = "6.1\x1b[1m";
  meta["host"]["arch"] = "x86\xc2\x9b" "2J";
  meta["command"] = {std::string(kCsiName), std::string(kC0Name)};
  test::TraceBuilder t(meta);
  constexpr uint64_t kT0 = 1'000'000'000ULL;
  constexpr uint32_t kDev = (8u << 20) | 1;
  t.ProcAt(IOT_PROC_START, kT0, 42, 42, "\x1b]0;comm\x07");
  t.Open(42, kT0 + 1000, kCsiName, 3, kDev, 100);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 2000, 1000, 3, kDev, 100, 0, 4096, 4096);
  t.Open(42, kT0 + 3000, kC1Name, 4, kDev, 101);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 4000, 1000, 4, kDev, 101, 0, 4096, 4096);
  t.Open(42, kT0 + 5000, kC0Name, 5, kDev, 102);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 6000, 1000, 5, kDev, 102, 0, 4096, 4096);
  t.Intent(IOT_INTENT_BEGIN, kT0 + 7000, 42, kOscName);
  t.Intent(IOT_INTENT_END, kT0 + 8000, 42, kOscName);
  t.Intent(IOT_INTENT_INSTANT, kT0 + 9000, 42, "=HYPERLINK(\"http://x\")");
  return t;
}

TEST(TerminalText, ReportEscapesNamesCommsLabelsAndHeader) {
  test::TraceBuilder t = HostileTrace();
  analysis::Analyzer a;
  a.SetMeta(t.meta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const std::string text = analysis::RenderText(a.Model(std::nullopt));
  EXPECT_TRUE(NoControls(text)) << text;
  EXPECT_NE(text.find("\\x1b]0;pwned\\x07"), std::string::npos) << text;  // host, label
  EXPECT_NE(text.find("\\x1b]0;comm\\x07"), std::string::npos) << text;   // comm
  EXPECT_NE(text.find("\\x1b[2Jcleared"), std::string::npos) << text;     // file, command
  EXPECT_NE(text.find("\\xc2\\x9b31mred"), std::string::npos) << text;    // a C1 file name
  EXPECT_NE(text.find("x86\\xc2\\x9b2J"), std::string::npos) << text;     // arch
}

TEST(TerminalText, LayersTextEscapesFileNames) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir / "t.iotwin";
  ASSERT_TRUE(HostileTrace().WriteFile(trace, json::object()).ok());
  auto report = correlate::LayersReportForTrace(trace);
  ASSERT_TRUE(report.ok()) << report.status().message();
  // Names where the model has them for traces with the block layer, which this one lacks.
  json& model = *report;
  model["damage"] = std::string(kC0Name);
  model["latency"]["by_file"] = {{{"file", std::string(kCsiName)}, {"requests", 1},
                                  {"layers", json::array()}}};
  model["writeback"] = {{{"file", std::string(kC1Name)}, {"requests", 1}}};
  const std::string text = correlate::RenderLayersText(model);
  EXPECT_TRUE(NoControls(text)) << text;
  EXPECT_NE(text.find("\\x1b[2Jcleared"), std::string::npos) << text;
  EXPECT_NE(text.find("\\xc2\\x9b31mred"), std::string::npos) << text;
  EXPECT_NE(text.find("bell\\x07back\\x08\\x7f"), std::string::npos) << text;
}

TEST(TerminalText, ReplayArchitectureWarningIsEscaped) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir / "t.iotwin";
  ASSERT_TRUE(HostileTrace().WriteFile(trace, json::object()).ok());
  replay::ReplayOptions o;
  o.trace = trace;
  o.dry_run = true;
  auto r = replay::RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  bool arch = false;
  for (const std::string& w : r->warnings) {
    EXPECT_TRUE(NoControls(w)) << w;
    arch |= w.find("x86\\xc2\\x9b2J machine") != std::string::npos;
  }
  EXPECT_TRUE(arch) << json(r->warnings).dump();
  EXPECT_TRUE(NoControls(r->text)) << r->text;
}

// A call whose result differs in the replay is named in the summary by its recorded path.
TEST(TerminalText, ReplayMismatchPathIsEscaped) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir / "t.iotwin";
  test::TraceBuilder t(test::FullCaptureMeta());
  constexpr uint64_t kT0 = 1'000'000'000ULL;
  t.ProcAt(IOT_PROC_START, kT0, 42, 42, "app");
  // Recorded as refused (EACCES): no file is prepared for it, so the replay's open fails with
  // ENOENT instead, a result that differs.
  iot_syscall open = test::TraceBuilder::Sys(IOT_OP_OPENAT, 42, kT0 + 1000);
  open.fd = -100;
  open.ret = -EACCES;
  open.flags = O_RDONLY;
  open.path_id = t.Str(std::string(kCsiName) + std::string(kOscName));
  t.Add(open);
  ASSERT_TRUE(t.WriteFile(trace, json::object()).ok());
  const std::string root = dir / "root";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  replay::ReplayOptions o;
  o.trace = trace;
  o.root = root;
  auto r = replay::RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(NoControls(r->text)) << r->text;
  EXPECT_NE(r->text.find("\\x1b[2Jcleared\\x1b]0;pwned\\x07"), std::string::npos) << r->text;
}

TEST(CsvFormulas, CellsThatStartAFormulaGetAQuote) {
  auto field = [](std::string_view bytes) {
    std::string out;
    AppendBytesAsCsvField(&out, bytes);
    return out;
  };
  EXPECT_EQ(field("=HYPERLINK(\"http://x\")"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(field("+1"), "'+1");
  EXPECT_EQ(field("-x"), "'-x");
  EXPECT_EQ(field("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(field("'quoted"), "''quoted");  // one leading quote is always the rule's
  EXPECT_EQ(field("\tx"), "\\x09x");         // tab and CR are escaped, never first
  EXPECT_EQ(field("\rx"), "\\x0dx");
  EXPECT_EQ(field("a=b"), "a=b");
  EXPECT_EQ(field("/data/-x"), "/data/-x");
}

TEST(CsvFormulas, ExportedLabelsAndPathsAreNotFormulas) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir / "t.iotwin";
  test::TraceBuilder t(test::FullCaptureMeta());
  constexpr uint64_t kT0 = 1'000'000'000ULL;
  t.ProcAt(IOT_PROC_START, kT0, 42, 42, "-comm");
  t.Open(42, kT0 + 1000, "=cmd|' /C calc'!A0", 3, 1, 100);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 2000, 1000, 3, 1, 100, 0, 4096, -5);  // ret -5: a number
  t.Intent(IOT_INTENT_INSTANT, kT0 + 3000, 42, "=HYPERLINK(\"http://x\")");
  ASSERT_TRUE(t.WriteFile(trace, json::object()).ok());
  auto r = interop::ExportTables(trace, dir / "csv", interop::TableFormat::kCsv);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string intents = interop::testing::ReadFile(dir / "csv/intents.csv");
  EXPECT_NE(intents.find(",\"'=HYPERLINK(\"\"http://x\"\")\""), std::string::npos) << intents;
  const std::string calls = interop::testing::ReadFile(dir / "csv/syscalls.csv");
  EXPECT_NE(calls.find(",'=cmd|' /C calc'!A0,"), std::string::npos) << calls;
  EXPECT_NE(calls.find(",-5,"), std::string::npos) << calls;  // numbers keep their sign
  const std::string proc = interop::testing::ReadFile(dir / "csv/proc.csv");
  EXPECT_NE(proc.find(",'-comm"), std::string::npos) << proc;
  // No cell of any table starts a formula.
  for (const std::string& table : {intents, calls, proc}) {
    for (size_t at = 0; at < table.size(); at++) {
      if (at != 0 && table[at - 1] != ',' && table[at - 1] != '\n') continue;
      size_t cell = at < table.size() && table[at] == '"' ? at + 1 : at;
      if (cell >= table.size()) continue;
      const char c = table[cell];
      if (c == '=' || c == '+' || c == '@') ADD_FAILURE() << table.substr(at, 40);
    }
  }
}

}  // namespace
}  // namespace iotwin
