// Anonymizer on hostile paths: what is a kernel-provided name is decided on the normalised path,
// so spellings like /dev/../home or /dev//shm cannot carry user names through, and names that
// users choose below kernel directories (/proc/PID/root, /dev/mapper, cgroups) are hashed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/bytes_text.h"
#include "format/record_text.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/anonymize.h"
#include "interop/exporters.h"
#include "interop_test_util.h"

#include "interop_untrusted_util.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;
using testing::ImportText;
using testing::IsValidUtf8;
using testing::kAwkwardName;
using testing::MakeTestAnonymizer;
using testing::ParsesAsJson;
using testing::ReadFile;
using testing::ReadTrace;
using testing::ScratchDir;
using testing::WriteAwkwardTrace;

TEST(AnonymizeUntrusted, DotDotOutOfDevIsHashed) {
  Anonymizer a = MakeTestAnonymizer();
  for (const char* p : {"/dev/../home/alice/notes.txt", "/proc/../home/alice/notes.txt",
                        "/sys/../../home/alice/notes.txt", "/dev/./../home/alice/notes.txt"}) {
    std::string out = a.Path(p);
    EXPECT_EQ(out.find("alice"), std::string::npos) << p << " -> " << out;
    EXPECT_EQ(out.find("home"), std::string::npos) << p << " -> " << out;
    EXPECT_EQ(out.find("notes"), std::string::npos) << p << " -> " << out;
  }
}

TEST(AnonymizeUntrusted, DoubleSlashShmIsHashed) {
  Anonymizer a = MakeTestAnonymizer();
  for (const char* p : {"/dev//shm/alice_segment", "/dev/./shm/alice_segment",
                        "//dev/shm/alice_segment", "/dev/mqueue//alice_queue"}) {
    std::string out = a.Path(p);
    EXPECT_EQ(out.find("alice"), std::string::npos) << p << " -> " << out;
  }
  EXPECT_EQ(a.Path("/dev//shm/alice_segment"), "/dev/shm/" + a.Token("alice_segment"));
}

TEST(AnonymizeUntrusted, ProcRootAndCwdChildrenAreHashed) {
  Anonymizer a = MakeTestAnonymizer();
  for (const char* p :
       {"/proc/self/root/home/alice/notes.txt", "/proc/1234/root/home/alice/notes.txt",
        "/proc/self/cwd/alice/notes.txt", "/proc/1234/cwd/alice/notes.txt",
        "/proc/thread-self/root/home/alice", "/proc/1234/task/1235/root/home/alice",
        "/proc/self/fd/3/alice/notes.txt", "/dev/fd/3/alice/notes.txt",
        "/proc/self/root/../alice/notes.txt", "/proc//self/./root/home/alice"}) {
    std::string out = a.Path(p);
    EXPECT_EQ(out.find("alice"), std::string::npos) << p << " -> " << out;
    EXPECT_EQ(out.find("notes"), std::string::npos) << p << " -> " << out;
  }
  EXPECT_EQ(a.Path("/proc/self/root/etc/passwd"),
            "/proc/self/root/" + a.Token("etc") + "/" + a.Token("passwd"));
  EXPECT_EQ(a.Path("/proc/1234/cwd/x"), "/proc/1234/cwd/" + a.Token("x"));
  // Kernel names stay.
  EXPECT_EQ(a.Path("/proc/self/status"), "/proc/self/status");
  EXPECT_EQ(a.Path("/proc/1234/root"), "/proc/1234/root");
  EXPECT_EQ(a.Path("/proc/self/fd/3"), "/proc/self/fd/3");
  EXPECT_EQ(a.Path("/proc/sys/vm/drop_caches"), "/proc/sys/vm/drop_caches");
}

TEST(AnonymizeUntrusted, UserNamedDeviceAndCgroupComponentsAreHashed) {
  Anonymizer a = MakeTestAnonymizer();
  for (const char* p : {"/dev/disk/by-label/alicedata", "/dev/disk/by-partlabel/alicepart",
                        "/dev/mapper/alicevg-alicelv", "/sys/fs/cgroup/alice.slice/memory.max",
                        "/sys/fs/cgroup/system.slice/alice-app.service/io.stat",
                        "/dev/hugepages/alice_pool", "/dev/alicevg/alicelv"}) {
    std::string out = a.Path(p);
    EXPECT_EQ(out.find("alice"), std::string::npos) << p << " -> " << out;
  }
  EXPECT_EQ(a.Path("/dev/disk/by-label/x"), "/dev/disk/by-label/" + a.Token("x"));
  EXPECT_EQ(a.Path("/dev/mapper/x"), "/dev/mapper/" + a.Token("x"));
  EXPECT_EQ(a.Path("/sys/fs/cgroup/x"), "/sys/fs/cgroup/" + a.Token("x"));
  // Kernel-provided device names stay.
  EXPECT_EQ(a.Path("/dev/nvme0n1p1"), "/dev/nvme0n1p1");
  EXPECT_EQ(a.Path("/dev/block/259:0"), "/dev/block/259:0");
  EXPECT_EQ(a.Path("/dev/pts/3"), "/dev/pts/3");
  EXPECT_EQ(a.Path("/sys/block/nvme0n1/queue/scheduler"), "/sys/block/nvme0n1/queue/scheduler");
}

// The output goes to a private temporary (base/output_file.h): a link at the old OUT.partial
// name is neither followed nor in the way. (Links another user planted at OUT itself:
// tests/runtime/output_files_test.cc.)
TEST(AnonymizeUntrusted, PlantedPartialSymlinkIsNeverWrittenThrough) {
  ScratchDir dir;
  std::string trace = dir / "t.iotwin";
  WriteAwkwardTrace(trace, "/data/x");
  std::string victim = dir / "victim";
  {
    FILE* f = std::fopen(victim.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("precious", f);
    std::fclose(f);
  }
  std::string out = dir / "anon.iotwin";
  ASSERT_EQ(::symlink(victim.c_str(), (out + ".partial").c_str()), 0);
  auto r = AnonymizeTrace(trace, out, MakeTestAnonymizer());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadFile(victim), "precious");
  struct stat st;
  ASSERT_EQ(::lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

}  // namespace
}  // namespace iotwin::interop
