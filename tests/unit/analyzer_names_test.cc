// The analyzer names files by the paths the trace interpreter (model::TraceState) resolves: the
// cwd and dirfd applied, renamed directories followed; every distinct name of a file kept (up to
// four); an empty path (fstat as glibc makes it: newfstatat(fd, "", AT_EMPTY_PATH)) adds none.
#include <fcntl.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;

json Analyze(const TraceBuilder& t, AnalyzerOptions o = {}) {
  o.top = 0;
  Analyzer a(std::move(o));
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

iot_syscall& OpenFile(TraceBuilder& b, std::string_view path, int fd, uint64_t ino) {
  iot_syscall& r = b.Openat(100, path, O_RDWR | O_CREAT, fd);
  r.ino = ino;
  r.dev = kDev;
  r.ftype = 8;
  return r;
}

void Write(TraceBuilder& b, int fd, uint64_t ino, uint64_t len) {
  iot_syscall& r = b.Syscall(100, IOT_OP_WRITE, static_cast<int64_t>(len));
  r.fd = fd;
  r.length = len;
  r.ino = ino;
  r.dev = kDev;
  r.ftype = 8;
  r.fsize = len;
}

// The names of the file with inode `ino`.
std::vector<std::string> NamesOf(const json& m, uint64_t ino) {
  for (const json& row : m["files"]["rows"]) {
    if (row["ino"] == ino) return row["names"].get<std::vector<std::string>>();
  }
  return {"<no row>"};
}

// chdir into a directory, the directory renamed, a relative open: the file lies below the new
// name, and a glob sees that name.
TEST(AnalyzerNames, RelativeOpenInRenamedCwdIsNamedBelowTheNewName) {
  TraceBuilder b(test::FullCaptureMeta());
  b.Attach(100, "/");
  b.PathOp(100, IOT_OP_CHDIR, "/d/w", 0);
  b.Path2Op(100, IOT_OP_RENAME, "/d/w", "/d/w2");
  OpenFile(b, "f", 3, 51);
  Write(b, 3, 51, 10);
  const json m = Analyze(b);
  EXPECT_EQ(NamesOf(m, 51), std::vector<std::string>{"/d/w2/f"});

  AnalyzerOptions new_name;
  new_name.filter.file_globs = {"/d/w2/*"};
  EXPECT_EQ(Analyze(b, new_name)["totals"]["write"]["bytes"], 10);
  AnalyzerOptions old_name;
  old_name.filter.file_globs = {"/d/w/*"};
  EXPECT_EQ(Analyze(b, old_name)["totals"]["write"]["bytes"], 0);
}

// A file opened again after its directory's rename has both names; opened by a relative and an
// absolute path to the same place, one.
TEST(AnalyzerNames, EveryDistinctResolvedNameIsKept) {
  TraceBuilder b(test::FullCaptureMeta());
  b.Attach(100, "/d");
  OpenFile(b, "x", 3, 61);
  OpenFile(b, "/d/x", 4, 61);
  b.Path2Op(100, IOT_OP_RENAME, "/d", "/e");
  OpenFile(b, "/e/x", 5, 61);
  Write(b, 5, 61, 10);
  EXPECT_EQ(NamesOf(Analyze(b), 61), (std::vector<std::string>{"/d/x", "/e/x"}));
}

// glibc's fstat: newfstatat(fd, "", AT_EMPTY_PATH) names the descriptor's file, no new name.
TEST(AnalyzerNames, EmptyPathStatAddsNoName) {
  TraceBuilder b(test::FullCaptureMeta());
  b.Attach(100, "/");
  OpenFile(b, "/d/a", 3, 71);
  iot_syscall& st = b.PathOp(100, IOT_OP_NEWFSTATAT, "", 0, 3);
  st.flags = AT_EMPTY_PATH;
  st.ino = 71;
  st.dev = kDev;
  st.ftype = 8;
  iot_syscall& by_path = b.PathOp(100, IOT_OP_NEWFSTATAT, "/d/../d/a", 0);  // the same name
  by_path.ino = 71;
  by_path.dev = kDev;
  by_path.ftype = 8;
  Write(b, 3, 71, 10);
  const json m = Analyze(b);
  EXPECT_EQ(NamesOf(m, 71), std::vector<std::string>{"/d/a"});
  for (const json& row : m["files"]["rows"]) EXPECT_EQ(row["more_names"], 0);
}

}  // namespace
}  // namespace iotwin::analysis
