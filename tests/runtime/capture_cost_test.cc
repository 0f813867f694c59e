// iotwin record: what the cheap paths of the capture (bpf/memory.bpf.c's per-CPU memo of the
// last file whose cache state is recorded) still record.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

bool WriteFile(const std::string& path, size_t bytes) {
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<char> buf(bytes, 'x');
  bool ok = write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size());
  close(fd);
  return ok;
}

struct FileId {
  uint64_t ino = 0;
  uint32_t dev = 0;
};

FileId IdOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_ino, KernelDevOf(st.st_dev)};
}

// Reads that alternate between two files change the memo at each read: each file still gets
// exactly one cache state, taken no later than the end of its first read.
TEST(CaptureCost, ReadsInTurnsRecordOneCacheStatePerFileBeforeItsFirstRead) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string a = dir / "a.dat", b = dir / "b.dat";
  ASSERT_TRUE(WriteFile(a, 64 << 10));
  ASSERT_TRUE(WriteFile(b, 64 << 10));
  std::string trace = dir / "t.iotwin";
  RunResult run = RecordCommand(trace, {"--no-block", "--no-sched", "--no-nvme"},
                                {"/bin/sh", "-c", "cat \"$0\" \"$1\" \"$0\" \"$1\" > /dev/null", a, b});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  for (const FileId& f : {IdOf(a), IdOf(b)}) {
    ASSERT_NE(f.ino, 0u);
    std::vector<iot_cache_state> states;
    for (const auto& s : t.states) {
      if (s.ino == f.ino && s.dev == f.dev) states.push_back(s);
    }
    ASSERT_EQ(states.size(), 1u) << "cache states of inode " << f.ino;
    const iot_syscall* first_read = nullptr;
    size_t reads = 0;
    for (const auto& sc : t.syscalls) {
      if (sc.op != IOT_OP_READ || sc.ino != f.ino || sc.dev != f.dev) continue;
      if (!first_read) first_read = &sc;
      reads++;
    }
    ASSERT_NE(first_read, nullptr);
    EXPECT_GE(reads, 4u) << "cat reads each file twice, with a last read at end of file";
    EXPECT_LE(states[0].ts, first_read->ts + first_read->dur);
    EXPECT_EQ(states[0].fsize, 64u << 10);
  }
}

}  // namespace
}  // namespace iotwin::test
