#include <gtest/gtest.h>

#include "model/path.h"

namespace iotwin::model {
namespace {

TEST(ModelPath, NormalizeCollapsesDotsAndSlashes) {
  EXPECT_EQ(NormalizePath("/a//b/./c/"), "/a/b/c");
  EXPECT_EQ(NormalizePath("/a/b/../c"), "/a/c");
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("//"), "/");
  EXPECT_EQ(NormalizePath("/."), "/");
  EXPECT_EQ(NormalizePath("/a/."), "/a");
  EXPECT_EQ(NormalizePath("/a/b/c/../../d"), "/a/d");
}

TEST(ModelPath, DotDotNeverClimbsAboveRoot) {
  EXPECT_EQ(NormalizePath("/.."), "/");
  EXPECT_EQ(NormalizePath("/../../etc/passwd"), "/etc/passwd");
  EXPECT_EQ(NormalizePath("/a/../../../b"), "/b");
  // Relative inputs are taken from "/" and cannot climb either.
  EXPECT_EQ(NormalizePath("../../x"), "/x");
}

TEST(ModelPath, ResolveRelativeAgainstBase) {
  EXPECT_EQ(ResolvePath("/home/u", "data/x.bin"), "/home/u/data/x.bin");
  EXPECT_EQ(ResolvePath("/home/u", "../v/./y"), "/home/v/y");
  EXPECT_EQ(ResolvePath("/home/u", "/abs//p"), "/abs/p");
  EXPECT_EQ(ResolvePath("/home/u", ""), "/home/u");
  EXPECT_EQ(ResolvePath("/", "../../.."), "/");
}

TEST(ModelPath, ParentAndBase) {
  EXPECT_EQ(ParentPath("/a/b/c"), "/a/b");
  EXPECT_EQ(ParentPath("/a"), "/");
  EXPECT_EQ(ParentPath("/"), "/");
  EXPECT_EQ(BaseName("/a/b/c"), "c");
  EXPECT_EQ(BaseName("/"), "");
}

TEST(ModelPath, WithinIsComponentWise) {
  EXPECT_TRUE(PathIsWithin("/a/b", "/a"));
  EXPECT_TRUE(PathIsWithin("/a", "/a"));
  EXPECT_FALSE(PathIsWithin("/ab", "/a"));
  EXPECT_TRUE(PathIsWithin("/x", "/"));
  EXPECT_FALSE(PathIsWithin("/a", "/a/b"));
}

TEST(ModelPath, ReplacePrefix) {
  EXPECT_EQ(ReplacePrefix("/data/x/y", "/data", "/mnt/nvme"), "/mnt/nvme/x/y");
  EXPECT_EQ(ReplacePrefix("/data", "/data", "/mnt/nvme"), "/mnt/nvme");
  EXPECT_EQ(ReplacePrefix("/etc/p", "/", "/tmp/root"), "/tmp/root/etc/p");
  EXPECT_EQ(ReplacePrefix("/", "/", "/tmp/root"), "/tmp/root");
  EXPECT_EQ(ReplacePrefix("/a/b", "/a", "/r/"), "/r/b");
}

TEST(ModelPath, PseudoFileSystems) {
  EXPECT_TRUE(IsPseudoFsPath("/proc/self/maps"));
  EXPECT_TRUE(IsPseudoFsPath("/sys/block/vda/queue/nr_requests"));
  EXPECT_TRUE(IsPseudoFsPath("/dev/null"));
  EXPECT_FALSE(IsPseudoFsPath("/dev/shm/x"));
  EXPECT_FALSE(IsPseudoFsPath("/processed/data"));
  EXPECT_FALSE(IsPseudoFsPath("/data/x"));
}

}  // namespace
}  // namespace iotwin::model

namespace iotwin::model {
namespace {

TEST(ModelPath, RelativePathClimbsOnlyWhatItMust) {
  EXPECT_EQ(RelativePath("/a/b", "/a/c/d"), "../c/d");
  EXPECT_EQ(RelativePath("/a/b", "/a/b/c"), "c");
  EXPECT_EQ(RelativePath("/a/b", "/a/b"), ".");
  EXPECT_EQ(RelativePath("/a/b", "/a"), "..");
  EXPECT_EQ(RelativePath("/", "/tmp/x"), "tmp/x");
  EXPECT_EQ(RelativePath("/", "/"), ".");
  EXPECT_EQ(RelativePath("/a", "/"), "..");
  EXPECT_EQ(RelativePath("/ab", "/a/x"), "../a/x");  // component-wise, not by characters
  EXPECT_EQ(RelativePath("/x/y/z", "/q"), "../../../q");
}

}  // namespace
}  // namespace iotwin::model
