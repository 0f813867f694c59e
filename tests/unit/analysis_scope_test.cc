// The report's file globs and data scope judge resolved absolute paths: names opened relative to
// the cwd (from the attach record and chdir) or to a directory descriptor count by the path they
// name, and what the scope leaves out is counted in the model's "scope".
#include <fcntl.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "analysis/filter_spec.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor
constexpr uint16_t kRegular = 8, kDirectory = 4;

void Open(TraceBuilder& t, uint64_t ts, int dirfd, std::string_view path, int fd, uint64_t ino,
          uint16_t ftype = kRegular) {
  iot_syscall s = TraceBuilder::Sys(IOT_OP_OPENAT, 1, ts);
  s.fd = dirfd;
  s.path_id = t.Str(path);
  s.flags = ftype == kDirectory ? O_RDONLY | O_DIRECTORY : O_RDONLY;
  s.dev = kDev;
  s.ino = ino;
  s.ftype = ftype;
  s.ret = fd;
  t.Add(s);
}

void Read(TraceBuilder& t, uint64_t ts, int fd, uint64_t ino, int64_t bytes) {
  iot_syscall s = TraceBuilder::Sys(IOT_OP_READ, 1, ts);
  s.fd = fd;
  s.dev = kDev;
  s.ino = ino;
  s.ftype = kRegular;
  s.ret = bytes;
  s.length = static_cast<uint64_t>(bytes);
  t.Add(s);
}

// Attached in /w: data/a.bin (relative), b.bin through a dirfd on /w/data, lib/x.so.1 (relative),
// then chdir("data") and c.bin (relative to the new cwd). Reads 100, 200, 400, 800 bytes.
TraceBuilder ResolvedNamesTrace() {
  TraceBuilder t(FullCaptureMeta());
  t.meta()["capture"] = {{"mode", "pid"}};
  iot_proc attach{};
  InitRecord(&attach, IOT_REC_PROC);
  attach.kind = IOT_PROC_ATTACH;
  attach.ts = kStart;
  attach.tgid = attach.tid = 1;
  attach.path_id = t.Str("/w");
  t.Add(attach);
  uint64_t ts = kStart + 1000;
  Open(t, ts++, -100, "data/a.bin", 3, 11);
  Read(t, ts++, 3, 11, 100);
  Open(t, ts++, -100, "data", 4, 10, kDirectory);
  Open(t, ts++, 4, "b.bin", 5, 12);
  Read(t, ts++, 5, 12, 200);
  Open(t, ts++, -100, "lib/x.so.1", 6, 13);
  Read(t, ts++, 6, 13, 400);
  iot_syscall cd = TraceBuilder::Sys(IOT_OP_CHDIR, 1, ts++);
  cd.fd = -100;
  cd.path_id = t.Str("data");
  t.Add(cd);
  Open(t, ts++, -100, "./c.bin", 7, 14);
  Read(t, ts++, 7, 14, 800);
  return t;
}

json Analyze(TraceBuilder& t, const AnalysisFilter& filter) {
  AnalyzerOptions o;
  o.filter = filter;
  o.top = 0;
  Analyzer a(o);
  a.SetMeta(t.meta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

uint64_t ReadBytes(const json& m) { return m["totals"]["read"]["syscall_bytes"].get<uint64_t>(); }

TEST(AnalysisScope, FilterFileMatchesResolvedRelativeAndDirfdNames) {
  TraceBuilder t = ResolvedNamesTrace();
  auto filter = ParseFilterSpecs({"file=/w/data/*"}, std::nullopt, std::nullopt);
  ASSERT_TRUE(filter.ok());
  // a.bin (relative), b.bin (dirfd), c.bin (relative after chdir); not the library.
  EXPECT_EQ(ReadBytes(Analyze(t, *filter)), 100u + 200u + 800u);
  // The name as the program passed it still matches.
  filter = ParseFilterSpecs({"file=*/x.so.1"}, std::nullopt, std::nullopt);
  ASSERT_TRUE(filter.ok());
  EXPECT_EQ(ReadBytes(Analyze(t, *filter)), 400u);
}

TEST(AnalysisScope, IncludeExcludeAndDataPresetOnResolvedNames) {
  TraceBuilder t = ResolvedNamesTrace();
  AnalysisFilter f;
  EXPECT_EQ(ReadBytes(Analyze(t, f)), 1500u);
  EXPECT_FALSE(Analyze(t, f).contains("scope"));

  f.scope = *model::Scope::Parse("all", {"/w/data/*"}, {});
  json m = Analyze(t, f);
  EXPECT_EQ(ReadBytes(m), 1100u);
  EXPECT_EQ(m["scope"]["left_out"]["call_bytes"].get<uint64_t>(), 400u);
  EXPECT_EQ(m["scope"]["include"][0], "/w/data/*");

  f.scope = *model::Scope::Parse("all", {}, {"/w/data/c.bin"});
  EXPECT_EQ(ReadBytes(Analyze(t, f)), 700u);

  f.scope = *model::Scope::Parse("data", {}, {});
  m = Analyze(t, f);
  EXPECT_EQ(ReadBytes(m), 1100u);
  EXPECT_EQ(m["scope"]["preset"], "data");
  // open + read of the library.
  EXPECT_EQ(m["scope"]["left_out"]["calls"].get<uint64_t>(), 2u);
  EXPECT_TRUE(m["filter"].is_null()) << "the scope is not a --filter";
}

// A /proc file opened relative to a descriptor on /proc has a regular file's type and a relative
// name: only its resolved name says it is no storage, and the data scope leaves it out.
TEST(AnalysisScope, DataPresetLeavesOutAPseudoFileOpenedThroughADirfd) {
  TraceBuilder t(FullCaptureMeta());
  t.meta()["capture"] = {{"mode", "command"}};
  uint64_t ts = kStart + 1000;
  Open(t, ts++, -100, "/proc", 3, 1, kDirectory);
  Open(t, ts++, 3, "self/status", 4, 2);
  Read(t, ts++, 4, 2, 300);
  Open(t, ts++, -100, "/w/data.bin", 5, 3);
  Read(t, ts++, 5, 3, 50);
  AnalysisFilter f;
  f.scope = *model::Scope::Parse("data", {}, {});
  json m = Analyze(t, f);
  EXPECT_EQ(ReadBytes(m), 50u);
  EXPECT_EQ(m["scope"]["left_out"]["call_bytes"].get<uint64_t>(), 300u);
}

}  // namespace
}  // namespace iotwin::analysis
