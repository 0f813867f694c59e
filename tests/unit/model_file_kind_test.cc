// ClassifyFile: what a file is to a report, from its recorded type and path.
#include <gtest/gtest.h>

#include "model/path.h"

namespace iotwin::model {
namespace {

TEST(FileKind, TypesThatAreNeverStorage) {
  EXPECT_EQ(ClassifyFile(1, "", true), FileKind::kPipe);
  EXPECT_EQ(ClassifyFile(12, "", false), FileKind::kSocket);
  EXPECT_EQ(ClassifyFile(2, "/dev/pts/0", true), FileKind::kCharDevice);
  EXPECT_EQ(ClassifyFile(2, "/dev/null", false), FileKind::kCharDevice);
}

TEST(FileKind, PseudoFileSystemsButNotBlockDevices) {
  EXPECT_EQ(ClassifyFile(8, "/proc/self/status", true), FileKind::kPseudoFs);
  EXPECT_EQ(ClassifyFile(8, "/sys/block/vda/queue/nr_requests", true), FileKind::kPseudoFs);
  EXPECT_EQ(ClassifyFile(4, "/proc", true), FileKind::kPseudoFs);
  EXPECT_EQ(ClassifyFile(0, "/proc/meminfo", false), FileKind::kPseudoFs);
  // A block device is storage wherever its node is; /dev/shm holds ordinary files.
  EXPECT_EQ(ClassifyFile(6, "/dev/vda", true), FileKind::kStorage);
  EXPECT_EQ(ClassifyFile(8, "/dev/shm/seg", true), FileKind::kStorage);
  // Paths are compared by component: /procfs is not /proc.
  EXPECT_EQ(ClassifyFile(8, "/procfs/data", true), FileKind::kStorage);
}

TEST(FileKind, UnknownTypeIsAnAnonymousInodeOnlyWhereTypesAreRecorded) {
  EXPECT_EQ(ClassifyFile(0, "", true), FileKind::kAnonInode);
  // Imports leave types they cannot see at 0: such a file stays storage.
  EXPECT_EQ(ClassifyFile(0, "", false), FileKind::kStorage);
  EXPECT_EQ(ClassifyFile(0, "/data/f", false), FileKind::kStorage);
  EXPECT_EQ(ClassifyFile(8, "/data/f", true), FileKind::kStorage);
  EXPECT_EQ(ClassifyFile(4, "/data", true), FileKind::kStorage);
}

TEST(FileKind, AFileKnownByAPathIsNeverAnAnonymousInode) {
  // A mapping held at attach (map snapshots carry no type), a name only unlinked or renamed:
  // types are recorded, this one was not, and the file has a path.
  EXPECT_EQ(ClassifyFile(0, "/data/train.bin", true), FileKind::kStorage);
  EXPECT_EQ(ClassifyFile(0, "/proc/1/maps", true), FileKind::kPseudoFs);
  EXPECT_EQ(ClassifyFile(0, "anon_inode:[eventfd]", true), FileKind::kAnonInode);
}

TEST(FileKind, NamesAndKeys) {
  EXPECT_EQ(FileKindName(FileKind::kCharDevice), "char device");
  EXPECT_EQ(FileKindKey(FileKind::kCharDevice), "char_device");
  EXPECT_EQ(FileKindKey(FileKind::kPseudoFs), "pseudo_fs");
  EXPECT_EQ(FileKindKey(FileKind::kPipe), "pipe");
}

}  // namespace
}  // namespace iotwin::model
