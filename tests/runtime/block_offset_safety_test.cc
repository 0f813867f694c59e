// Device-level replay of untrusted block traces onto a loop device: a request whose sector
// arithmetic overflows is refused and counted, and nothing before --device-offset is written.
// Needs root for losetup (no BPF).
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "replay_util.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

size_t NonZeroBytes(const std::string& data) {
  size_t n = 0;
  for (char c : data) n += c != '\0';
  return n;
}

// A zero-filled image file on a free loop device; detached and removed on destruction.
class ZeroLoop {
 public:
  explicit ZeroLoop(uint64_t bytes) {
    char tmpl[] = "/var/tmp/iotwin-offset-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) return;
    image_ = tmpl;
    bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    close(fd);
    if (!sized) return;
    RunResult r = Run({"/sbin/losetup", "-f", "--show", image_}, 30);
    if (r.exit_code == 0) dev_ = r.out.substr(0, r.out.find('\n'));
  }
  ~ZeroLoop() {
    if (!dev_.empty()) Run({"/sbin/losetup", "-d", dev_}, 30);
    if (!image_.empty()) unlink(image_.c_str());
  }
  ZeroLoop(const ZeroLoop&) = delete;
  ZeroLoop& operator=(const ZeroLoop&) = delete;

  const std::string& dev() const { return dev_; }
  std::string Read(uint64_t offset, size_t n) const {
    std::ifstream img(image_, std::ios::binary);
    img.seekg(static_cast<std::streamoff>(offset));
    std::string data(n, '\0');
    img.read(data.data(), static_cast<std::streamsize>(n));
    return data;
  }

 private:
  std::string image_, dev_;
};

// `2000,W,1052672,36028797018961920,2056`: sector * 512 + bytes wraps to 4096, which wrote the
// 2048 sectors before the offset.
TEST(Security, DeviceOffsetOverflowIsRefusedOnALoopDevice) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  ZeroLoop loop(16 * kMiB);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  {
    std::ofstream csv(tmp / "blk.csv");
    csv << "nsecs,rwbs,bytes,sector,nr_sector\n"
           "1000,W,4096,16,8\n"
           "2000,W,1052672,36028797018961920,2056\n";
  }
  RunResult imp = test::Run({IotwinBin(), "import", "--format", "bpftrace-csv",
                             tmp / "blk.csv", "-o", tmp / "t.iotwin"});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  auto r = RunReplayCmd({tmp / "t.iotwin", "--layer", "block", "--device", loop.dev(),
                         "--allow-device", "--device-offset", "1048576", "--pace", "fast",
                         "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/refused/total"), 1u) << r.summary.dump(2);
  EXPECT_EQ(J(r.summary, "/refused/range_overflow"), 1u) << r.summary.dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/block_write/count"), 1u) << r.summary.dump(2);
  // The 2048 sectors before the offset are untouched; the good write landed after it.
  EXPECT_EQ(NonZeroBytes(loop.Read(0, kMiB)), 0u);
  EXPECT_GT(NonZeroBytes(loop.Read(kMiB + 16 * 512, 4096)), 0u);

  // The text output says what was refused and why.
  auto text = RunReplayCmd({tmp / "t.iotwin", "--layer", "block", "--device", loop.dev(),
                            "--allow-device", "--device-offset", "1048576", "--pace", "fast"});
  ASSERT_EQ(text.run.exit_code, 0) << text.run.err;
  EXPECT_NE((text.run.out + text.run.err).find("range_overflow"), std::string::npos)
      << text.run.out << text.run.err;
  EXPECT_EQ(NonZeroBytes(loop.Read(0, kMiB)), 0u);
}

// A fast replay that ends within its start margin printed `in 18446744073.709 s: 0 IOPS`.
TEST(Security, FastBlockReplayReportsARealDuration) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  ZeroLoop loop(4 * kMiB);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}}};
  b.Block(IOT_BLK_ISSUE, 8, 4096, IOT_BLKF_READ, 1);
  b.Block(IOT_BLK_COMPLETE, 8, 4096, IOT_BLKF_READ, 1);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  double secs = r.summary["duration_s"].get<double>();
  EXPECT_GT(secs, 0.0) << r.summary.dump(2);
  EXPECT_LT(secs, 10.0) << r.summary.dump(2);
  EXPECT_GT(r.summary["iops"].get<double>(), 0.0) << r.summary.dump(2);
}

}  // namespace
}  // namespace iotwin::test
