// The replay manifest lies beside the root (PARENT/.ROOT.iotwin-manifest.json), out of reach of
// every name a trace uses: a trace that writes where the manifest used to be cannot make the
// next replay refuse the root.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayManifest, ATraceCannotReachTheManifest) {
  if (geteuid() != 0) GTEST_SKIP() << "a replay confines its workers: needs root";
  TempDir tmp;
  const std::string root = tmp / "root";
  TraceBuilder b;
  // Overwrites /.iotwin-manifest.json with its own bytes and makes a directory of the name a
  // manifest written beside it would use as its temporary.
  b.Openat(100, "/.iotwin-manifest.json", O_WRONLY | O_CREAT | O_TRUNC, 3);
  b.Write(100, 3, 4096, 4096);
  b.Close(100, 3);
  b.PathOp(100, IOT_OP_MKDIR, "/.iotwin-manifest.json.tmp", 0).mode = 0755;
  b.PathOp(100, IOT_OP_MKDIR, "/.root.iotwin-manifest.json", 0).mode = 0755;
  b.Openat(100, "/data/f", O_RDWR, 4, 8192);
  b.Pread(100, 4, 0, 4096, 4096);
  b.Close(100, 4);
  const std::string trace = WriteTrace(b, tmp / "t.iotwin");
  for (int i = 0; i < 2; i++) {
    auto r = RunReplayCmd({trace, "--root", root, "--pace", "fast", "--json", "-q"});
    ASSERT_EQ(r.run.exit_code, 0) << "replay " << i << ": " << r.run.err;
    EXPECT_EQ(r.summary["prepare"]["manifest_found"].get<bool>(), i == 1) << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.run.out;
  }
  // The trace's own names are ordinary files inside the root; the manifest is beside it.
  struct stat st;
  ASSERT_EQ(::stat((tmp / ".root.iotwin-manifest.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(FileSize(root + "/.iotwin-manifest.json"), 4096);
}

}  // namespace
}  // namespace iotwin::test
