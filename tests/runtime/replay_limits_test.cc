// iotwin replay against what the machine allows: a trace needing more threads than the uid may
// run, writes that do not fit the target, --max-write, and free space taken while it runs.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "replay_util.h"

namespace iotwin::test {
namespace {

// A tmpfs of `size` mounted on `dir`, unmounted on destruction.
class SmallFs {
 public:
  SmallFs(const std::string& dir, const std::string& size) : dir_(dir) {
    mkdir(dir.c_str(), 0755);
    ok_ = mount("iotwin-small", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~SmallFs() {
    if (ok_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs v;
  if (statvfs(dir.c_str(), &v) != 0) return 0;
  return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
}

// One thread creating /data/f and writing `count` chunks of `chunk` bytes, `gap` ns apart.
TraceBuilder Writer(int count, uint64_t chunk, uint64_t gap = 10'000) {
  TraceBuilder b;
  b.step = gap;
  b.Openat(7, "/data/f", O_CREAT | O_WRONLY, 3);
  for (int k = 0; k < count; k++) {
    b.Pwrite(7, 3, chunk * static_cast<uint64_t>(k), chunk, static_cast<int64_t>(chunk));
  }
  b.Close(7, 3);
  return b;
}

#define REQUIRE_ROOT_OR_SKIP()                                   \
  do {                                                           \
    if (geteuid() != 0) GTEST_SKIP() << "needs root (mount, setpriv)"; \
  } while (0)

TEST(ReplayLimits, ThreadLimitOfAnUnprivilegedUserIsNamedBeforeStarting) {
  REQUIRE_ROOT_OR_SKIP();
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  TraceBuilder b;
  b.step = 1'000;
  for (uint32_t t = 0; t < 1000; t++) {
    b.Thread(1000, 1000 + t);
    b.Openat(1000 + t, "/data/f" + std::to_string(t), O_CREAT | O_WRONLY, static_cast<int>(3 + t));
    b.Close(1000 + t, static_cast<int>(3 + t));
  }
  const std::string trace = WriteTrace(b, dir / "t.iotwin");
  const std::string root = dir / "root";
  mkdir(root.c_str(), 0777);
  RunResult r = test::Run({"/usr/bin/prlimit", "--nproc=300:300", "/usr/bin/setpriv",
                           "--reuid=65534", "--regid=65534", "--clear-groups", IotwinBin(),
                           "replay", trace, "--root", root, "--pace", "fast", "-q"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("needs 1001 threads"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RLIMIT_NPROC"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(root + "/data")) << "written before refusing";
}

TEST(ReplayLimits, WritesThatDoNotFitAreRefusedBeforeAnythingIsWritten) {
  REQUIRE_ROOT_OR_SKIP();
  TempDir dir;
  SmallFs fs(dir / "fs", "64m");
  ASSERT_TRUE(fs.ok()) << "mount tmpfs";
  const std::string root = dir / "fs/root";
  mkdir(root.c_str(), 0755);
  const std::string trace = WriteTrace(Writer(12, uint64_t{16} << 20), dir / "t.iotwin");

  ReplayRun d = RunReplayCmd({trace, "--root", root, "--dry-run", "--json"});
  ASSERT_EQ(d.run.exit_code, 0) << d.run.err;
  EXPECT_EQ(J(d.summary, "/writes/bytes"), uint64_t{192} << 20) << d.run.out;
  EXPECT_EQ(J(d.summary, "/writes/growth_bytes"), uint64_t{192} << 20) << d.run.out;

  ReplayRun r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "-q"});
  EXPECT_EQ(r.run.exit_code, 2) << r.run.err;
  EXPECT_NE(r.run.err.find("insufficient space"), std::string::npos) << r.run.err;
  EXPECT_NE(r.run.err.find("grow files by up to 201326592 bytes"), std::string::npos) << r.run.err;
  EXPECT_FALSE(Exists(root + "/data/f"));
  EXPECT_GT(FreeBytes(dir / "fs"), uint64_t{60} << 20);
}

TEST(ReplayLimits, MaxWriteStopsTheReplay) {
  REQUIRE_ROOT_OR_SKIP();
  TempDir dir;
  const std::string root = dir / "root";
  mkdir(root.c_str(), 0755);
  const std::string trace = WriteTrace(Writer(4, uint64_t{4} << 20), dir / "t.iotwin");
  ReplayRun r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--max-write", "6M",
                              "--json", "-q"});
  EXPECT_EQ(r.run.exit_code, 2) << r.run.err;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  EXPECT_TRUE(r.summary["write_budget"]["stopped"].get<bool>());
  EXPECT_NE(r.summary.value("aborted", std::string()).find("--max-write 6291456"), std::string::npos)
      << r.summary["aborted"];
  EXPECT_EQ(FileSize(root + "/data/f"), int64_t{4} << 20);
}

// Another writer takes the room the pre-flight check saw: the replay stops at the reserve,
// the file system is never filled.
TEST(ReplayLimits, FreeSpaceTakenDuringTheReplayStopsIt) {
  REQUIRE_ROOT_OR_SKIP();
  TempDir dir;
  SmallFs fs(dir / "fs", "64m");
  ASSERT_TRUE(fs.ok()) << "mount tmpfs";
  const std::string root = dir / "fs/root";
  mkdir(root.c_str(), 0755);
  // 15 x 4 MiB, 200 ms apart: 60 MiB, which fits the 64 MiB file system alone.
  const std::string trace =
      WriteTrace(Writer(15, uint64_t{4} << 20, 200'000'000), dir / "t.iotwin");
  ReplayRun r;
  std::thread replay([&] { r = RunReplayCmd({trace, "--root", root, "--json", "-q"}); });
  // Once the replay writes, 40 MiB go elsewhere on the same file system.
  for (int i = 0; i < 1000 && !Exists(root + "/data/f"); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::ofstream filler(dir / "fs/filler", std::ios::binary);
    std::string mib(1 << 20, 'x');
    for (int i = 0; i < 40; i++) filler << mib;
  }
  replay.join();
  EXPECT_EQ(r.run.exit_code, 2) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  EXPECT_NE(r.summary.value("aborted", std::string()).find("free for this replay"),
            std::string::npos)
      << r.summary["aborted"];
  EXPECT_GE(FreeBytes(dir / "fs"), uint64_t{1} << 20);
  EXPECT_LT(FileSize(root + "/data/f"), int64_t{60} << 20);
}

}  // namespace
}  // namespace iotwin::test
