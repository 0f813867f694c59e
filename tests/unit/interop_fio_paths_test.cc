// fio export: the paths of the files a job names come from model::TraceState, the one
// interpreter of descriptors, paths and the cwd: chdir and fchdir move the cwd as the model
// moves it, a relative path whose base the trace never showed stays relative for fio to name
// (never a made-up absolute path), and a descriptor snapshot's pseudo-name ("anon_inode:[...]")
// is no path below the cwd.
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

constexpr uint64_t kMs = 1000000;
constexpr uint32_t kPid = 10;

// The process was found at attach with its cwd.
void Attach(TraceBuilder& b, std::string_view cwd) {
  iot_proc p{};
  InitRecord(&p, IOT_REC_PROC);
  p.kind = IOT_PROC_ATTACH;
  p.ts = 1;
  p.tgid = kPid;
  p.tid = kPid;
  p.path_id = b.Str(cwd);
  b.Add(p);
}

void Open(TraceBuilder& b, uint64_t ts, std::string_view path, int32_t fd, uint32_t flags = 0) {
  auto& s = b.Call(IOT_OP_OPENAT, ts, kPid, kPid, AT_FDCWD, fd);
  s.path_id = b.Str(path);
  s.flags = flags;
}

void Read(TraceBuilder& b, uint64_t ts, int32_t fd) {
  b.Call(IOT_OP_READ, ts, kPid, kPid, fd, 4096).length = 4096;
}

// The original names of the files the export saw, in index order.
std::vector<std::string> Originals(const std::string& trace, const std::string& dir) {
  FioExportOptions o;
  o.dir = dir;
  auto r = ExportFio(trace, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> names;
  if (r.ok()) {
    for (const FioFileResult& f : r->per_file) names.push_back(f.original);
  }
  return names;
}

// The cwd was never shown: chdir("sub") leaves it unknown, and "f" stays relative. The export's
// own chdir made the cwd "sub", which the model joined into the absolute "/sub/f".
TEST(FioExportPaths, ChdirFromAnUnknownCwdKeepsTheNextPathRelative) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    b.Call(IOT_OP_CHDIR, 1 * kMs, kPid, kPid, -1, 0).path_id = b.Str("sub");
    Open(b, 2 * kMs, "f", 3);
    Read(b, 3 * kMs, 3);
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  EXPECT_EQ(Originals(dir / "t.iotwin", dir / "fio"), std::vector<std::string>{"f"});
}

// A directory opened by a relative name from an unknown cwd, then fchdir into it: the path
// after it has no known base either (not "/sub/f").
TEST(FioExportPaths, RelativePathAfterFchdirIntoADirectoryOfUnknownBase) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    Open(b, 1 * kMs, "sub", 4, O_DIRECTORY);
    b.Call(IOT_OP_FCHDIR, 2 * kMs, kPid, kPid, 4, 0);
    Open(b, 3 * kMs, "f", 3);
    Read(b, 4 * kMs, 3);
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  EXPECT_EQ(Originals(dir / "t.iotwin", dir / "fio"), std::vector<std::string>{"f"});
}

// With the cwd known, chdir and fchdir move it as the model does.
TEST(FioExportPaths, ChdirAndFchdirFollowTheModel) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    Attach(b, "/home/u");
    b.Call(IOT_OP_CHDIR, 1 * kMs, kPid, kPid, -1, 0).path_id = b.Str("work/../data");
    Open(b, 2 * kMs, "a", 3);
    Read(b, 3 * kMs, 3);
    Open(b, 4 * kMs, "/srv/db", 4, O_DIRECTORY);
    b.Call(IOT_OP_FCHDIR, 5 * kMs, kPid, kPid, 4, 0);
    Open(b, 6 * kMs, "./b", 5);
    Read(b, 7 * kMs, 5);
    // A failed chdir moves nothing.
    b.Call(IOT_OP_CHDIR, 8 * kMs, kPid, kPid, -1, -ENOENT).path_id = b.Str("/nowhere");
    Open(b, 9 * kMs, "c", 6);
    Read(b, 10 * kMs, 6);
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  const auto names = Originals(dir / "t.iotwin", dir / "fio");
  EXPECT_EQ(names, (std::vector<std::string>{"/home/u/data/a", "/srv/db/b", "/srv/db/c"}));
}

// A snapshot's "anon_inode:[eventfd]" is no file below the cwd: its reads are left out as of a
// descriptor without a known path, not exported as I/O on "/home/u/anon_inode:[eventfd]".
TEST(FioExportPaths, SnapshotPseudoNameIsNoPathBelowTheCwd) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    Attach(b, "/home/u");
    iot_fd_snapshot s{};
    InitRecord(&s, IOT_REC_FD_SNAPSHOT);
    s.ts = 2;
    s.tgid = kPid;
    s.fd = 5;
    s.flags = O_RDWR;
    s.path_id = b.Str("anon_inode:[eventfd]");
    b.Add(s);
    b.Call(IOT_OP_READ, 1 * kMs, kPid, kPid, 5, 8).length = 8;
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reads, 0u);
  EXPECT_TRUE(r->per_file.empty()) << r->per_file[0].original;
  EXPECT_EQ(r->skipped["read: no path known for the descriptor"], 1u);
}

}  // namespace
}  // namespace iotwin::interop
