// `iotwin export --csv - / --jsonl - --table NAME`: one table on standard output, the same bytes
// as that table exported into a directory; without a table choice, an error (no BPF needed).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string SmallTrace(const TempDir& dir) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = 1'000'000'000ULL;
  t.ProcAt(IOT_PROC_START, ts, 500, 500, "app");
  t.Open(500, ts += 1000, "/data/a.bin", 3, 1, 10);
  for (int i = 0; i < 10; i++) t.Io(IOT_OP_PREAD64, 500, ts += 1000, 1000, 3, 1, 10, 0, 4096, 4096);
  std::string path = dir / "t.iotwin";
  EXPECT_TRUE(t.WriteFile(path, {{"stop_reason", "exited"}, {"exit_status", 0}}).ok());
  return path;
}

TEST(ExportStdout, OneTableGoesToStandardOutputAsInADirectory) {
  TempDir dir;
  const std::string trace = SmallTrace(dir);
  RunResult whole = test::Run(
      {IotwinBin(), "export", trace, "--csv", dir / "csv", "--jsonl", dir / "jsonl"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  RunResult csv = test::Run({IotwinBin(), "export", trace, "--csv", "-", "--table", "syscalls"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out, Slurp(dir / "csv/syscalls.csv"));
  EXPECT_NE(csv.out.find("pread64"), std::string::npos);
  RunResult files = test::Run({IotwinBin(), "export", trace, "--jsonl", "-", "--table", "files"});
  ASSERT_EQ(files.exit_code, 0) << files.err;
  EXPECT_EQ(files.out, Slurp(dir / "jsonl/files.jsonl"));
  EXPECT_NE(files.out.find("/data/a.bin"), std::string::npos);
}

TEST(ExportStdout, StandardOutputNeedsOneKnownTable) {
  TempDir dir;
  const std::string trace = SmallTrace(dir);
  const std::vector<std::vector<std::string>> wrong = {
      {"--csv", "-"},                                       // no table chosen
      {"--jsonl", "-", "--table", "nope"},                  // no such table
      {"--csv", "-", "--jsonl", "-", "--table", "files"},   // two tables on one stream
      {"--csv", "-", "--table", "files", "--json"},         // the summary would mix in
      {"--csv", dir / "out", "--table", "files"},           // --table without a stream
  };
  for (const auto& args : wrong) {
    std::vector<std::string> argv = {IotwinBin(), "export", trace};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = test::Run(argv);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1];
    EXPECT_EQ(r.err.rfind("iotwin export: ", 0), 0u) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

}  // namespace
}  // namespace iotwin::test
