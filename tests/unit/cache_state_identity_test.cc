// The capture names a file's initial page-cache state (CACHE_STATE) by the spelling the workload
// opened it with; the model links the state to the file it resolves for that open, by identity,
// whatever the spelling: relative to the working directory, relative to a directory descriptor,
// or a name the file was renamed to.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "model/trace_model.h"
#include "trace_builder.h"

namespace iotwin::test {
namespace {

constexpr uint32_t kDev = 0xfe00001;
constexpr uint64_t kIno = 4711;

// The state recorded as `spelling` for the file opened (by `open`) with the same identity.
void SameIdentity(iot_cache_state& cs, iot_syscall& open) {
  cs.dev = open.dev = kDev;
  cs.ino = open.ino = kIno;
  open.ftype = 8;
}

struct Linked {
  std::string path;       // the linked file's path ("" when none)
  std::string state_path; // the state's path in the model
  bool preexisting = false;
};

Linked LinkOf(const TraceBuilder& b) {
  model::ModelBuilder mb;
  mb.SetMeta(nlohmann::json::object());
  EXPECT_TRUE(b.Feed(mb).ok());
  auto m = mb.Finish();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  const auto& states = m.value()->cache_states();
  EXPECT_EQ(states.size(), 1u);
  if (states.size() != 1 || states[0].file == model::kNone) return {};
  const model::FileInfo& f = m.value()->files()[states[0].file];
  Linked l;
  l.path = m.value()->path(f.path);
  l.state_path = states[0].path == model::kNone ? "" : m.value()->path(states[0].path);
  l.preexisting = f.origin == model::FileOrigin::kPreexisting;
  return l;
}

TEST(CacheStateIdentity, RelativeSpellingLinksToTheFileUnderTheWorkingDirectory) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Attach(100, "/work/run");
  auto& cs = b.CacheState("./perf64.dat", 64 << 20, 16384, 16384);
  auto& open = b.Openat(100, "./perf64.dat", O_RDONLY, 3, 64 << 20);
  SameIdentity(cs, open);
  b.Pread(100, 3, 0, 4096, 4096, 64 << 20);
  b.Close(100, 3);
  Linked l = LinkOf(b);
  EXPECT_EQ(l.path, "/work/run/perf64.dat");
  EXPECT_EQ(l.state_path, "/work/run/perf64.dat");
  EXPECT_TRUE(l.preexisting);
}

TEST(CacheStateIdentity, DirfdRelativeSpellingLinksToTheFileUnderTheDirectory) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Attach(100, "/");
  b.Openat(100, "/data/set", O_RDONLY | O_DIRECTORY, 3);
  auto& cs = b.CacheState("shard-0.bin", 1 << 20, 256, 256);
  auto& open = b.Openat(100, "shard-0.bin", O_RDONLY, 4, 1 << 20, /*dirfd=*/3);
  SameIdentity(cs, open);
  b.Pread(100, 4, 0, 4096, 4096, 1 << 20);
  b.Close(100, 4);
  b.Close(100, 3);
  Linked l = LinkOf(b);
  EXPECT_EQ(l.path, "/data/set/shard-0.bin");
  EXPECT_TRUE(l.preexisting);
}

// Renamed before it was opened: the state names the new name; the file the trace starts with is
// the old one, and the replay's preparation warms that.
TEST(CacheStateIdentity, RenamedFileLinksToItsNameAtTheStart) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Attach(100, "/data");
  b.Path2Op(100, IOT_OP_RENAME, "a.dat", "b.dat");
  auto& cs = b.CacheState("b.dat", 1 << 20, 256, 256);
  auto& open = b.Openat(100, "b.dat", O_RDONLY, 3, 1 << 20);
  SameIdentity(cs, open);
  b.Pread(100, 3, 0, 4096, 4096, 1 << 20);
  b.Close(100, 3);
  Linked l = LinkOf(b);
  EXPECT_EQ(l.path, "/data/a.dat");
  EXPECT_TRUE(l.preexisting);
}

// Renamed after it was opened and cached, by an absolute name: the state names the first name.
TEST(CacheStateIdentity, FileRenamedAfterItsStateKeepsIt) {
  TraceBuilder b;
  b.Thread(100, 100);
  auto& cs = b.CacheState("/data/a.dat", 1 << 20, 256, 256);
  auto& open = b.Openat(100, "/data/a.dat", O_RDONLY, 3, 1 << 20);
  SameIdentity(cs, open);
  b.Pread(100, 3, 0, 4096, 4096, 1 << 20);
  b.Close(100, 3);
  b.Path2Op(100, IOT_OP_RENAME, "/data/a.dat", "/data/b.dat");
  Linked l = LinkOf(b);
  EXPECT_EQ(l.path, "/data/a.dat");
  EXPECT_TRUE(l.preexisting);
}

}  // namespace
}  // namespace iotwin::test
