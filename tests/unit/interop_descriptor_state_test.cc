// Exporters follow the traced kernel's descriptor tables (model::TraceState): the "file" of a
// call made through a descriptor that survived exec, close_range or fcntl.
#include <fcntl.h>
#include <linux/close_range.h>

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"
#include "trace_builder.h"

namespace iotwin::interop {
namespace {

using testing::ReadFile;
using testing::ScratchDir;

constexpr uint32_t kPid = 10;

// The "file" argument of each Chrome slice named `name`, in order ("" when absent).
std::vector<std::string> ChromeFiles(const std::string& json_path, std::string_view name) {
  std::vector<std::string> files;
  auto doc = nlohmann::json::parse(ReadFile(json_path));
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") != name || e.value("ph", "") != "X") continue;
    files.push_back(e.contains("args") ? e["args"].value("file", "") : "");
  }
  return files;
}

std::vector<std::string> ExportChromeFiles(const test::TraceBuilder& b, std::string_view name) {
  ScratchDir dir;
  EXPECT_TRUE(b.WriteFile(dir / "t.iotwin").ok());
  auto r = ExportChrome(dir / "t.iotwin", dir / "t.json");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return ChromeFiles(dir / "t.json", name);
}

// exec closes the descriptors whose own close-on-exec flag is set; a dup of an O_CLOEXEC
// descriptor does not inherit it and survives.
TEST(ChromeExportDescriptors, ExecKeepsDupOfCloexecDescriptor) {
  test::TraceBuilder b;
  b.Openat(kPid, "/data/a", O_RDONLY | O_CLOEXEC, 3);
  b.Dup(kPid, 3, 4);
  b.Exec(kPid, "/bin/next");
  b.Read(kPid, 4, 10, 10);
  b.Read(kPid, 3, 10, -EBADF);
  EXPECT_EQ(ExportChromeFiles(b, "read"), (std::vector<std::string>{"/data/a", ""}));
}

TEST(ChromeExportDescriptors, CloseRangeAndFcntlDupfd) {
  test::TraceBuilder b;
  b.Openat(kPid, "/data/a", O_RDONLY, 3);
  b.Fcntl(kPid, 3, F_DUPFD, 10, 10);
  b.CloseRange(kPid, 3, 5);
  b.Read(kPid, 10, 10, 10);
  b.Read(kPid, 3, 10, -EBADF);
  EXPECT_EQ(ExportChromeFiles(b, "read"), (std::vector<std::string>{"/data/a", ""}));
}

struct FioRun {
  FioExportResult result;
  std::string job;
};

FioRun RunFio(const test::TraceBuilder& b) {
  ScratchDir dir;
  FioRun run;
  EXPECT_TRUE(b.WriteFile(dir / "t.iotwin").ok());
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(dir / "t.iotwin", o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) run.result = *r;
  run.job = ReadFile(dir / "fio/replay.fio");
  return run;
}

TEST(FioExportDescriptors, ExecKeepsDupOfCloexecDescriptor) {
  test::TraceBuilder b;
  b.Openat(kPid, "/data/a", O_RDONLY | O_CLOEXEC, 3);
  b.Dup(kPid, 3, 4);
  b.Exec(kPid, "/bin/next");
  b.Read(kPid, 4, 10, 10);
  FioRun run = RunFio(b);
  EXPECT_EQ(run.result.reads, 1u);
  EXPECT_EQ(run.result.skipped.count("read: descriptor opened before the trace, not known"), 0u);
}

TEST(FioExportDescriptors, CloseRangeClosesTheRangeItNames) {
  test::TraceBuilder b;
  b.Openat(kPid, "/data/a", O_RDONLY, 3);
  b.Openat(kPid, "/data/b", O_RDONLY, 4);
  b.CloseRange(kPid, 4, 4, CLOSE_RANGE_CLOEXEC);  // marks, closes nothing
  b.Read(kPid, 4, 10, 10);
  b.CloseRange(kPid, 3, 3);
  b.Read(kPid, 3, 10, 10);  // gone
  FioRun run = RunFio(b);
  EXPECT_EQ(run.result.reads, 1u);
  EXPECT_EQ(run.result.skipped.count("read: descriptor opened before the trace, not known"), 1u);
}

// O_DIRECT is 0200000 on arm64 (040000 there is O_DIRECTORY): the job is direct by the traced
// machine's flag values.
TEST(FioExportDescriptors, DirectFollowsTheTracedArchitecture) {
  test::TraceBuilder b;
  b.meta()["host"]["arch"] = "aarch64";
  b.Openat(kPid, "/data/a", O_RDONLY | 0200000, 3).ftype = 8;  // O_DIRECTORY on x86
  b.Read(kPid, 3, 4096, 4096);
  FioRun run = RunFio(b);
  EXPECT_EQ(run.result.reads, 1u);
  EXPECT_NE(run.job.find("direct=1"), std::string::npos) << run.job;
}

}  // namespace
}  // namespace iotwin::interop
