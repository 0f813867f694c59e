// The mode rule of the replay (replay/modes.h): what a recorded mode becomes, which calls pass
// one, and how the summary counts the changes.
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "model_test_util.h"
#include "replay/modes.h"

namespace iotwin::test {
namespace {

using replay::AppliedMode;
using replay::ModeChangesJson;
using replay::PassesMode;

TEST(ModeRule, SetIdBitsAreNeverAppliedAndGroupOtherWriteOnlyWhenKept) {
  EXPECT_EQ(AppliedMode(06755, false), 0755u);
  EXPECT_EQ(AppliedMode(06755, true), 0755u);
  EXPECT_EQ(AppliedMode(0777, false), 0755u);
  EXPECT_EQ(AppliedMode(0777, true), 0777u);
  EXPECT_EQ(AppliedMode(01777, false), 01755u);
  EXPECT_EQ(AppliedMode(01777, true), 01777u);
  EXPECT_EQ(AppliedMode(0640, false), 0640u);
  // Bits beyond the permission bits (a file type, garbage from a crafted trace) never pass.
  EXPECT_EQ(AppliedMode(S_IFREG | 0644, false), 0644u);
  EXPECT_EQ(AppliedMode(~uint64_t{0}, true), 01777u);
}

TEST(ModeRule, OnlyCreatingCallsPassAMode) {
  iot_syscall sc{};
  sc.op = IOT_OP_OPENAT;
  sc.flags = O_RDWR;
  EXPECT_FALSE(PassesMode(sc));
  sc.flags = O_RDWR | O_CREAT;
  EXPECT_TRUE(PassesMode(sc));
  sc.flags = O_TMPFILE | O_RDWR;
  EXPECT_TRUE(PassesMode(sc));
  sc.op = IOT_OP_CREAT;
  sc.flags = 0;
  EXPECT_TRUE(PassesMode(sc));
  sc.op = IOT_OP_MKDIRAT;
  EXPECT_TRUE(PassesMode(sc));
  sc.op = IOT_OP_STATX;  // its "mode" is the statx mask
  EXPECT_FALSE(PassesMode(sc));
}

TEST(ModeRule, SummaryCountsChangedModesWithTheFirstAsExample) {
  TraceBuilder b;
  b.Openat(100, "/ok", O_WRONLY | O_CREAT, 3, 0, -100, 0644);
  b.Close(100, 3);
  b.Openat(100, "/suid", O_WRONLY | O_CREAT, 3, 0, -100, 06755);
  b.Close(100, 3);
  b.PathOp(100, IOT_OP_MKDIR, "/shared", 0).mode = 01777;
  b.Openat(100, "/ok", O_RDONLY, 3, 0, -100, 0777);  // no O_CREAT: the mode is not read
  b.Close(100, 3);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const nlohmann::json masked = ModeChangesJson(*m, false);
  EXPECT_EQ(masked["changed"], 2u) << masked.dump();
  EXPECT_EQ(masked["keep_modes"], false);
  EXPECT_EQ(masked["example"]["path"], "/suid");
  EXPECT_EQ(masked["example"]["op"], "openat");
  EXPECT_EQ(masked["example"]["recorded"], "6755");
  EXPECT_EQ(masked["example"]["applied"], "0755");
  EXPECT_NE(replay::ModeChangesText(masked).find("2 created with other permissions"),
            std::string::npos);
  const nlohmann::json kept = ModeChangesJson(*m, true);
  EXPECT_EQ(kept["changed"], 1u) << kept.dump();
  EXPECT_EQ(replay::ModeChangesText(nlohmann::json{{"changed", 0}}), "");
}

}  // namespace
}  // namespace iotwin::test
