// Names are bytes (any byte but NUL, not necessarily UTF-8): they reach JSON, CSV, TSV and text
// escaped by base/bytes_text.h, as valid UTF-8 that reads back to the same bytes, and never abort
// an import, an export or a dump.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/bytes_text.h"
#include "format/record_text.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/anonymize.h"
#include "interop/exporters.h"
#include "interop_test_util.h"

#include "interop_untrusted_util.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;
using testing::ImportText;
using testing::IsValidUtf8;
using testing::kAwkwardName;
using testing::MakeTestAnonymizer;
using testing::ParsesAsJson;
using testing::ReadFile;
using testing::ReadTrace;
using testing::ScratchDir;
using testing::WriteAwkwardTrace;

TEST(BytesText, EveryByteRoundTripsThroughValidUtf8) {
  std::string all;
  for (int i = 1; i < 256; i++) all.push_back(static_cast<char>(i));
  all += "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3 \xed\xa0\x80 \\x41";
  std::string text = BytesToText(all);
  EXPECT_TRUE(IsValidUtf8(text));
  for (char c : text) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
  EXPECT_NE(text.find("caf\xc3\xa9"), std::string::npos);  // valid UTF-8 kept
  EXPECT_NE(text.find("\\xff"), std::string::npos);
  EXPECT_NE(text.find("\\\\x41"), std::string::npos);       // a literal backslash is doubled
  auto back = TextToBytes(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, all);
  std::string json;
  AppendBytesAsJsonString(&json, all);
  ASSERT_TRUE(ParsesAsJson(json));
  EXPECT_EQ(nlohmann::json::parse(json).get<std::string>(), text);
  EXPECT_FALSE(TextToBytes("a\\b").has_value());
}

TEST(CsvUntrusted, FieldsWithCommasQuotesAndNewlinesAreQuoted) {
  std::string row;
  AppendBytesAsCsvField(&row, "a,b");
  row += ',';
  AppendBytesAsCsvField(&row, "say \"hi\"");
  row += ',';
  AppendBytesAsCsvField(&row, "line1\nline2\r");
  row += ',';
  AppendBytesAsCsvField(&row, "plain");
  EXPECT_EQ(row, "\"a,b\",\"say \"\"hi\"\"\",line1\\x0aline2\\x0d,plain");
}

TEST(Utf8Untrusted, BlkparseNonUtf8ActionAndCommImport) {
  ScratchDir dir;
  std::string in = dir / "b.txt";
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kj\xff]\n", f);
    std::fputs("  8,0    3        2     0.000001000   697  \xfe\xff   W 223490 + 8 [kj\xff]\n", f);
    std::fclose(f);
  }
  ImportRequest req;
  req.format = ImportFormat::kBlkparse;
  req.inputs = {in};
  req.output = dir / "b.iotwin";
  Result<ImportResult> r = Status::Internal("not run");
  EXPECT_NO_THROW(r = RunImport(req));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto t = ReadTrace(req.output);
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["import"]["skipped"]["action \\xfe\\xff"], 1) << t.summary->dump();
}

TEST(Utf8Untrusted, FtraceNonUtf8EventImports) {
  ScratchDir dir;
  std::string in = dir / "f.txt";
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("# tracer: nop\n", f);
    std::fputs("  ba\xffsh-1234    [001] d..1.  1000.000100: block_rq_insert: 254,0 RA 131072 () "
               "2048 + 256 [ba\xffsh]\n",
               f);
    std::fputs("  bash-1234    [001] d..1.  1000.000200: block_\xff\xfe: 254,0 RA 4096 () 2048 + 8 "
               "[bash]\n",
               f);
    std::fclose(f);
  }
  ImportRequest req;
  req.format = ImportFormat::kFtraceBlock;
  req.inputs = {in};
  req.output = dir / "f.iotwin";
  Result<ImportResult> r = Status::Internal("not run");
  EXPECT_NO_THROW(r = RunImport(req));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto t = ReadTrace(req.output);
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["import"]["skipped"]["block_\\xff\\xfe"], 1) << t.summary->dump();
}

TEST(Utf8Untrusted, NonUtf8InputFileNameImports) {
  ScratchDir dir;
  std::string in = dir / "s\xff.txt";
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("1700000000.000001 openat(AT_FDCWD, \"/x\", O_RDONLY) = 3</x>\nbogus line\n", f);
    std::fclose(f);
  }
  ImportRequest req;
  req.format = ImportFormat::kStrace;
  req.inputs = {in};
  req.output = dir / "s.iotwin";
  auto r = RunImport(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto t = ReadTrace(req.output);
  std::string escaped = BytesToText(in);
  EXPECT_EQ(t.meta["import"]["source"][0], escaped);
  EXPECT_EQ((*t.summary)["import"]["unknown_examples"][0]["source"], escaped);
}

TEST(Utf8Untrusted, DumpRecordsEscapesNames) {
  ScratchDir dir;
  std::string trace = dir / "t.iotwin";
  WriteAwkwardTrace(trace, kAwkwardName);
  auto reader = TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok());
  std::string all;
  for (;;) {
    auto next = (*reader)->Next();
    ASSERT_TRUE(next.ok());
    if (!*next) break;
    all += RecordToText(*next, reader->get()) + "\n";
  }
  EXPECT_TRUE(IsValidUtf8(all)) << all;
  EXPECT_NE(all.find(BytesToText(kAwkwardName)), std::string::npos) << all;
  EXPECT_NE(all.find("co\\xffmm\\x0a"), std::string::npos) << all;
  // One record, one line: names cannot break lines.
  size_t lines = 0;
  for (char c : all) lines += c == '\n';
  EXPECT_EQ(lines, 6u) << all;
}

TEST(Utf8Untrusted, ExportsEscapeNonUtf8Names) {
  ScratchDir dir;
  std::string trace = dir / "t.iotwin";
  WriteAwkwardTrace(trace, kAwkwardName);
  std::string escaped = BytesToText(kAwkwardName);

  auto jl = ExportTables(trace, dir / "jsonl", TableFormat::kJsonl);
  ASSERT_TRUE(jl.ok()) << jl.status().ToString();
  std::string rows = ReadFile(dir / "jsonl/syscalls.jsonl");
  ASSERT_FALSE(rows.empty());
  auto first = nlohmann::json::parse(rows.substr(0, rows.find('\n')));
  EXPECT_EQ(first["path"], escaped);
  EXPECT_EQ(TextToBytes(first["path"].get<std::string>()), kAwkwardName);
  std::string proc = ReadFile(dir / "jsonl/proc.jsonl");
  EXPECT_EQ(nlohmann::json::parse(proc.substr(0, proc.find('\n')))["comm"], "co\\xffmm\\x0a");

  auto csv = ExportTables(trace, dir / "csv", TableFormat::kCsv);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  std::string c = ReadFile(dir / "csv/syscalls.csv");
  EXPECT_TRUE(IsValidUtf8(c));
  std::string field;
  AppendBytesAsCsvField(&field, kAwkwardName);
  EXPECT_NE(c.find("," + field + ","), std::string::npos) << c;
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 3);  // header + two rows

  auto ch = ExportChrome(trace, dir / "c.json");
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  std::string cj = ReadFile(dir / "c.json");
  ASSERT_TRUE(ParsesAsJson(cj));
  EXPECT_NE(nlohmann::json::parse(cj).dump().find(nlohmann::json(escaped).dump()), std::string::npos);
}

TEST(FioExportUntrusted, FilesTsvEscapesNewlinesAndTabs) {
  ScratchDir dir;
  std::string trace = dir / "t.iotwin";
  WriteAwkwardTrace(trace, kAwkwardName);
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(trace, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string tsv = ReadFile(dir / "fio/files.tsv");
  EXPECT_TRUE(IsValidUtf8(tsv));
  // Header plus one line per file, three columns each.
  size_t lines = 0;
  size_t start = 0;
  while (start < tsv.size()) {
    size_t nl = tsv.find('\n', start);
    ASSERT_NE(nl, std::string::npos);
    std::string line = tsv.substr(start, nl - start);
    EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 2) << line;
    lines++;
    start = nl + 1;
  }
  EXPECT_EQ(lines, 2u) << tsv;
  EXPECT_NE(tsv.find(BytesToText(kAwkwardName)), std::string::npos) << tsv;
  EXPECT_TRUE(ParsesAsJson(ReadFile(dir / "fio/export.json")));
}

}  // namespace
}  // namespace iotwin::interop
