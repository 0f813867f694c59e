// Sandbox: every path resolved beneath its base by the kernel (openat2 RESOLVE_BENEATH), whatever
// symlinks exist there; relative symlink targets; names the kernel cannot carry refused.
#include "replay/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

namespace iotwin::replay {
namespace {

class SandboxResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-sandbox-XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    top_ = tmpl;
    root_ = top_ + "/root";
    outside_ = top_ + "/outside";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(outside_.c_str(), 0755), 0);
    std::ofstream(outside_ + "/victim") << "outside data\n";
    auto m = PathMapper::Create(root_, {});
    ASSERT_TRUE(m.ok());
    auto sb = Sandbox::Open(*m);
    ASSERT_TRUE(sb.ok()) << sb.status().ToString();
    sb_ = *sb;
  }
  void TearDown() override { std::filesystem::remove_all(top_); }
  static std::string LinkText(const std::string& link) {
    char text[4096];
    ssize_t n = readlink(link.c_str(), text, sizeof text);
    return n < 0 ? "" : std::string(text, static_cast<size_t>(n));
  }
  std::string Victim() const {
    std::ifstream in(outside_ + "/victim");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string top_, root_, outside_;
  std::shared_ptr<const Sandbox> sb_;
};

TEST_F(SandboxResolve, NamesWithNulOrDotDotAreRefused) {
  EXPECT_FALSE(sb_->Contains(root_ + std::string("/x/..\0/y", 8)));
  EXPECT_FALSE(sb_->Contains(root_ + "/x/../y"));
  EXPECT_FALSE(sb_->Contains(top_ + "/elsewhere"));
  EXPECT_TRUE(sb_->Contains(root_ + "/x/y"));
  EXPECT_TRUE(sb_->Contains(root_));
  EXPECT_EQ(sb_->OpenFile(root_ + std::string("/a\0b", 4), O_RDONLY, 0), -EINVAL);
  EXPECT_EQ(sb_->Mkdir(root_ + std::string("/..\0", 4), 0755), -EINVAL);
}

TEST_F(SandboxResolve, PlantedAbsoluteSymlinkIsNotFollowedByAnyCall) {
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/data").c_str()), 0);
  const std::string via = root_ + "/data/victim";
  EXPECT_EQ(sb_->OpenFile(via, O_WRONLY | O_TRUNC, 0), -EXDEV);
  EXPECT_EQ(sb_->Unlink(via, 0), -EXDEV);
  EXPECT_EQ(sb_->Truncate(via, 0), -EXDEV);
  EXPECT_EQ(sb_->Rename(via, root_ + "/stolen", 0), -EXDEV);
  EXPECT_EQ(sb_->Link(via, root_ + "/hard", false), -EXDEV);
  EXPECT_EQ(sb_->Mkdir(root_ + "/data/new", 0755), -EXDEV);
  struct stat st;
  EXPECT_EQ(sb_->Stat(via, true, &st), -EXDEV);
  EXPECT_EQ(Victim(), "outside data\n");
  EXPECT_FALSE(std::filesystem::exists(outside_ + "/new"));
}

TEST_F(SandboxResolve, PlantedRelativeSymlinkClimbingOutIsRefused) {
  ASSERT_EQ(symlink("../outside", (root_ + "/up").c_str()), 0);
  EXPECT_EQ(sb_->OpenFile(root_ + "/up/victim", O_WRONLY | O_TRUNC, 0), -EXDEV);
  // A final symlink is refused too when the call follows it.
  ASSERT_EQ(symlink("../outside/victim", (root_ + "/v").c_str()), 0);
  EXPECT_EQ(sb_->OpenFile(root_ + "/v", O_WRONLY | O_TRUNC, 0), -EXDEV);
  EXPECT_EQ(sb_->Truncate(root_ + "/v", 0), -EXDEV);
  // Removing the link itself is fine: it does not follow it.
  EXPECT_EQ(sb_->Unlink(root_ + "/v", 0), 0);
  EXPECT_EQ(Victim(), "outside data\n");
}

TEST_F(SandboxResolve, SymlinksItCreatesAreRelativeAndResolveInside) {
  ASSERT_EQ(sb_->Mkdir(root_ + "/d", 0755), 0);
  ASSERT_EQ(sb_->Mkdir(root_ + "/d/e", 0755), 0);
  int fd = sb_->OpenFile(root_ + "/d/real", O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(sb_->Symlink(root_ + "/d/real", root_ + "/d/e/link"), 0);
  EXPECT_EQ(LinkText(root_ + "/d/e/link"), "../real");
  ASSERT_EQ(sb_->Symlink(root_, root_ + "/d/top"), 0);  // the base itself
  EXPECT_EQ(LinkText(root_ + "/d/top"), "..");
  // Followed beneath the base by the sandbox, and by anyone walking the tree.
  fd = sb_->OpenFile(root_ + "/d/e/link", O_RDONLY, 0);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  fd = sb_->OpenFile(root_ + "/d/top/d/real", O_RDONLY, 0);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  EXPECT_EQ(std::filesystem::canonical(root_ + "/d/e/link"),
            std::filesystem::canonical(root_ + "/d/real"));
}

TEST_F(SandboxResolve, SymlinkThroughASymlinkedDirectoryUsesTheRealLocation) {
  // d2 -> d/e: a link created at d2/x lives in d/e, two levels down, not one.
  ASSERT_EQ(sb_->Mkdir(root_ + "/d", 0755), 0);
  ASSERT_EQ(sb_->Mkdir(root_ + "/d/e", 0755), 0);
  ASSERT_EQ(sb_->Symlink(root_ + "/d/e", root_ + "/d2"), 0);
  ASSERT_EQ(sb_->Symlink(root_ + "/target", root_ + "/d2/x"), 0);
  EXPECT_EQ(LinkText(root_ + "/d/e/x"), "../../target");
}

TEST_F(SandboxResolve, OrdinaryCallsWork) {
  ASSERT_EQ(sb_->Mkdir(root_ + "/a", 0755), 0);
  EXPECT_EQ(sb_->Mkdir(root_ + "/a", 0755), -EEXIST);
  EXPECT_EQ(sb_->Mkdir(root_, 0755), -EEXIST);
  int fd = sb_->OpenFile(root_ + "/a/f", O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "hello", 5), 5);
  close(fd);
  EXPECT_EQ(sb_->Truncate(root_ + "/a/f", 2), 0);
  struct stat st;
  ASSERT_EQ(sb_->Stat(root_ + "/a/f", true, &st), 0);
  EXPECT_EQ(st.st_size, 2);
  EXPECT_EQ(sb_->Kind(root_ + "/a"), S_IFDIR);
  EXPECT_EQ(sb_->Link(root_ + "/a/f", root_ + "/a/g", false), 0);
  EXPECT_EQ(sb_->Rename(root_ + "/a/g", root_ + "/h", 0), 0);
  EXPECT_EQ(sb_->Unlink(root_ + "/h", 0), 0);
  EXPECT_EQ(sb_->Unlink(root_ + "/a/f", 0), 0);
  EXPECT_EQ(sb_->Unlink(root_ + "/a", AT_REMOVEDIR), 0);
  EXPECT_EQ(sb_->Unlink(root_, AT_REMOVEDIR), -EBUSY);  // never the base itself
  EXPECT_EQ(sb_->Stat(root_ + "/a", false, &st), -ENOENT);
}

}  // namespace
}  // namespace iotwin::replay
