// iotwin record when writing the trace fails under a running command (a full file system): the
// command is stopped and reaped as --on-failure says, never left running untraced in silence.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "record_check.h"

namespace iotwin::test {
namespace {

// A tmpfs of 256 KiB: the trace of a busy command fills it within a second or two.
class TinyFs {
 public:
  explicit TinyFs(const std::string& dir) : dir_(dir) {
    mkdir(dir.c_str(), 0755);
    ok_ = mount("iotwin-tiny", dir.c_str(), "tmpfs", 0, "size=256k") == 0;
  }
  ~TinyFs() {
    if (ok_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  pid_t pid = 0;
  in >> pid;
  return pid;
}

// A shell that writes its pid, then opens and reads a file forever (a few hundred thousand
// calls a second: the 256 KiB file system is full long before the 60 s timeout).
std::vector<std::string> BusyCommand(const std::string& pid_file) {
  // Its own output away from iotwin's pipes: a command left running must not hold them open.
  return {"/bin/sh", "-c",
          "exec >/dev/null 2>&1 </dev/null; echo $$ > " + pid_file +
              "; while :; do read x < /etc/hostname; done"};
}

TEST(RecordFailure, FullDiskStopsAndReapsTheCommand) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  TinyFs fs(dir / "tiny");
  ASSERT_TRUE(fs.ok()) << "mount tmpfs";
  std::string pid_file = dir / "pid";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", dir / "tiny/t.iotwin", "--"};
  for (auto& a : BusyCommand(pid_file)) argv.push_back(a);
  RunResult r = test::Run(argv, 90);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("was stopped"), std::string::npos) << r.err;
  pid_t pid = ReadPid(pid_file);
  ASSERT_GT(pid, 0);
  EXPECT_FALSE(Alive(pid)) << "the traced command " << pid << " still runs";
  if (Alive(pid)) kill(pid, SIGKILL);
}

TEST(RecordFailure, LeaveKeepsTheCommandRunningAndSaysSo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  TinyFs fs(dir / "tiny");
  ASSERT_TRUE(fs.ok()) << "mount tmpfs";
  std::string pid_file = dir / "pid";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", dir / "tiny/t.iotwin",
                                   "--on-failure", "leave", "--"};
  for (auto& a : BusyCommand(pid_file)) argv.push_back(a);
  RunResult r = test::Run(argv, 90);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  pid_t pid = ReadPid(pid_file);
  ASSERT_GT(pid, 0);
  EXPECT_NE(r.err.find("pid " + std::to_string(pid)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("untraced"), std::string::npos) << r.err;
  EXPECT_TRUE(Alive(pid));
  kill(pid, SIGKILL);
}

}  // namespace
}  // namespace iotwin::test
