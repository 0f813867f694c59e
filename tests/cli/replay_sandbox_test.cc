// iotwin replay into a sandbox, on synthetic traces: the file set, the replayed effects, zero
// result mismatches, skipped unknown descriptors, and the refusals (non-empty root, escapes,
// bad traces). No BPF needed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "replay_util.h"

namespace iotwin::test {
namespace {

// A small training-like workload: two threads of one process read a pre-existing dataset and a
// config, a forked child writes a checkpoint through a temp file and renames it; vectored I/O,
// dup, lseek, fsync, mkdir, unlink; one read on stdin (never opened in the trace).
TraceBuilder MixedWorkload() {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Cwd(100, "/work");
  b.Openat(100, "data/train.bin", O_RDONLY, 3, 1 << 20);
  b.PathOp(100, IOT_OP_STAT, "/work/cfg.json", 0).fsize = 300;
  b.Openat(100, "cfg.json", O_RDONLY | O_CLOEXEC, 4, 300);
  b.Read(100, 4, 4096, 300);
  b.Read(100, 4, 4096, 0);
  b.Close(100, 4);
  b.Read(100, 0, 100, 17);  // stdin: unknown descriptor
  b.NewThread(100, 101);
  for (int i = 0; i < 8; i++) {
    b.Pread(100, 3, i * 65536, 65536, 65536, 1 << 20);
    b.Pread(101, 3, (1 << 19) + i * 4096, 4096, 4096, 1 << 20);
  }
  b.Dup(101, 3, 5);
  b.Lseek(101, 5, 4096, SEEK_SET, 4096);
  b.Vectored(101, IOT_OP_READV, 5, 0, {1000, 3096, 512}, 4608);
  b.Close(101, 5);
  b.PathOp(100, IOT_OP_MKDIR, "/work/ckpt", 0).mode = 0755;
  b.Fork(100, 200);
  b.Openat(200, "/work/ckpt/step1.tmp", O_WRONLY | O_CREAT | O_EXCL, 4);
  b.Vectored(200, IOT_OP_PWRITEV2, 4, 0, {4096, 8192}, 12288, 0);
  b.Pwrite(200, 4, 12288, 4096, 4096);
  b.FdOp(200, IOT_OP_FSYNC, 4);
  b.Close(200, 4);
  b.Path2Op(200, IOT_OP_RENAME, "/work/ckpt/step1.tmp", "/work/ckpt/step1");
  b.Openat(200, "/work/old.log", O_WRONLY | O_APPEND, 5, 1000);
  b.Write(200, 5, 24, 24).fsize = 1024;
  b.Close(200, 5);
  b.PathOp(200, IOT_OP_UNLINK, "/work/stale.lock", 0);
  b.Exit(200, true);
  b.Close(100, 3);
  return b;
}

TEST(ReplaySandbox, MixedWorkloadReplaysWithoutMismatches) {
  TempDir tmp;
  std::string trace = WriteTrace(MixedWorkload(), tmp / "t.iotwin");
  std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  // The stdin read is the only skipped op.
  EXPECT_EQ(J(r.summary, "/skipped/total"), 1u) << r.summary["skipped"].dump();
  EXPECT_EQ(J(r.summary, "/skipped/by_reason/unknown_fd/read"), 1u);
  EXPECT_EQ(J(r.summary, "/per_op/pread64/count"), 16u);
  EXPECT_EQ(J(r.summary, "/per_op/pread64/bytes"), 8u * 65536 + 8u * 4096);
  EXPECT_EQ(J(r.summary, "/per_op/readv/bytes"), 4608u);
  EXPECT_EQ(J(r.summary, "/per_op/pwritev2/bytes"), 12288u);
  // Pre-existing files, with their recorded sizes; the stat-only file too.
  EXPECT_EQ(FileSize(root + "/work/data/train.bin"), 1 << 20);
  EXPECT_EQ(FileSize(root + "/work/cfg.json"), 300);
  EXPECT_TRUE(Exists(root + "/work/stale.lock") == false);  // replay unlinked it
  // What the workload did.
  EXPECT_EQ(FileSize(root + "/work/ckpt/step1"), 16384);
  EXPECT_FALSE(Exists(root + "/work/ckpt/step1.tmp"));
  EXPECT_EQ(FileSize(root + "/work/old.log"), 1024);
  // The manifest lies beside the root, out of the trace's reach.
  EXPECT_TRUE(Exists(tmp / ".root.iotwin-manifest.json"));
  EXPECT_FALSE(Exists(root + "/.iotwin-manifest.json"));
}

TEST(ReplaySandbox, SecondReplayReusesThePreparedSet) {
  TempDir tmp;
  std::string trace = WriteTrace(MixedWorkload(), tmp / "t.iotwin");
  std::string root = tmp / "root";
  auto prep = RunReplayCmd({trace, "--root", root, "--prepare-only", "--json"});
  ASSERT_EQ(prep.run.exit_code, 0) << prep.run.err;
  EXPECT_EQ(J(prep.summary, "/prepare/files_written"), 4u);  // train, cfg, old.log, stale.lock
  EXPECT_FALSE(Exists(root + "/work/ckpt"));  // created by the workload, not prepared
  for (int i = 0; i < 2; i++) {
    auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
    EXPECT_TRUE(r.summary["prepare"]["manifest_found"].get<bool>());
    if (i == 1) {
      // The previous replay's checkpoint was cleared (mkdir would fail with EEXIST otherwise),
      // old.log restored to its recorded size, stale.lock recreated.
      EXPECT_GE(J(r.summary, "/prepare/names_cleared"), 2u);
      EXPECT_GE(J(r.summary, "/prepare/files_reused"), 2u);
    }
  }
}

TEST(ReplaySandbox, NonEmptyRootIsRefused) {
  TempDir tmp;
  std::string trace = WriteTrace(MixedWorkload(), tmp / "t.iotwin");
  std::string root = tmp / "root";
  mkdir(root.c_str(), 0755);
  std::ofstream(root + "/precious.txt") << "user data\n";
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "-q"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_NE(r.run.err.find("not empty"), std::string::npos) << r.run.err;
  EXPECT_FALSE(Exists(root + "/work"));
  // --force replays next to it and leaves it alone.
  auto f = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--force", "-q", "--json"});
  EXPECT_EQ(f.run.exit_code, 0) << f.run.err;
  EXPECT_TRUE(Exists(root + "/precious.txt"));
}

TEST(ReplaySandbox, ManifestOfAnotherTraceIsRefused) {
  TempDir tmp;
  std::string t1 = WriteTrace(MixedWorkload(), tmp / "a.iotwin");
  TraceBuilder other;
  other.Openat(100, "/x/y", O_RDONLY, 3, 4096);
  std::string t2 = WriteTrace(other, tmp / "b.iotwin");
  std::string root = tmp / "root";
  ASSERT_EQ(RunReplayCmd({t1, "--root", root, "--prepare-only"}).run.exit_code, 0);
  auto r = RunReplayCmd({t2, "--root", root, "--pace", "fast", "-q"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_NE(r.run.err.find("another trace"), std::string::npos) << r.run.err;
}

TEST(ReplaySandbox, EscapeAttemptsStayInside) {
  TempDir tmp;
  std::string root = tmp / "root";
  std::string outside = tmp / "outside";
  mkdir(outside.c_str(), 0755);
  TraceBuilder b;
  b.Cwd(100, "/");
  // ".." beyond the root, relative climbing, and a symlink to an absolute outside path.
  std::string rel_out = "../../../../.." + outside + "/pwned1";
  b.Openat(100, rel_out, O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 10, 10);
  b.Close(100, 3);
  b.Path2Op(100, IOT_OP_SYMLINK, outside, "/link");  // target outside, link inside
  b.Openat(100, "/link/pwned2", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 10, 10);
  b.Close(100, 3);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_FALSE(Exists(outside + "/pwned1"));
  EXPECT_FALSE(Exists(outside + "/pwned2"));
  // Both landed under the root: the first at its normalised path, the second through the
  // rewritten symlink at the re-rooted target.
  EXPECT_TRUE(Exists(root + outside + "/pwned1"));
  EXPECT_TRUE(Exists(root + outside + "/pwned2"));
  // The link is relative, from its own directory to the re-rooted target.
  char target[4096] = {};
  ASSERT_GT(readlink((root + "/link").c_str(), target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target), outside.substr(1));
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
}

TEST(ReplaySandbox, SymlinkOutOfAMappedTargetIsRefused) {
  TempDir tmp;
  std::string target = tmp / "mapped";
  std::string outside = tmp / "outside";
  mkdir(target.c_str(), 0755);
  mkdir(outside.c_str(), 0755);
  ASSERT_EQ(symlink(outside.c_str(), (target + "/sub").c_str()), 0);
  TraceBuilder b;
  b.Openat(100, "/data/sub/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Write(100, 3, 10, 10);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  // --force: the user lets the replay into a target holding their files; still nothing of the
  // trace may go through their symlink.
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--map", "/data=" + target, "--pace",
                         "fast", "--force", "-q"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_NE(r.run.err.find("symlink"), std::string::npos) << r.run.err;
  EXPECT_FALSE(Exists(outside + "/f"));
}

TEST(ReplaySandbox, MapSendsATreeElsewhere) {
  TempDir tmp;
  std::string nvme = tmp / "nvme";
  mkdir(nvme.c_str(), 0755);
  TraceBuilder b;
  b.Openat(100, "/mnt/datasets/a.bin", O_RDONLY, 3, 8192);
  b.Pread(100, 3, 0, 8192, 8192);
  b.Openat(100, "/home/u/log", O_WRONLY | O_CREAT | O_EXCL, 4);
  b.Write(100, 4, 100, 100);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--map", "/mnt/datasets=" + nvme, "--pace",
                         "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(FileSize(nvme + "/a.bin"), 8192);
  EXPECT_EQ(FileSize(tmp / "root/home/u/log"), 100);
  EXPECT_FALSE(Exists(tmp / "root/mnt/datasets/a.bin"));
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u);
}

TEST(ReplaySandbox, DryRunWritesNothing) {
  TempDir tmp;
  std::string trace = WriteTrace(MixedWorkload(), tmp / "t.iotwin");
  std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--dry-run", "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_FALSE(Exists(root));
  EXPECT_EQ(J(r.summary, "/threads"), 3u);
  EXPECT_EQ(J(r.summary, "/files/preexisting_files"), 4u);
  EXPECT_EQ(J(r.summary, "/ops/skipped"), 1u);
  EXPECT_EQ(J(r.summary, "/ops/by_kind/pread64"), 16u);
  EXPECT_GT(r.summary["estimated_duration_s"].get<double>(), 0.0);
  auto text = RunReplayCmd({trace, "--root", root, "--dry-run"});
  EXPECT_NE(text.run.out.find("estimated time"), std::string::npos) << text.run.out;
}

TEST(ReplaySandbox, ResultMismatchesAreCountedAndStrictStops) {
  TempDir tmp;
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDONLY, 3, 4096);
  b.Pread(100, 3, 0, 4096, 4096);
  // The trace says this open failed, but the file exists in the sandbox: success vs error.
  b.Openat(100, "/d/f", O_RDONLY, -EACCES);
  b.Pread(100, 3, 0, 4096, 4096);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "r1", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 1u);
  EXPECT_EQ(J(r.summary, "/mismatches/by_kind/success_vs_error/openat"), 1u);
  ASSERT_EQ(r.summary["mismatches"]["examples"]["success_vs_error"].size(), 1u);
  EXPECT_EQ(r.summary["mismatches"]["examples"]["success_vs_error"][0]["path"], "/d/f");
  auto s = RunReplayCmd({trace, "--root", tmp / "r2", "--pace", "fast", "--json", "-q", "--strict"});
  EXPECT_EQ(s.run.exit_code, 1);
  EXPECT_TRUE(s.summary.contains("aborted")) << s.run.out;
}

TEST(ReplaySandbox, BadTracesFailClearly) {
  TempDir tmp;
  // Not a trace at all.
  std::ofstream(tmp / "junk.iotwin") << "this is not a trace";
  auto r = RunReplayCmd({tmp / "junk.iotwin", "--root", tmp / "r", "-q"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_FALSE(r.run.err.empty());
  EXPECT_FALSE(Exists(tmp / ".r.iotwin-manifest.json"));
  // Truncated: cut a real trace in the middle.
  TraceBuilder b = MixedWorkload();
  std::string full = WriteTrace(b, tmp / "full.iotwin");
  int64_t size = FileSize(full);
  ASSERT_GT(size, 100);
  ASSERT_EQ(truncate(full.c_str(), size - 20), 0);
  auto t = RunReplayCmd({full, "--root", tmp / "r2", "--pace", "fast", "-q", "--strict"});
  EXPECT_EQ(t.run.exit_code, 2) << t.run.err;
  EXPECT_NE(t.run.err.find("truncat"), std::string::npos) << t.run.err;
  // Lost events: a warning, refused with --strict.
  TraceBuilder lossy = MixedWorkload();
  lossy.Lost(IOT_SRC_SYSCALL, 12);
  std::string lt = WriteTrace(lossy, tmp / "lossy.iotwin");
  auto w = RunReplayCmd({lt, "--root", tmp / "r3", "--pace", "fast", "-q"});
  EXPECT_EQ(w.run.exit_code, 0) << w.run.err;
  EXPECT_NE(w.run.err.find("lost 12 events"), std::string::npos) << w.run.err;
  auto st = RunReplayCmd({lt, "--root", tmp / "r4", "--pace", "fast", "-q", "--strict"});
  EXPECT_EQ(st.run.exit_code, 2);
  EXPECT_FALSE(Exists(tmp / "r4/work"));
  // No syscall layer.
  TraceBuilder nolayer;
  nolayer.meta()["layers"] = {{"syscall", {{"enabled", false}}}};
  std::string nl = WriteTrace(nolayer, tmp / "nolayer.iotwin");
  auto n = RunReplayCmd({nl, "--root", tmp / "r5", "-q"});
  EXPECT_EQ(n.run.exit_code, 2);
  EXPECT_NE(n.run.err.find("no system-call layer"), std::string::npos) << n.run.err;
}

TEST(ReplaySandbox, InsufficientSpaceIsCheckedBeforeWriting) {
  TempDir tmp;
  TraceBuilder b;
  // A file far larger than any test machine's free space.
  b.Openat(100, "/huge.bin", O_RDONLY, 3, 1ull << 52);
  b.Openat(100, "/small.bin", O_RDONLY, 4, 4096);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "r", "--prepare-only"});
  EXPECT_EQ(r.run.exit_code, 2);
  EXPECT_NE(r.run.err.find("insufficient space"), std::string::npos) << r.run.err;
  EXPECT_FALSE(Exists(tmp / "r/small.bin"));
}

TEST(ReplaySandbox, AmplifyRunsIndependentCopies) {
  TempDir tmp;
  std::string trace = WriteTrace(MixedWorkload(), tmp / "t.iotwin");
  std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--amplify", "3", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/pread64/count"), 48u);
  for (int k = 0; k < 3; k++) {
    EXPECT_EQ(FileSize(root + "/copy-" + std::to_string(k) + "/work/ckpt/step1"), 16384) << k;
  }
}

}  // namespace
}  // namespace iotwin::test
