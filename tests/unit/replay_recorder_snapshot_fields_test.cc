// The snapshots FilterTraceToThreads writes for the bookkeeping threads' dups and mmaps say what
// the kernel holds: the new descriptor's own close-on-exec flag, and a mapping range that does
// not wrap past 2^64.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/records.h"
#include "format/trace_reader.h"
#include "replay/recorder.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace iotwin::replay {
namespace {

constexpr uint32_t kPid = 10, kWorker = 11, kBookkeeper = 12;

struct Written {
  std::vector<iot_fd_snapshot> fds;
  std::vector<iot_map_snapshot> maps;
};

Written Filter(const test::TraceBuilder& b) {
  test::TempDir dir;
  const std::string in = dir / "in.iotwin";
  const std::string out = dir / "out.iotwin";
  Written w;
  EXPECT_TRUE(b.WriteFile(in).ok());
  Status st = FilterTraceToThreads(in, out, {static_cast<pid_t>(kWorker)}, nlohmann::json::object());
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto r = TraceReader::Open(out);
  EXPECT_TRUE(r.ok());
  while (r.ok()) {
    auto rec = r.value()->Next();
    if (!rec.ok() || !rec.value()) break;
    if (rec.value()->type == IOT_REC_FD_SNAPSHOT) w.fds.push_back(As<iot_fd_snapshot>(rec.value()));
    if (rec.value()->type == IOT_REC_MAP_SNAPSHOT) {
      w.maps.push_back(As<iot_map_snapshot>(rec.value()));
    }
  }
  return w;
}

test::TraceBuilder Replayer() {
  test::TraceBuilder b;
  b.Thread(kPid, kWorker);
  b.Thread(kPid, kBookkeeper);
  return b;
}

// A dup does not inherit O_CLOEXEC and F_DUPFD_CLOEXEC sets it: a reader of the snapshot closes
// at exec exactly the descriptors the kernel closes.
TEST(ReplayRecorderSnapshotFields, CloseOnExecIsTheNewDescriptors) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR | O_CLOEXEC, 5);
  b.Openat(kWorker, "/sandbox/b", O_RDWR, 7);
  b.Dup(kBookkeeper, 5, 6);
  b.Fcntl(kBookkeeper, 7, F_DUPFD_CLOEXEC, 20, 20);
  Written w = Filter(b);
  ASSERT_EQ(w.fds.size(), 2u);
  EXPECT_EQ(w.fds[0].fd, 6);
  EXPECT_EQ(w.fds[0].flags & O_CLOEXEC, 0u);
  EXPECT_EQ(w.fds[0].flags & O_ACCMODE, static_cast<uint32_t>(O_RDWR));
  EXPECT_EQ(w.fds[1].fd, 20);
  EXPECT_EQ(w.fds[1].flags & O_CLOEXEC, static_cast<uint32_t>(O_CLOEXEC));
}

// The snapshot carries the file position the shared description has reached, which the new
// descriptor shares, rather than claiming 0.
TEST(ReplayRecorderSnapshotFields, PositionIsTheDescriptions) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR, 5);
  b.Read(kWorker, 5, 100, 100);
  b.Dup(kBookkeeper, 5, 6);
  Written w = Filter(b);
  ASSERT_EQ(w.fds.size(), 1u);
  EXPECT_EQ(w.fds[0].pos, 100u);
}

// A mapping whose recorded length runs past 2^64 ends there instead of wrapping below its start.
TEST(ReplayRecorderSnapshotFields, MappingEndDoesNotWrap) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR, 5);
  b.Mmap(kBookkeeper, 5, 0, UINT64_MAX - 100, PROT_READ, MAP_SHARED, 0x7f0000000000);
  Written w = Filter(b);
  ASSERT_EQ(w.maps.size(), 1u);
  EXPECT_EQ(w.maps[0].start, 0x7f0000000000u);
  EXPECT_EQ(w.maps[0].end, UINT64_MAX);
}

}  // namespace
}  // namespace iotwin::replay
