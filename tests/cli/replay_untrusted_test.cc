// iotwin replay of hostile traces: no file outside the sandbox is created, written or removed,
// whatever names and symlinks the trace holds or anyone plants between two replays. Synthetic
// traces; no BPF needed (root for the replay's own files under /tmp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "replay_util.h"

namespace iotwin::test {
namespace {

std::string ReadAll(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The trace of the defect: symlink targets whose ".." hides behind a NUL byte.
//   mkdir("/x"); symlink("/x/..\0", "/x/a"); symlink("/x/a/..\0", "/x/b");
//   openat("/x/b/canary", O_WRONLY|O_CREAT|O_TRUNC); write(100)
// With the NUL cut by the kernel, /x/a -> ROOT and /x/b -> ROOT/.., so the canary lands beside
// the root. `chain` more links climb one level each.
TraceBuilder NulSymlinkTrace(int chain) {
  TraceBuilder b;
  b.Cwd(100, "/");
  b.PathOp(100, IOT_OP_MKDIR, "/x", 0).mode = 0755;
  b.Path2Op(100, IOT_OP_SYMLINK, std::string("/x/..\0", 6), "/x/a");
  std::string prev = "/x/a";
  for (int i = 0; i < chain; i++) {
    std::string next = "/x/l" + std::to_string(i);
    b.Path2Op(100, IOT_OP_SYMLINK, prev + std::string("/..\0", 4), next);
    prev = next;
  }
  b.Openat(100, prev + "/canary", O_WRONLY | O_CREAT | O_TRUNC, 3);
  b.Write(100, 3, 100, 100);
  b.Close(100, 3);
  return b;
}

TEST(ReplayUntrusted, NulInSymlinkTargetCannotEscape) {
  TempDir tmp;
  std::string parent = tmp / "p";
  std::string root = parent + "/sb";
  mkdir(parent.c_str(), 0755);
  std::ofstream(parent + "/keep") << "outside\n";
  std::ofstream(tmp / "keep") << "outside\n";
  for (int chain : {1, 5}) {
    std::string trace = WriteTrace(NulSymlinkTrace(chain), tmp / "t.iotwin");
    std::filesystem::remove_all(root);
    auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
    ASSERT_NE(r.run.exit_code, 2) << r.run.err;
    EXPECT_FALSE(Exists(parent + "/canary")) << "chain " << chain;
    EXPECT_FALSE(Exists(tmp / "canary")) << "chain " << chain;
    EXPECT_FALSE(Exists("/canary"));
    // The names with a NUL are not replayed, and said so.
    EXPECT_GE(J(r.summary, "/skipped/total"), 1u) << r.summary.dump(1);
    // A second replay clears what the first created, inside the root only.
    auto again = RunReplayCmd({trace, "--root", root, "--pace", "fast", "-q"});
    EXPECT_NE(again.run.exit_code, 2) << again.run.err;
    EXPECT_EQ(ReadAll(parent + "/keep"), "outside\n");
    EXPECT_EQ(ReadAll(tmp / "keep"), "outside\n");
    EXPECT_TRUE(Exists(parent));
  }
}

TEST(ReplayUntrusted, ClearingDoesNotFollowASymlinkPlantedBetweenReplays) {
  TempDir tmp;
  std::string root = tmp / "root", outside = tmp / "outside";
  TraceBuilder b;
  b.PathOp(100, IOT_OP_MKDIR, "/data", 0).mode = 0755;
  b.Openat(100, "/data/new.txt", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 10, 10);
  b.Close(100, 3);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto first = RunReplayCmd({trace, "--root", root, "--pace", "fast", "-q"});
  ASSERT_EQ(first.run.exit_code, 0) << first.run.err;
  ASSERT_TRUE(Exists(root + "/data/new.txt"));
  // Someone replaces the sandbox's directory by a symlink to a directory of theirs.
  mkdir(outside.c_str(), 0755);
  std::ofstream(outside + "/new.txt") << "precious\n";
  std::filesystem::remove_all(root + "/data");
  ASSERT_EQ(symlink(outside.c_str(), (root + "/data").c_str()), 0);
  auto second = RunReplayCmd({trace, "--root", root, "--pace", "fast", "-q"});
  EXPECT_EQ(second.run.exit_code, 0) << second.run.err;
  EXPECT_EQ(ReadAll(outside + "/new.txt"), "precious\n");
  // The planted link, a name the first replay created, was removed itself (never followed), and
  // the replay made its directory again.
  struct stat st;
  ASSERT_EQ(lstat((root + "/data").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(FileSize(root + "/data/new.txt"), 10);
}

TEST(ReplayUntrusted, MapTargetHoldingUserFilesIsRefused) {
  TempDir tmp;
  std::string target = tmp / "mapped";
  mkdir(target.c_str(), 0755);
  std::ofstream(target + "/a.bin") << "user file\n";
  TraceBuilder b;
  b.Openat(100, "/data/a.bin", O_RDWR, 3, 8192);
  b.Pwrite(100, 3, 0, 4096, 4096);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--map", "/data=" + target, "--pace",
                         "fast", "-q"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_NE(r.run.err.find("--map target"), std::string::npos) << r.run.err;
  EXPECT_EQ(ReadAll(target + "/a.bin"), "user file\n");
  // An empty target works, and a second replay into what iotwin prepared there works too.
  std::string fresh = tmp / "fresh";
  for (int i = 0; i < 2; i++) {
    auto ok = RunReplayCmd({trace, "--root", tmp / "root2", "--map", "/data=" + fresh, "--pace",
                            "fast", "-q"});
    EXPECT_EQ(ok.run.exit_code, 0) << ok.run.err;
    EXPECT_EQ(FileSize(fresh + "/a.bin"), 8192);
  }
  // The user says otherwise explicitly.
  auto forced = RunReplayCmd({trace, "--root", tmp / "root3", "--map", "/data=" + target,
                              "--pace", "fast", "--force", "-q"});
  EXPECT_EQ(forced.run.exit_code, 0) << forced.run.err;
}

TEST(ReplayUntrusted, WorkloadSymlinksStillWorkInsideTheSandbox) {
  TempDir tmp;
  std::string root = tmp / "root";
  TraceBuilder b;
  b.PathOp(100, IOT_OP_MKDIR, "/d", 0).mode = 0755;
  b.PathOp(100, IOT_OP_MKDIR, "/d/real", 0).mode = 0755;
  b.Path2Op(100, IOT_OP_SYMLINK, "/d/real", "/d/abs");
  b.Path2Op(100, IOT_OP_SYMLINK, "real", "/d/rel");
  b.Openat(100, "/d/abs/f1", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 10, 10);
  b.Close(100, 3);
  b.Openat(100, "/d/rel/f2", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 20, 20);
  b.Close(100, 3);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(1);
  EXPECT_EQ(FileSize(root + "/d/real/f1"), 10);
  EXPECT_EQ(FileSize(root + "/d/real/f2"), 20);
  char text[256] = {};
  ASSERT_GT(readlink((root + "/d/abs").c_str(), text, sizeof text - 1), 0);
  EXPECT_EQ(std::string(text), "real");
}

TEST(ReplayUntrusted, NonUtf8NamesReplayAndReport) {
  TempDir tmp;
  std::string root = tmp / "root";
  const std::string name = "/data/\xff\xfe-\xc3(.bin";
  TraceBuilder b;
  b.Openat(100, name, O_RDWR, 3, 4096);
  b.Pread(100, 3, 0, 4096, 4096);
  b.Openat(100, "/data/new-\x80", O_WRONLY | O_CREAT | O_EXCL, 4);
  b.Write(100, 4, 10, 10);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  for (int i = 0; i < 2; i++) {
    auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.run.out;
    EXPECT_EQ(FileSize(root + name), 4096);
    EXPECT_FALSE(Exists(root + "/.iotwin-manifest.json"));
  }
}

TEST(ReplayUntrusted, WorkersThatCannotBeConfinedStillStayInside) {
  // Nested --map prefixes: workers cannot get a root of their own (Sandbox::ConfineThread), so
  // their path calls go through openat2 beneath the bases; the NUL-byte chain still stays inside
  // and the replay says why it was not confined.
  TempDir tmp;
  std::string parent = tmp / "p";
  mkdir(parent.c_str(), 0755);
  std::string trace = WriteTrace(NulSymlinkTrace(5), tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", parent + "/sb", "--map", "/m=" + (tmp / "m"), "--map",
                         "/m/n=" + (tmp / "n"), "--pace", "fast", "--json", "-q"});
  ASSERT_NE(r.run.exit_code, 2) << r.run.err;
  EXPECT_FALSE(Exists(parent + "/canary"));
  EXPECT_FALSE(Exists(tmp / "canary"));
  EXPECT_FALSE(Exists("/canary"));
  EXPECT_NE(r.summary["warnings"].dump().find("could not be confined"), std::string::npos)
      << r.summary["warnings"].dump();
}

TEST(ReplayUntrusted, MemoryOpsStayInsideTheReplaysOwnMapping) {
  // A 1 GiB munmap, a madvise and page touches past a 64 KiB mapping: before the bound, the
  // munmap tore down the replayer's own memory (SIGSEGV, or the loader's assertion).
  TempDir tmp;
  std::string root = tmp / "root";
  const uint64_t addr = 0x7f0000000000;
  TraceBuilder b;
  b.Openat(100, "/data/w.bin", O_RDONLY, 3, 65536);
  b.Mmap(100, 3, 0, 65536, PROT_READ, MAP_SHARED, addr);
  b.Fault(100, addr + 4096, false);
  b.Fault(100, addr + (uint64_t{1} << 30), false);  // far past the mapping
  b.MemOp(100, IOT_OP_MUNMAP, addr + 8192, 4096);  // inside: replayed
  b.MemOp(100, IOT_OP_MADVISE, addr, uint64_t{1} << 30, MADV_DONTNEED);
  b.MemOp(100, IOT_OP_MUNMAP, addr, uint64_t{1} << 30);
  b.Close(100, 3);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/skipped/by_reason/outside_mapping/munmap"), 1u) << r.run.out;
  EXPECT_EQ(J(r.summary, "/skipped/by_reason/outside_mapping/madvise"), 1u) << r.run.out;
  EXPECT_EQ(J(r.summary, "/per_op/munmap/count"), 1u) << r.run.out;  // the one inside
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.run.out;
}

TEST(ReplayUntrusted, TwoGibWriteIsReplayedInOneCall) {
  // One recorded write of 2 GiB (the kernel moves at most 0x7ffff000 bytes a call) is replayed
  // as one call from a buffer whose pages repeat; AlignedBufferTest.AliasedBufferUsesOnlyItsShare
  // measures the memory.
  TempDir tmp;
  const uint64_t kLen = uint64_t{2} << 30, kMoved = 0x7ffff000;
  TraceBuilder b;
  b.Openat(100, "/big.bin", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, kLen, static_cast<int64_t>(kMoved));
  b.Close(100, 3);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"}, 300);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.run.out;
  EXPECT_EQ(J(r.summary, "/per_op/write/count"), 1u) << r.run.out;
  EXPECT_EQ(FileSize(tmp / "root/big.bin"), static_cast<int64_t>(kMoved));
}

TEST(ReplayUntrusted, HugeDescriptorNumberCostsOneEntry) {
  TempDir tmp;
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDWR, 3, 4096);
  b.Dup2(100, 3, 2147483000, 2147483000);
  b.Read(100, 2147483000, 100, 100);
  b.Close(100, 2147483000);
  b.Exit(100, true);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  // An address-space cap far below what a table indexed by descriptor number would take.
  RunResult r = test::Run({"/bin/sh", "-c",
                     "ulimit -v 1000000; exec " + IotwinBin() + " replay " + trace + " --root " +
                         (tmp / "root") + " --pace fast --json -q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(J(summary, "/mismatches/total"), 0u) << r.out;
  EXPECT_EQ(J(summary, "/per_op/read/bytes"), 100u) << r.out;
}

}  // namespace
}  // namespace iotwin::test
