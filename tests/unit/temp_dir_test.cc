// TempDir (temp_dir.h), the tests' scratch directory: gone after its scope, also when a fatal
// assertion returned from the middle of it, and when a test left a directory read-only.
#include "temp_dir.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace iotwin::test {
namespace {

// A test body that makes files, then fails a fatal assertion before any cleanup at its end.
void FailAfterMakingFiles(std::string* path) {
  TempDir dir("iotwin-tempdir-test");
  ASSERT_TRUE(dir.ok());
  *path = dir.path();
  std::ofstream(dir / "trace.iotwin") << "bytes";
  ASSERT_EQ(::mkdir((dir / "sandbox").c_str(), 0755), 0);
  std::ofstream(dir / "sandbox/file") << "bytes";
  ASSERT_EQ(::chmod((dir / "sandbox").c_str(), 0500), 0);  // as a mode test leaves it
  ASSERT_TRUE(false) << "forced failure";
  std::filesystem::remove_all(dir.path());  // never reached
}

TEST(TempDir, AFailedAssertionLeavesNothingBehind) {
  std::string path;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    FailAfterMakingFiles(&path);
  }
  ASSERT_EQ(failures.size(), 1);
  EXPECT_NE(std::string(failures.GetTestPartResult(0).message()).find("forced failure"),
            std::string::npos);
  ASSERT_FALSE(path.empty());
  EXPECT_FALSE(std::filesystem::exists(path)) << path << " was left behind";
}

TEST(TempDir, DirectoriesAreFreshAndUnderTheParentAsked) {
  TempDir a("iotwin-tempdir-test"), b("iotwin-tempdir-test", "/var/tmp");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(b.path().rfind("/var/tmp/iotwin-tempdir-test-", 0), 0u) << b.path();
  EXPECT_TRUE(std::filesystem::is_directory(a.path()));
  EXPECT_TRUE(std::filesystem::is_empty(a.path()));
  EXPECT_EQ(a / "x", a.path() + "/x");
}

}  // namespace
}  // namespace iotwin::test
