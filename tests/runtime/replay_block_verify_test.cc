// Device-level replay that can be verified: `replay --layer block --record R` captures the
// replay's own block layer into R (header naming the source trace, layer and pace), and
// `compare` judges R against the original block stream. Loop devices backed by sparse files in
// /var/tmp; root and BPF.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

// A raw loop device over a sparse file; detached and removed on destruction.
class RawLoop {
 public:
  explicit RawLoop(uint64_t bytes) {
    char tmpl[] = "/var/tmp/iotwin-vloop-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) return;
    image_ = tmpl;
    const bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    close(fd);
    if (!sized) return;
    RunResult r = Run({"/usr/sbin/losetup", "-f", "--show", image_}, 30);
    if (r.exit_code == 0) dev_ = r.out.substr(0, r.out.find('\n'));
  }
  ~RawLoop() {
    if (!dev_.empty()) Run({"/usr/sbin/losetup", "-d", dev_}, 30);
    if (!image_.empty()) unlink(image_.c_str());
  }
  RawLoop(const RawLoop&) = delete;
  RawLoop& operator=(const RawLoop&) = delete;
  const std::string& dev() const { return dev_; }
  const std::string& image() const { return image_; }
  // True while every byte of the backing file is zero (nothing was written).
  bool Untouched() const {
    std::ifstream in(image_, std::ios::binary);
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      for (std::streamsize i = 0; i < in.gcount(); i++) {
        if (buf[i] != 0) return false;
      }
    }
    return true;
  }

 private:
  std::string image_, dev_;
};

nlohmann::json TraceMeta(const std::string& path) {
  auto reader = TraceReader::Open(path, {});
  if (!reader.ok()) return nullptr;
  return (*reader)->meta();
}

// 60 4 KiB requests, reads and writes, 200 us apart, on one device.
TraceBuilder SmallBlockTrace() {
  TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}}};
  b.step = 100'000;
  for (uint64_t i = 0; i < 60; i++) {
    const uint32_t dir = i % 3 == 0 ? IOT_BLKF_WRITE : IOT_BLKF_READ;
    b.Block(IOT_BLK_ISSUE, (i * 37 % 512) * 8, 4096, dir, i + 1);
    b.Block(IOT_BLK_COMPLETE, (i * 37 % 512) * 8, 4096, dir, i + 1);
  }
  return b;
}

TEST(ReplayBlockRecord, RecordsTheReplaysOwnBlockLayerWithAHeaderNamingItsSource) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  RawLoop loop(8 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  const std::string trace = WriteTrace(SmallBlockTrace(), tmp / "t.iotwin");
  const std::string rec = tmp / "r.iotwin";
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--pace", "gaps", "--record", rec, "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(r.summary["record"]["ok"], true) << r.summary.dump(2);
  EXPECT_EQ(r.summary["record"]["path"], rec);
  ASSERT_TRUE(Exists(rec));
  const nlohmann::json meta = TraceMeta(rec);
  ASSERT_TRUE(meta.is_object());
  EXPECT_EQ(meta["replay"]["source"], trace) << meta.dump(2);
  EXPECT_EQ(meta["replay"]["layer"], "block");
  EXPECT_EQ(meta["replay"]["pace"], "gaps");
  EXPECT_EQ(meta["replay"]["device"], loop.dev());
  // The replay's own requests on the target device: all 60 issued and completed.
  auto reader = TraceReader::Open(rec, {});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::set<uint64_t> issued, completed;
  while (true) {
    auto next = (*reader)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!*next) break;
    if ((*next)->type != IOT_REC_BLOCK) continue;
    const auto& b = As<iot_block>(*next);
    if (b.phase == IOT_BLK_ISSUE) issued.insert(b.rq_id);
    if (b.phase == IOT_BLK_COMPLETE) completed.insert(b.rq_id);
  }
  EXPECT_GE(issued.size(), 60u);
  EXPECT_EQ(completed.size(), issued.size());
}

TEST(ReplayBlockRecord, AnUnwritableRecordingIsRefusedBeforeAnyRequest) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  RawLoop loop(8 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  const std::string trace = WriteTrace(SmallBlockTrace(), tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--pace", "fast", "--record", tmp / "missing/r.iotwin", "-q"});
  EXPECT_EQ(r.run.exit_code, 2) << r.run.out;
  EXPECT_NE(r.run.err.find("iotwin replay: --record"), std::string::npos) << r.run.err;
  EXPECT_TRUE(loop.Untouched());
}

TEST(ReplayBlockRecord, DryRunIsRefusedAndWritesNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  RawLoop loop(8 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  const std::string trace = WriteTrace(SmallBlockTrace(), tmp / "t.iotwin");
  for (const char* flag : {"--dry-run", "--prepare-only"}) {
    auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                           "--pace", "fast", flag, "-q"});
    EXPECT_EQ(r.run.exit_code, 2) << flag << ": " << r.run.out;
    EXPECT_NE(r.run.err.find("not --layer block"), std::string::npos) << r.run.err;
  }
  EXPECT_TRUE(loop.Untouched());
}

}  // namespace
}  // namespace iotwin::test
