// The IOTWIN_MARKER channel of `iotwin record`: only the traced command may write to it (another
// uid cannot open it), markers still arrive, and the file never holds more than its bound.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "record_check.h"

namespace iotwin::test {
namespace {

bool WaitForFile(const std::string& path, int seconds) {
  for (int i = 0; i < seconds * 100; i++) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && st.st_size > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// errno of open(path, O_WRONLY) by uid/gid 1 (daemon), an untraced local user; 0 when it opened.
int OpenAsAnotherUser(const std::string& path) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(1) != 0 || setuid(1) != 0) _exit(200);
    int fd = open(path.c_str(), O_WRONLY | O_APPEND);
    _exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

void OnlyTheCommandWritesMarkers(bool as_nobody) {
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string trace = dir / "t.iotwin", where = dir / "where", go = dir / "go";
  const std::string script = "echo \"$IOTWIN_MARKER\" > " + where + "; while [ ! -e " + go +
                             " ]; do sleep 0.02; done; printf 'I hello 7\\n' >> \"$IOTWIN_MARKER\"";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace};
  if (as_nobody) argv.insert(argv.end(), {"--user", "nobody"});
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  RunResult r;
  std::thread record([&] { r = test::Run(argv, 60); });
  const bool started = WaitForFile(where, 30);
  std::string marker;
  if (started) {
    std::ifstream in(where);
    std::getline(in, marker);
  }
  const int err = marker.empty() ? -1 : OpenAsAnotherUser(marker);
  std::ofstream(go) << "go\n";
  record.join();
  ASSERT_TRUE(started) << r.err;
  ASSERT_FALSE(marker.empty());
  EXPECT_EQ(err, EACCES) << "uid 1 could open " << marker << " for writing";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.intent_labels.size(), 1u);
  EXPECT_EQ(t.intent_labels[0], "hello");
  EXPECT_EQ(t.intents[0].value, 7u);
}

TEST(RecordMarkerChannel, AnotherUserCannotWriteToARootCommandsMarkers) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  OnlyTheCommandWritesMarkers(false);
}

TEST(RecordMarkerChannel, AnotherUserCannotWriteToAnUnprivilegedCommandsMarkers) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  OnlyTheCommandWritesMarkers(true);
}

// 4 MB into the marker file: the recorder empties it past 1 MiB and counts what it dropped;
// a marker written afterwards still arrives.
TEST(RecordMarkerChannel, TheMarkerFileIsBounded) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string trace = dir / "t.iotwin", held = dir / "held";
  const std::string script = "head -c 4000000 /dev/zero >> \"$IOTWIN_MARKER\"; sleep 0.3; "
                             "du -k \"$IOTWIN_MARKER\" | cut -f1 > " + held +
                             "; printf 'I after 1\\n' >> \"$IOTWIN_MARKER\"";
  RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--user", "nobody", "--",
                           "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  uint64_t kib = UINT64_MAX;
  std::ifstream(held) >> kib;
  EXPECT_LE(kib, 1024u) << "the marker file held " << kib << " KiB";
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_GE((*t.summary)["marker_file_trimmed_bytes"].get<uint64_t>(), uint64_t{1} << 20)
      << t.summary->dump();
  ASSERT_FALSE(t.intent_labels.empty());
  EXPECT_EQ(t.intent_labels.back(), "after");
}

}  // namespace
}  // namespace iotwin::test
