// Output files and names other users planted (docs/security.md, "Output files"): in a sticky
// world-writable directory (as /tmp is), `nobody` plants a symlink at the name root's command
// will write, pointing at a root-owned 0600 canary. Every writer leaves the canary as it was and
// puts a regular file of its own at the name. Needs root (to act as `nobody`); the recording
// cases need BPF too.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr uid_t kNobody = 65534;
constexpr const char* kCanaryText = "root's secret\n";

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A sticky world-writable directory `shared` and a root-owned 0600 canary beside it.
class PlantedOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (to plant names as nobody)";
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    shared_ = dir_ / "shared";
    ASSERT_EQ(::mkdir(shared_.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(shared_.c_str(), 01777), 0);
    canary_ = dir_ / "canary";
    std::ofstream(canary_) << kCanaryText;
    ASSERT_EQ(::chmod(canary_.c_str(), 0600), 0);
  }

  // Runs `fn` as nobody in a child process; true when it returned true.
  template <typename Fn>
  static bool AsNobody(Fn fn) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) {
        _exit(2);
      }
      _exit(fn() ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  // As nobody: `name` (in the shared directory) -> the canary.
  void Plant(const std::string& name) {
    const std::string target = canary_;
    ASSERT_TRUE(AsNobody([&] { return ::symlink(target.c_str(), name.c_str()) == 0; })) << name;
    struct stat st;
    ASSERT_EQ(::lstat(name.c_str(), &st), 0);
    ASSERT_EQ(st.st_uid, kNobody);
  }

  // The canary as it was, and `name` a regular file of root's (not the planted link).
  void ExpectCanaryKeptAndRegular(const std::string& name) {
    EXPECT_EQ(ReadText(canary_), kCanaryText);
    struct stat st;
    ASSERT_EQ(::lstat(name.c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << name;
    EXPECT_EQ(st.st_uid, 0u) << name;
  }

  // A small trace, imported from an strace log (no BPF needed).
  std::string SmallTrace() {
    const std::string log = dir_ / "calls.strace", trace = dir_ / "small.iotwin";
    std::ofstream(log) << "100 openat(AT_FDCWD, \"/data/f\", O_RDWR|O_CREAT, 0644) = 3\n"
                          "100 pwrite64(3, \"\"..., 4096, 0) = 4096\n"
                          "100 pread64(3, \"\"..., 4096, 0) = 4096\n"
                          "100 close(3) = 0\n";
    RunResult r = test::Run({IotwinBin(), "import", "--format", "strace", "-o", trace, log});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return trace;
  }

  TempDir dir_;
  std::string shared_, canary_;
};

TEST_F(PlantedOutput, RecordReplacesAPlantedTraceName) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const std::string out = shared_ + "/run.iotwin";
  Plant(out);
  RunResult r = test::Run({IotwinBin(), "record", "-o", out, "--no-status", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(out);
  EXPECT_EQ(test::Run({IotwinBin(), "report", out}).exit_code, 0);
}

TEST_F(PlantedOutput, ReplayRecordReplacesPlantedCaptureNames) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const std::string trace = SmallTrace(), out = shared_ + "/replayed.iotwin";
  Plant(out);
  Plant(out + ".capture.log");
  Plant(out + ".capture.tmp");
  RunResult r = test::Run({IotwinBin(), "replay", trace, "--root", dir_ / "root", "--record", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(out);
  EXPECT_EQ(ReadText(canary_), kCanaryText);
}

TEST_F(PlantedOutput, ExportChromeAndHtmlReplaceAPlantedName) {
  const std::string trace = SmallTrace();
  const std::string chrome = shared_ + "/trace.json", html = shared_ + "/report.html";
  Plant(chrome);
  Plant(html);
  RunResult r = test::Run({IotwinBin(), "export", trace, "--chrome", chrome});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(chrome);
  EXPECT_NE(ReadText(chrome).find("traceEvents"), std::string::npos);
  r = test::Run({IotwinBin(), "report", trace, "--html", html});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(html);
}

TEST_F(PlantedOutput, ExportFioReplacesPlantedJobFiles) {
  const std::string trace = SmallTrace(), job = shared_ + "/job";
  // nobody made the job directory and planted replay.fio in it.
  const std::string target = canary_;
  ASSERT_TRUE(AsNobody([&] {
    return ::mkdir(job.c_str(), 0755) == 0 &&
           ::symlink(target.c_str(), (job + "/replay.fio").c_str()) == 0 &&
           ::symlink(target.c_str(), (job + "/files.tsv").c_str()) == 0;
  }));
  RunResult r = test::Run({IotwinBin(), "export", trace, "--fio", job});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(job + "/replay.fio");
  ExpectCanaryKeptAndRegular(job + "/files.tsv");
}

TEST_F(PlantedOutput, CsvAnonymizeAndImportReplaceAPlantedName) {
  const std::string trace = SmallTrace();
  const std::string csv = shared_ + "/csv", anon = shared_ + "/anon.iotwin",
                    imported = shared_ + "/imported.iotwin";
  ASSERT_EQ(::mkdir(csv.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(csv.c_str(), 01777), 0);
  Plant(csv + "/syscalls.csv");
  Plant(anon);
  Plant(imported);
  RunResult r = test::Run({IotwinBin(), "export", trace, "--csv", csv});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(csv + "/syscalls.csv");
  const std::string key = dir_ / "key";
  std::ofstream(key) << std::string(32, 'k');
  r = test::Run({IotwinBin(), "anonymize", trace, "-o", anon, "--key", key});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(anon);
  r = test::Run({IotwinBin(), "import", "--format", "strace", "-o", imported, dir_ / "calls.strace"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ExpectCanaryKeptAndRegular(imported);
}

}  // namespace
}  // namespace iotwin::test
