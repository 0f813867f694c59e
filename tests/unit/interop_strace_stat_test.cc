// strace's stat structures tell directories from files: a real capture stats "/" and package
// directories whose children it then fails to find; a replay must make them directories.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;
using testing::ImportText;

TEST(StraceStat, StModeGivesTheFileTypeAndRegularFilesTheirSize) {
  ImportOutcome out;
  ImportText(&out, ImportFormat::kStrace,
             "1 1.000001 newfstatat(AT_FDCWD, \"/\", {st_mode=S_IFDIR|0755, st_size=4096, ...}, 0)"
             " = 0 <0.000010>\n"
             "1 1.000002 newfstatat(AT_FDCWD, \"/pkg/_C\", {st_mode=S_IFDIR|0755, st_size=4096, "
             "...}, 0) = 0 <0.000010>\n"
             "1 1.000003 stat(\"/pkg/w.bin\", {st_mode=S_IFREG|0644, st_size=123456, ...}) = 0\n"
             "1 1.000004 lstat(\"/pkg/l\", {st_mode=S_IFLNK|0777, st_size=7, ...}) = 0\n"
             "1 1.000005 statx(AT_FDCWD, \"/pkg/s.bin\", AT_STATX_SYNC_AS_STAT, STATX_ALL, "
             "{stx_mask=STATX_ALL, stx_mode=S_IFREG|0644, stx_size=42, ...}) = 0\n"
             "1 1.000006 newfstatat(AT_FDCWD, \"/pkg/none\", 0x7ffd, 0) = -1 ENOENT (No such file)\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto sc = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 6u);
  EXPECT_EQ(sc[0].ftype, S_IFDIR >> 12);
  EXPECT_EQ(sc[1].ftype, S_IFDIR >> 12);
  EXPECT_EQ(sc[2].ftype, S_IFREG >> 12);
  EXPECT_EQ(sc[2].fsize, 123456u);
  EXPECT_EQ(sc[3].ftype, S_IFLNK >> 12);
  EXPECT_EQ(sc[3].fsize, 0u);  // a symlink's size is its target's length, not data
  EXPECT_EQ(sc[4].ftype, S_IFREG >> 12);
  EXPECT_EQ(sc[4].fsize, 42u);
  EXPECT_EQ(sc[5].ftype, 0);  // failed: nothing shown
}

}  // namespace
}  // namespace iotwin::interop
