// O_TMPFILE: an unnamed file made in a directory, written, then named with
// linkat(fd, "", ..., AT_EMPTY_PATH) and linkat(AT_FDCWD, "/proc/self/fd/N", ...,
// AT_SYMLINK_FOLLOW). Recorded and replayed: the model takes the descriptor's I/O for the new
// file's (not its directory's), the replay opens the unnamed file in the sandbox's directory,
// writes it and gives it both names through its own descriptor.
#include <sys/stat.h>

#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayTmpfile, UnnamedFileIsWrittenAndLinkedInTheSandbox) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  const std::string work = tmp / "work", trace = tmp / "tmpfile.iotwin", root = tmp / "root";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  RunResult rec =
      test::Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_tmpfile"), work}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  ASSERT_NE(rec.out.find("tmpfile: wrote 12388"), std::string::npos) << rec.out;

  auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"}, 120);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  // No call of the program was left out (the two linkat calls included), and the model did not
  // take the directory for a file with data.
  const nlohmann::json& skipped = r.summary["skipped"]["by_reason"];
  for (const auto& [reason, ops] : skipped.items()) {
    EXPECT_FALSE(ops.contains("linkat")) << reason;
    EXPECT_FALSE(ops.contains("pwrite64")) << reason;
  }
  EXPECT_EQ(r.summary["warnings"].dump().find("used both as a directory"), std::string::npos)
      << r.summary["warnings"].dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/linkat/count"), 3u);
  EXPECT_EQ(J(r.summary, "/per_op/linkat/errors"), 0u);

  const std::string sub = root + work + "/sub";
  struct stat named, named2, top;
  ASSERT_EQ(stat((sub + "/named").c_str(), &named), 0) << sub;
  ASSERT_EQ(stat((sub + "/named2").c_str(), &named2), 0);
  EXPECT_EQ(named.st_size, 12388);  // 3 writes of 4096 and a pwrite of 100 at 12288
  EXPECT_EQ(named2.st_ino, named.st_ino);
  EXPECT_EQ(named.st_nlink, 2u);
  ASSERT_EQ(stat((root + work + "/top").c_str(), &top), 0);
  EXPECT_EQ(top.st_size, 5000);

  // The report's per-file figures: the bytes are the O_TMPFILE file's, under the names its links
  // gave it; the directories have none.
  RunResult rep = test::Run({IotwinBin(), "report", trace, "--json"}, 120);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const nlohmann::json report = nlohmann::json::parse(rep.out);
  bool tmpfile_row = false;
  for (const auto& row : report["files"]["rows"]) {
    const uint64_t written = row["write"]["bytes"].get<uint64_t>();
    // Named by its links, resolved through the directory descriptor.
    if (written == 12388) {
      const nlohmann::json names = {work + "/sub/named", work + "/sub/named2"};
      tmpfile_row = row["names"] == names;
    }
    for (const auto& name : row["names"]) {
      const std::string n = name.get<std::string>();
      if (n == work + "/sub" || n == work) {
        EXPECT_EQ(written, 0u) << n;
      }
    }
  }
  EXPECT_TRUE(tmpfile_row) << report["files"].dump(2).substr(0, 4000);
}

}  // namespace
}  // namespace iotwin::test
