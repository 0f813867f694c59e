// FilterTraceToThreads describes descriptors and mappings the replayer's bookkeeping threads make
// (dups, mmaps) as snapshots; which file a descriptor names follows the kernel's tables.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <unistd.h>

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

struct Snapshots {
  std::vector<std::pair<int32_t, std::string>> fds;  // (fd, path)
  std::vector<std::string> maps;                      // paths
};

Snapshots FilterSnapshots(test::TraceBuilder& b) {
  test::TempDir dir;
  const std::string in = dir / "in.iotwin";
  const std::string out = dir / "out.iotwin";
  Snapshots s;
  EXPECT_TRUE(b.WriteFile(in).ok());
  Status st = FilterTraceToThreads(in, out, {static_cast<pid_t>(kWorker)}, nlohmann::json::object());
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto r = TraceReader::Open(out);
  EXPECT_TRUE(r.ok());
  if (!r.ok()) return s;
  while (true) {
    auto rec = r.value()->Next();
    if (!rec.ok() || !rec.value()) break;
    if (rec.value()->type == IOT_REC_FD_SNAPSHOT) {
      const auto& f = As<iot_fd_snapshot>(rec.value());
      s.fds.emplace_back(f.fd, std::string(r.value()->String(f.path_id)));
    } else if (rec.value()->type == IOT_REC_MAP_SNAPSHOT) {
      s.maps.emplace_back(r.value()->String(As<iot_map_snapshot>(rec.value()).path_id));
    }
  }
  return s;
}

test::TraceBuilder Replayer() {
  test::TraceBuilder b;
  b.Thread(kPid, kWorker);
  b.Thread(kPid, kBookkeeper);
  return b;
}

TEST(ReplayRecorderDescriptors, BookkeeperDupAndMmapAreSnapshots) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR, 5);
  b.Dup(kBookkeeper, 5, 6);
  b.Mmap(kBookkeeper, 5, 0, 4096, PROT_READ, MAP_SHARED, 0x10000);
  Snapshots s = FilterSnapshots(b);
  EXPECT_EQ(s.fds, (std::vector<std::pair<int32_t, std::string>>{{6, "/sandbox/a"}}));
  EXPECT_EQ(s.maps, (std::vector<std::string>{"/sandbox/a"}));
}

// close_range closed the descriptor: a later successful use of the number is another file, not
// the one opened before.
TEST(ReplayRecorderDescriptors, CloseRangeForgetsTheClosedFiles) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR, 5);
  b.CloseRange(kWorker, 3, UINT32_MAX);
  b.Dup(kBookkeeper, 5, 6);  // 5 now names something the trace did not open
  b.Mmap(kBookkeeper, 5, 0, 4096, PROT_READ, MAP_SHARED, 0x10000);
  Snapshots s = FilterSnapshots(b);
  EXPECT_TRUE(s.fds.empty());
  EXPECT_TRUE(s.maps.empty());
}

// exec closes the close-on-exec descriptors (and keeps the others).
TEST(ReplayRecorderDescriptors, ExecClosesCloexecDescriptors) {
  test::TraceBuilder b = Replayer();
  b.Openat(kWorker, "/sandbox/a", O_RDWR | O_CLOEXEC, 5);
  b.Openat(kWorker, "/sandbox/b", O_RDWR, 7);
  b.Exec(kWorker, "/bin/self");
  b.Dup(kBookkeeper, 5, 6);
  b.Dup(kBookkeeper, 7, 8);
  Snapshots s = FilterSnapshots(b);
  EXPECT_EQ(s.fds, (std::vector<std::pair<int32_t, std::string>>{{8, "/sandbox/b"}}));
}

}  // namespace
}  // namespace iotwin::replay
