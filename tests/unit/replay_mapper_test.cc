// Sandbox path mapping and symlink checks.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "replay/path_mapper.h"
#include "temp_dir.h"

namespace iotwin::replay {
namespace {

TEST(ReplayMapper, RootAndLongestMapWins) {
  auto m = PathMapper::Create("/sandbox/", {{"/data", "/mnt/nvme0"}, {"/data/hot", "/mnt/nvme1/"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->root(), "/sandbox");
  EXPECT_EQ(m->Map("/etc/x"), "/sandbox/etc/x");
  EXPECT_EQ(m->Map("/"), "/sandbox");
  EXPECT_EQ(m->Map("/data/a"), "/mnt/nvme0/a");
  EXPECT_EQ(m->Map("/data/hot/b"), "/mnt/nvme1/b");
  EXPECT_EQ(m->Map("/data"), "/mnt/nvme0");
  EXPECT_EQ(m->Map("/database"), "/sandbox/database");  // component-wise prefix
  EXPECT_EQ(m->BaseOf("/data/hot/x"), "/mnt/nvme1");
  EXPECT_EQ(m->Bases().size(), 3u);
}

TEST(ReplayMapper, RejectsBadRoots) {
  EXPECT_FALSE(PathMapper::Create("relative", {}).ok());
  EXPECT_FALSE(PathMapper::Create("/", {}).ok());
  EXPECT_FALSE(PathMapper::Create("/a/..", {}).ok());
  EXPECT_FALSE(PathMapper::Create("/r", {{"/x", "/"}}).ok());
  EXPECT_FALSE(PathMapper::Create("/r", {{"x", "/y"}}).ok());
}

TEST(ReplayMapper, SymlinkTargetsAreRerooted) {
  auto m = PathMapper::Create("/sb", {{"/data", "/mnt/d"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->MapSymlinkTarget("/home/u/link", "/etc/passwd"), "/sb/etc/passwd");
  EXPECT_EQ(m->MapSymlinkTarget("/home/u/link", "../../../../etc/shadow"), "/sb/etc/shadow");
  EXPECT_EQ(m->MapSymlinkTarget("/home/u/link", "sub/f"), "/sb/home/u/sub/f");
  EXPECT_EQ(m->MapSymlinkTarget("/home/u/link", "/data/x"), "/mnt/d/x");
}

TEST(ReplayMapper, WithSuffixSeparatesCopies) {
  auto m = PathMapper::Create("/sb", {{"/data", "/mnt/d"}});
  ASSERT_TRUE(m.ok());
  PathMapper c = m->WithSuffix("/copy-2");
  EXPECT_EQ(c.Map("/a"), "/sb/copy-2/a");
  EXPECT_EQ(c.Map("/data/a"), "/mnt/d/copy-2/a");
}

TEST(ReplayMapper, CheckBeneathCatchesEscapingSymlinks) {
  test::TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  const std::string& base = tmp.path();
  std::string sb = base + "/sb", out = base + "/out";
  mkdir(sb.c_str(), 0755);
  mkdir(out.c_str(), 0755);
  mkdir((sb + "/d").c_str(), 0755);
  ASSERT_EQ(symlink(out.c_str(), (sb + "/abs").c_str()), 0);
  ASSERT_EQ(symlink("../out", (sb + "/rel").c_str()), 0);
  ASSERT_EQ(symlink("d", (sb + "/inside").c_str()), 0);
  auto m = PathMapper::Create(sb, {});
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->CheckBeneath(sb + "/d/file").ok());
  EXPECT_TRUE(m->CheckBeneath(sb + "/missing/deeper/file").ok());
  EXPECT_TRUE(m->CheckBeneath(sb + "/inside/file").ok());
  Status a = m->CheckBeneath(sb + "/abs/file");
  EXPECT_FALSE(a.ok());
  EXPECT_NE(a.message().find("symlink"), std::string::npos);
  EXPECT_FALSE(m->CheckBeneath(sb + "/rel/file").ok());
}

}  // namespace
}  // namespace iotwin::replay
