// Block layer, page-cache write-back on a loop device: the requests that write a file's dirty
// pages are attributed to that file, whether the writing thread writes them back itself (fsync,
// msync after stores through a shared mapping) or the flusher threads do (syncfs); and every
// request of the trace is linked to a cause or explicitly unattributed.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <map>
#include <set>
#include <thread>

#include "block_loop.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kBytes = 2 << 20;

struct FileRequests {
  uint64_t requests = 0, bytes = 0;
  std::map<std::string, uint64_t> causes;
  std::set<std::string> calls;
  uint64_t dirtied_by_calls = 0;
};

// The write requests whose pages belong to `path` (by the file name the report resolved from the
// trace's open calls).
FileRequests WritesOf(const nlohmann::json& report, const std::string& path) {
  FileRequests f;
  for (const auto& q : report["requests"]) {
    if (q.value("file", "") != path || q["op"] != "write") continue;
    f.requests++;
    f.bytes += q["bytes"].get<uint64_t>();
    f.causes[q["cause"]]++;
    if (q.contains("syscall")) f.calls.insert(q["syscall"]["op"]);
    if (q.contains("dirtied_by")) f.dirtied_by_calls += q["dirtied_by"]["calls"].get<uint64_t>();
  }
  return f;
}

LayersRun RecordWriteback(const LoopFs& fs, const TempDir& dir, const std::string& file,
                          const std::string& mode) {
  LayersRun r = RecordLayers(dir, "blk_writeback", {fs.path(file), mode, std::to_string(kBytes)});
  EXPECT_EQ(r.record.exit_code, 0) << r.record.err;
  EXPECT_EQ(r.layers.exit_code, 0) << r.layers.err;
  return r;
}

TEST(BlockWriteback, BufferedWriteAndFsyncWriteBackIsAttributedToTheFile) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  LayersRun r = RecordWriteback(fs, dir, "buffered", "fsync");
  ASSERT_TRUE(r.report.is_object());
  ExpectEveryRequestAccountedFor(r.report);
  FileRequests f = WritesOf(r.report, fs.path("buffered"));
  // all 2 MiB reach the device as requests of this file, written back inside fsync
  EXPECT_GE(f.bytes, kBytes);
  EXPECT_GE(f.requests, 1u);
  EXPECT_EQ(f.causes["syscall"], f.requests);
  EXPECT_EQ(f.calls, std::set<std::string>{"fsync"});
  // and the journal commit (with its cache flush) that fsync waited for is linked to it
  uint64_t induced = 0;
  for (const auto& q : r.report["requests"]) {
    if (q["cause"] == "sync_induced" && q["syscall"]["op"] == "fsync") induced++;
  }
  EXPECT_GE(induced, 1u) << "no journal or flush request linked to the fsync";
}

TEST(BlockWriteback, MmapStoresAndMsyncWriteBackIsAttributedToTheFile) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  LayersRun r = RecordWriteback(fs, dir, "mapped", "mmap");
  ASSERT_TRUE(r.report.is_object());
  ExpectEveryRequestAccountedFor(r.report);
  FileRequests f = WritesOf(r.report, fs.path("mapped"));
  EXPECT_GE(f.bytes, kBytes);
  EXPECT_EQ(f.causes["syscall"], f.requests);
  EXPECT_EQ(f.calls, std::set<std::string>{"msync"});
}

TEST(BlockWriteback, WriteBackByAnotherProcessIsAttributedToTheFileAndItsWrites) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  std::string file = fs.path("dirtied");
  // The traced program dirties 2 MiB and waits; this (untraced) test process then syncs the
  // file system, so the write-back is queued outside the traced process: by this thread or by
  // the flusher kworkers. It is followed because the traced program dirtied the file.
  LayersRun r;
  std::thread recorder([&] {
    r = RecordLayers(dir, "blk_writeback", {file, "wait", std::to_string(kBytes)});
  });
  struct stat st;
  for (int i = 0; i < 6000 && stat((file + ".written").c_str(), &st) != 0; i++) usleep(10000);
  int mfd = open(file.c_str(), O_RDONLY);
  EXPECT_GE(mfd, 0);
  EXPECT_EQ(syncfs(mfd), 0);
  close(mfd);
  close(open((file + ".synced").c_str(), O_CREAT | O_WRONLY, 0644));
  recorder.join();
  ASSERT_EQ(r.record.exit_code, 0) << r.record.err;
  ASSERT_TRUE(r.report.is_object()) << r.layers.err;
  ExpectEveryRequestAccountedFor(r.report);
  FileRequests f = WritesOf(r.report, file);
  EXPECT_GE(f.bytes, kBytes);
  EXPECT_EQ(f.causes["writeback"], f.requests) << r.report["requests"].dump();
  bool listed = false;
  for (const auto& w : r.report["writeback"]) {
    if (w["file"] == file) {
      listed = true;
      // every page was dirtied by one of the 32 pwrite64 calls of 64 KiB: all are found
      EXPECT_EQ(w["dirtying_calls"].get<uint64_t>(), kBytes / (64 << 10));
      EXPECT_EQ(w["requests_with_unknown_dirtier"].get<uint64_t>(), 0u);
    }
  }
  EXPECT_TRUE(listed) << r.report["writeback"].dump();
}

TEST(BlockWriteback, UnrelatedProcessesIOIsNotRecorded) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  std::string other = fs.path("other");
  ASSERT_EQ(iotwin::test::Run({TestProg("blk_direct"), dir / "prep.log", other, "prepare",
                 std::to_string(4 << 20)})
                .exit_code,
            0);
  // An untraced process reads its own file with O_DIRECT during the whole capture.
  pid_t noise = fork();
  ASSERT_GE(noise, 0);
  if (noise == 0) {
    std::string prog = TestProg("blk_direct"), log = dir / "noise.log";
    execl(prog.c_str(), prog.c_str(), log.c_str(), other.c_str(), "reads", "2000", "4096",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  LayersRun r = RecordWriteback(fs, dir, "mine", "fsync");
  kill(noise, SIGKILL);
  waitpid(noise, nullptr, 0);
  ASSERT_TRUE(r.report.is_object());
  ExpectEveryRequestAccountedFor(r.report);
  uint64_t reads_of_other = 0;
  for (const auto& q : r.report["requests"]) {
    if (q.value("tid", 0u) == static_cast<uint32_t>(noise)) reads_of_other++;
  }
  EXPECT_EQ(reads_of_other, 0u);
  EXPECT_GE(WritesOf(r.report, fs.path("mine")).bytes, kBytes);
}

}  // namespace
}  // namespace iotwin::test
