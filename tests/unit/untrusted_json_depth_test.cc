// JSON from a trace (header metadata, footer summary) or a sandbox manifest nests at most
// kMaxJsonDepth levels (base/json_parse.h): deeper text is refused with the file and byte offset
// instead of overflowing the stack of whatever copies or prints the value.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "analysis/analyzer.h"
#include "analysis/report_text.h"
#include "base/json_parse.h"
#include "format/trace_reader.h"
#include "trace_builder.h"
#include "interop_test_util.h"
#include "raw_trace_file.h"
#include "replay/prepare.h"
#include "replay/replay.h"

namespace iotwin {
namespace {

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(JsonDepth, ScanCountsBracketsOutsideStrings) {
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(JsonTooDeepAt(at_limit), std::string_view::npos);
  const std::string over = "[" + at_limit + "]";
  EXPECT_EQ(JsonTooDeepAt(over), kMaxJsonDepth);  // the bracket opening level 129
  // Brackets inside strings, escaped quotes included, are not nesting.
  const std::string in_string = "[\"\\\"" + std::string(1000, '[') + "\"]";
  EXPECT_EQ(JsonTooDeepAt(in_string), std::string_view::npos);
  EXPECT_TRUE(ParseUntrustedJson(in_string).ok());
  // Objects count as levels too.
  std::string objects;
  for (size_t i = 0; i <= kMaxJsonDepth; i++) objects += "{\"a\":";
  EXPECT_EQ(JsonTooDeepAt(objects), objects.size() - 5);
}

TEST(JsonDepth, ErrorsNameTheByte) {
  auto deep = ParseUntrustedJson(std::string(200'000, '['), 1000);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 128 levels at byte 1128"),
            std::string::npos)
      << deep.status().message();
  auto bad = ParseUntrustedJson("{\"a\": tru}", 32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not JSON: syntax error at byte 4"), std::string::npos)
      << bad.status().message();
  auto ok = ParseUntrustedJson(test::NestedJson(kMaxJsonDepth - 1));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_FALSE(ok->dump().empty());
}

TEST(JsonDepth, DeepHeaderIsRefusedByTheReader) {
  interop::testing::ScratchDir dir;
  const std::string path = dir / "deep-header.iotwin";
  WriteBytes(path, test::RawTraceBytes(test::NestedJson(200'000)));
  for (bool salvage : {false, true}) {
    TraceReaderOptions o;
    o.salvage = salvage;
    auto r = TraceReader::Open(path, o);
    ASSERT_FALSE(r.ok()) << "salvage " << salvage;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(path + ": metadata: JSON nested deeper than 128 levels at byte 170"),
              std::string::npos)
        << m;
  }
}

TEST(JsonDepth, DeepFooterIsRefusedOrSkippedWhenSalvaging) {
  interop::testing::ScratchDir dir;
  const std::string path = dir / "deep-footer.iotwin";
  WriteBytes(path, test::RawTraceBytes("{}", test::NestedJson(100'000)));
  auto strict = TraceReader::Open(path);
  ASSERT_FALSE(strict.ok());
  // Header 32 + 2 bytes of metadata, trailer header 16, then `{"nested": ` (11 bytes) and 128
  // brackets: the one opening level 129 is at byte 50 + 11 + 127.
  EXPECT_NE(strict.status().message().find(
                "footer: summary: JSON nested deeper than 128 levels at byte 188"),
            std::string::npos)
      << strict.status().message();
  TraceReaderOptions o;
  o.salvage = true;
  auto salvaged = TraceReader::Open(path, o);
  ASSERT_TRUE(salvaged.ok()) << salvaged.status().message();
  EXPECT_FALSE((*salvaged)->summary().has_value());
  ASSERT_EQ((*salvaged)->damage().skipped_chunks.size(), 1u);
  EXPECT_NE((*salvaged)->damage().skipped_chunks[0].find("nested deeper"), std::string::npos);
}

// JSON at the limit is read, copied, printed and reported as any other.
TEST(JsonDepth, HeaderAtTheLimitIsReadAndReported) {
  interop::testing::ScratchDir dir;
  const std::string path = dir / "limit.iotwin";
  // The object is one level: 127 arrays make 128.
  WriteBytes(path, test::RawTraceBytes(test::NestedJson(kMaxJsonDepth - 1),
                                       test::NestedJson(kMaxJsonDepth - 1)));
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const nlohmann::json meta = (*r)->meta();
  EXPECT_EQ(meta.dump().size(), 2 * (kMaxJsonDepth - 1) + 11);
  ASSERT_TRUE((*r)->summary().has_value());
  analysis::Analyzer a;
  a.SetMeta(meta);
  std::string text;
  ASSERT_NO_THROW(text = analysis::RenderText(a.Model(*(*r)->summary(), nlohmann::json::object())));
  EXPECT_NE(text.find("iotwin report"), std::string::npos);
}

// The sandbox manifest is read through the same bound (a replayed trace must never reach it,
// but its text is not to be trusted more than a trace).
TEST(JsonDepth, DeepManifestIsRefused) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir / "t.iotwin";
  test::TraceBuilder t(test::FullCaptureMeta());
  t.ProcAt(IOT_PROC_START, 1'000'000'000ULL, 42, 42, "app");
  t.Add(test::TraceBuilder::Sys(IOT_OP_SYNC, 42, 1'000'001'000ULL));
  ASSERT_TRUE(t.WriteFile(trace, nlohmann::json::object()).ok());
  const std::string root = dir / "root";
  ASSERT_EQ(mkdir(root.c_str(), 0700), 0);
  WriteBytes(replay::ManifestPath(root),
             "{\"iotwin_manifest\": " + std::string(200'000, '[') + std::string(200'000, ']') + "}");
  replay::ReplayOptions o;
  o.trace = trace;
  o.root = root;
  auto r = replay::RunReplay(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unreadable manifest (JSON nested deeper than 128 levels"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace iotwin
