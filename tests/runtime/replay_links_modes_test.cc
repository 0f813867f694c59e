// What a replay leaves in the sandbox for anyone walking it: every symlink it creates resolves
// inside the sandbox (even one made through a symlinked directory, or in a --map target), and
// the files and directories it creates carry no set-id bits and, by default, no group or other
// write, whatever the trace's modes and the invoking umask. Synthetic traces; no BPF needed
// (root: the replay's workers confine themselves with chroot).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "replay_util.h"

namespace iotwin::test {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every symlink under `dir` (not followed), as the host resolves it, lies under one of `bases`.
void ExpectLinksResolveInside(const std::string& dir, const std::vector<std::string>& bases) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_symlink()) continue;
    const fs::path real = fs::weakly_canonical(it->path(), ec);
    ASSERT_FALSE(ec) << it->path();
    bool inside = false;
    for (const auto& b : bases) {
      const std::string base = fs::canonical(b).string();
      const std::string r = real.string();
      inside |= r == base || r.rfind(base + "/", 0) == 0;
    }
    EXPECT_TRUE(inside) << it->path() << " -> " << fs::read_symlink(it->path()) << " resolves to "
                        << real;
  }
  EXPECT_FALSE(ec) << ec.message();
}

// The reproducer: directories /a/b/c/d/e/f/g, symlink("/", .../g/h), then a link to a file
// outside through h: the kernel puts it in the root (h is the root), not seven levels down.
TraceBuilder LinkThroughSymlinkedDirTrace(const std::string& outside_file) {
  TraceBuilder b;
  b.Cwd(100, "/");
  std::string dir;
  for (const char* c : {"a", "b", "c", "d", "e", "f", "g"}) {
    dir += std::string("/") + c;
    b.PathOp(100, IOT_OP_MKDIR, dir, 0).mode = 0755;
  }
  b.Path2Op(100, IOT_OP_SYMLINK, "/", dir + "/h");
  b.Path2Op(100, IOT_OP_SYMLINK, outside_file, dir + "/h/x");
  return b;
}

// A fast replay of `trace` into `root` with --json; workers that cannot be confined when
// `confined` is false (nested --map prefixes under `tmp` keep them out of a chroot).
std::vector<std::string> FastReplayArgs(const std::string& trace, const std::string& root,
                                        const TempDir& tmp, bool confined) {
  std::vector<std::string> args = {trace, "--root", root, "--pace", "fast", "--json", "-q"};
  if (!confined) {
    for (std::string m : {"/m=" + (tmp / "m"), "/m/n=" + (tmp / "n")}) {
      args.push_back("--map");
      args.push_back(m);
    }
  }
  return args;
}

TEST(ReplayLinks, LinkMadeThroughASymlinkedDirectoryStaysInside) {
  TempDir tmp;
  const std::string canary = tmp / "outside/canary";
  fs::create_directories(tmp / "outside");
  std::ofstream(canary) << "host secret\n";
  const std::string trace = WriteTrace(LinkThroughSymlinkedDirTrace(canary), tmp / "t.iotwin");
  // Confined workers (chroot), then workers that cannot be confined (nested --map prefixes).
  for (bool confined : {true, false}) {
    SCOPED_TRACE(confined ? "confined workers" : "unconfined workers");
    const std::string root = tmp / (confined ? "root" : "root2");
    auto r = RunReplayCmd(FastReplayArgs(trace, root, tmp, confined));
    ASSERT_NE(r.run.exit_code, 2) << r.run.err;
    const bool said_unconfined =
        r.summary["warnings"].dump().find("could not be confined") != std::string::npos;
    EXPECT_EQ(said_unconfined, !confined) << r.summary["warnings"].dump();
    // The link exists in the root (where the kernel put it) and does not lead to the host file.
    struct stat st;
    ASSERT_EQ(lstat((root + "/x").c_str(), &st), 0) << r.run.out;
    EXPECT_TRUE(S_ISLNK(st.st_mode));
    EXPECT_NE(ReadAll(root + "/x"), "host secret\n");
    ExpectLinksResolveInside(root, {root});
  }
}

TEST(ReplayLinks, LinksMovedCloserToTheRootStayInside) {
  // Links made ten directories down climb ten levels; the directory is then renamed to the top,
  // one link is renamed to the root and another hard-linked there: their texts would climb
  // above the root to the host file.
  TempDir tmp;
  const std::string canary = tmp / "outside/canary";
  fs::create_directories(tmp / "outside");
  std::ofstream(canary) << "host secret\n";
  TraceBuilder b;
  b.Cwd(100, "/");
  std::string dir;
  for (int i = 0; i < 10; i++) {
    dir += "/d" + std::to_string(i);
    b.PathOp(100, IOT_OP_MKDIR, dir, 0).mode = 0755;
  }
  for (const char* l : {"/l", "/l2", "/l3"}) b.Path2Op(100, IOT_OP_SYMLINK, canary, dir + l);
  b.Path2Op(100, IOT_OP_RENAME, dir, "/top");
  b.Path2Op(100, IOT_OP_RENAME, "/top/l2", "/l2");
  b.Path2Op(100, IOT_OP_LINK, "/top/l3", "/l3");
  const std::string trace = WriteTrace(b, tmp / "t.iotwin");
  for (bool confined : {true, false}) {
    SCOPED_TRACE(confined ? "confined workers" : "unconfined workers");
    const std::string root = tmp / (confined ? "root" : "root2");
    auto r = RunReplayCmd(FastReplayArgs(trace, root, tmp, confined));
    ASSERT_NE(r.run.exit_code, 2) << r.run.err;
    for (const char* l : {"/top/l", "/l2", "/l3"}) {
      struct stat st;
      ASSERT_EQ(lstat((root + l).c_str(), &st), 0) << l << "\n" << r.run.out;
      EXPECT_TRUE(S_ISLNK(st.st_mode)) << l;
      EXPECT_NE(ReadAll(root + l), "host secret\n") << l;
    }
    ExpectLinksResolveInside(root, {root});
  }
}

TEST(ReplayLinks, LinkInAMapTargetToTheRootStaysInsideTheSandbox) {
  // A link in a --map target to a name of the root: no relative text leads from one base to the
  // other for a walker on the host (ROOT and the target are siblings here); a canary sits where
  // a text relative to the recorded directory would lead.
  TempDir tmp;
  const std::string root = tmp / "root", mapped = tmp / "mapped";
  fs::create_directories(tmp / "x");
  std::ofstream(tmp / "x/y") << "host secret\n";
  TraceBuilder b;
  b.Cwd(100, "/");
  b.Path2Op(100, IOT_OP_SYMLINK, "/x/y", "/data/l");
  const std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", root, "--map", "/data=" + mapped, "--pace", "fast",
                         "--json", "-q"});
  ASSERT_NE(r.run.exit_code, 2) << r.run.err;
  struct stat st;
  ASSERT_EQ(lstat((mapped + "/l").c_str(), &st), 0) << r.run.out;
  EXPECT_NE(ReadAll(mapped + "/l"), "host secret\n");
  ExpectLinksResolveInside(mapped, {root, mapped});
}

// The umask of this process while it lives (the replay inherits it).
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t m) : old_(umask(m)) {}
  ~ScopedUmask() { umask(old_); }

 private:
  mode_t old_;
};

mode_t ModeOf(const std::string& p) {
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST(ReplayModes, SetIdBitsNeverAndWorldWriteOnlyWhenAsked) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (files created by root)";
  TempDir tmp;
  TraceBuilder b;
  b.Cwd(100, "/");
  b.Openat(100, "/suid", O_WRONLY | O_CREAT | O_EXCL, 3, 0, -100, 06755);
  b.Close(100, 3);
  b.Openat(100, "/open", O_WRONLY | O_CREAT | O_EXCL, 3, 0, -100, 0777);
  b.Close(100, 3);
  b.PathOp(100, IOT_OP_MKDIR, "/tmpdir", 0).mode = 01777;
  b.PathOp(100, IOT_OP_MKDIR, "/sgid", 0).mode = 02775;
  b.Openat(100, "/plain", O_WRONLY | O_CREAT | O_EXCL, 3, 0, -100, 0640);
  b.Close(100, 3);
  const std::string trace = WriteTrace(b, tmp / "t.iotwin");
  ScopedUmask everything(0);
  struct Case {
    bool confined, keep;
  };
  for (Case c : {Case{true, false}, Case{false, false}, Case{true, true}, Case{false, true}}) {
    SCOPED_TRACE(fmt::format("confined {} keep {}", c.confined, c.keep));
    const std::string root = tmp / fmt::format("root-{}-{}", c.confined, c.keep);
    std::vector<std::string> args = {trace, "--root", root, "--pace", "fast", "--json", "-q"};
    if (!c.confined) {
      for (std::string m : {"/m=" + (tmp / fmt::format("m-{}", c.keep)),
                            "/m/n=" + (tmp / fmt::format("n-{}", c.keep))}) {
        args.push_back("--map");
        args.push_back(m);
      }
    }
    if (c.keep) args.push_back("--keep-modes");
    auto r = RunReplayCmd(args);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(1);
    EXPECT_EQ(ModeOf(root + "/suid"), 0755u);
    EXPECT_EQ(ModeOf(root + "/sgid"), c.keep ? 0775u : 0755u);
    EXPECT_EQ(ModeOf(root + "/open"), c.keep ? 0777u : 0755u);
    EXPECT_EQ(ModeOf(root + "/tmpdir"), c.keep ? 01777u : 01755u);
    EXPECT_EQ(ModeOf(root + "/plain"), 0640u);
    // The summary counts what was changed, with the first as an example.
    EXPECT_EQ(J(r.summary, "/modes/changed"), c.keep ? 2u : 4u) << r.summary["modes"].dump();
    EXPECT_EQ(r.summary["modes"]["example"]["path"], "/suid") << r.summary["modes"].dump();
    EXPECT_EQ(r.summary["modes"]["example"]["recorded"], "6755");
    EXPECT_EQ(r.summary["modes"]["example"]["applied"], "0755");
  }
  // The plan says so before anything is written.
  auto dry = RunReplayCmd({trace, "--root", tmp / "dry", "--dry-run", "--json"});
  ASSERT_EQ(dry.run.exit_code, 0) << dry.run.err;
  EXPECT_EQ(J(dry.summary, "/modes/changed"), 4u) << dry.run.out;
  auto text = RunReplayCmd({trace, "--root", tmp / "dry", "--dry-run"});
  EXPECT_NE(text.run.out.find("modes      4 created with other permissions"), std::string::npos)
      << text.run.out;
}

}  // namespace
}  // namespace iotwin::test
