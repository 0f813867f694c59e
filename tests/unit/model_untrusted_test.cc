// The model takes traces as untrusted input: its memory follows what a trace holds, not the
// numbers it claims; and it reads real captures' file kinds (directories) right.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model_test_util.h"
#include "temp_dir.h"

namespace iotwin::test {
namespace {

using model::Skip;

// Caps this process's address space at `extra` bytes above what it has mapped now. Run inside
// EXPECT_EXIT: a model that allocates by what a trace claims then dies of std::bad_alloc in the
// forked child instead of taking the machine's memory.
void CapAddressSpace(uint64_t extra) {
  unsigned long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const uint64_t limit = static_cast<uint64_t>(pages) * sysconf(_SC_PAGESIZE) + extra;
  rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(3);
}

constexpr int32_t kHugeFd = 2147483000;

TEST(ModelUntrusted, HugeDupTargetDoesNotSizeForkAndExit) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/f", O_RDONLY, 3, 4096);
  b.NewThread(100, 101);
  b.Dup2(101, 3, kHugeFd, kHugeFd);
  b.Close(101, kHugeFd);
  b.Fork(100, 200);
  b.Read(200, 3, 10, 10);
  b.Exit(200, true);
  b.Exit(101, false);
  b.Exit(100, true);
  EXPECT_EXIT(
      {
        CapAddressSpace(256u << 20);
        auto m = BuildModel(b);
        if (!m) std::_Exit(1);
        const auto* parent = FindThread(*m, 100);
        // The fork follows the other thread's close of the huge number (it visits that slot).
        const model::Op& fork = parent->ops[2];  // open, thread start, fork
        bool after_close = false;
        for (uint32_t i = 0; i < fork.dep_count; i++) {
          const model::Dep& d = m->DepsBegin(fork)[i];
          after_close |= d.thread == ThreadIndex(*m, 101) && d.count == 2;
        }
        std::_Exit(fork.kind == model::OpKind::kFork && after_close ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(ModelUntrusted, CloseRangeAndExecOfHugeDescriptorsVisitLiveOnes) {
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDONLY | O_CLOEXEC, 3, 4096);
  b.Dup2(100, 3, kHugeFd, kHugeFd, IOT_OP_DUP3, O_CLOEXEC);
  b.Dup2(100, 3, kHugeFd - 1, kHugeFd - 1);
  b.CloseRange(100, kHugeFd - 1, ~0u);
  b.Exec(100, "/bin/true");
  b.Exit(100, true);
  EXPECT_EXIT(
      {
        CapAddressSpace(256u << 20);
        auto m = BuildModel(b);
        if (!m) std::_Exit(1);
        const auto* t = FindThread(*m, 100);
        const model::Op& cr = t->ops[3];
        const model::Op& exec = t->ops[4];
        bool ok = cr.extra_count == 2 && m->ExtraBegin(cr)[0] == uint64_t(kHugeFd - 1) &&
                  m->ExtraBegin(cr)[1] == uint64_t(kHugeFd) && exec.extra_count == 1 &&
                  m->ExtraBegin(exec)[0] == 3u;
        std::_Exit(ok ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "");
}

// Fork and exit visit only the numbers a process named; a number first named after a fork still
// follows it (the child did not inherit it), as when the fork visited every number up to the
// highest.
TEST(ModelUntrusted, DescriptorFirstNamedAfterForkFollowsTheFork) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/f", O_RDONLY, 3, 4096);
  b.Dup2(100, 3, 10, 10);
  b.Close(100, 10);
  b.NewThread(100, 101);
  b.Fork(100, 200);
  b.Openat(101, "/d/g", O_RDONLY, 5, 4096);  // 5: never named before the fork
  b.Openat(101, "/d/h", O_RDONLY, 11, 4096); // 11: above every number named before it
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 101);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 2u);
  const uint32_t parent = ThreadIndex(*m, 100);
  const auto& fork_op = FindThread(*m, 100)->ops[4];
  ASSERT_EQ(fork_op.kind, model::OpKind::kFork);
  bool follows = false;
  for (uint32_t i = 0; i < t->ops[0].dep_count; i++) {
    const model::Dep& d = m->DepsBegin(t->ops[0])[i];
    follows |= d.thread == parent && d.count >= 5;
  }
  EXPECT_TRUE(follows);
}

TEST(ModelUntrusted, OverlongStringIsNoPath) {
  TraceBuilder b;
  const std::string overlong = "/" + std::string(4095, 'a');  // 4096 bytes: over PATH_MAX
  const std::string longest = "/" + std::string(4094, 'b');   // 4095 bytes: a path
  b.Openat(100, overlong, O_RDONLY, 3, 4096);
  b.Openat(100, longest, O_RDONLY, 4, 4096);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(t->ops[0].skip, Skip::kUnknownPath);
  EXPECT_EQ(t->ops[1].skip, Skip::kReplayable);
  for (const auto& p : m->paths()) EXPECT_LT(p.size(), 4096u);
  EXPECT_TRUE(FindFile(*m, longest));
}

// A trace file's strings are held once, by the reader that decodes them: the model looks them
// up there instead of keeping a second table.
TEST(ModelUntrusted, LoadedTraceKeepsOneCopyOfItsStrings) {
  test::TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  const std::string path = tmp / "model_untrusted_strings.iotwin";
  constexpr int kStrings = 40000;
  constexpr size_t kLen = 4000;  // 160 MB of distinct strings, a few hundred KB compressed
  // Written by a child, so that this process's heap holds none of it when the reading child
  // below measures its address space from here.
  EXPECT_EXIT(
      {
        TraceBuilder b;
        std::string s(kLen, 'x');
        for (int i = 0; i < kStrings; i++) {
          std::string id = "/" + std::to_string(i) + "/";
          s.replace(0, id.size(), id);
          b.Str(s);
        }
        b.Openat(100, "/" + std::to_string(kStrings - 1) + "/" + std::string(kLen - 8, 'x'),
                 O_RDONLY, 3, 4096);
        b.Openat(100, "/data/f", O_RDONLY, 4, 4096);
        b.Read(100, 4, 100, 100);
        std::_Exit(b.WriteFile(path).ok() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        // One copy (160 MB plus the table's overhead) fits; two do not.
        CapAddressSpace(260u << 20);
        auto m = model::LoadTraceModel(path);
        if (!m.ok()) std::_Exit(1);
        const auto* t = FindThread(**m, 100);
        bool ok = t && t->ops.size() == 3 && t->ops[1].skip == Skip::kReplayable &&
                  (*m)->path(t->ops[1].path) == "/data/f" && FindFile(**m, "/data/f");
        std::_Exit(ok ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- numbers from the trace ------------------------------------------------------------------

TEST(ModelUntrusted, IovecRecordWithMoreLengthsThanIovMaxIsCut) {
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDONLY, 3, 1 << 20);
  b.Vectored(100, IOT_OP_PREADV, 3, 0, std::vector<uint64_t>(2000, 8), 16000);
  EXPECT_EXIT(
      {
        CapAddressSpace(256u << 20);
        auto m = BuildModel(b);
        if (!m) std::_Exit(1);
        std::_Exit(FindThread(*m, 100)->ops[1].extra_count == 1024 ? 0 : 2);  // IOV_MAX
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(ModelUntrusted, PageSizeOfAnotherTypeIsIgnored) {
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDONLY, 3, 8192);
  b.Mmap(100, 3, 0, 5000, PROT_READ, MAP_SHARED, 0x10000);
  for (const nlohmann::json& ps : {nlohmann::json("4096"), nlohmann::json(-4096),
                                   nlohmann::json(3.5), nlohmann::json(UINT64_MAX)}) {
    model::ModelBuilder mb;
    nlohmann::json meta = b.meta();
    meta["host"]["page_size"] = ps;
    mb.SetMeta(meta);
    ASSERT_TRUE(b.Feed(mb).ok());
    std::unique_ptr<model::TraceModel> m;
    EXPECT_NO_THROW({
      auto r = mb.Finish();
      ASSERT_TRUE(r.ok());
      m = std::move(r).value();
    }) << ps.dump();
    ASSERT_TRUE(m);
    ASSERT_EQ(m->mappings().size(), 1u);
    EXPECT_EQ(m->mappings()[0].length, 8192u) << ps.dump();  // 4 KiB pages
  }
}

TEST(ModelUntrusted, ReadAtHugeOffsetSaturatesInsteadOfWrapping) {
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDONLY, 3, 0);
  b.Pread(100, 3, UINT64_MAX - 10, 100, 100);
  b.Openat(100, "/d/g", O_RDWR, 4, 0);
  b.Mmap(100, 4, UINT64_MAX - 4095, 8192, PROT_READ, MAP_SHARED, 0x10000);
  b.Fault(100, 0x11000, false);  // its second page: past the last byte a file can have
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  EXPECT_EQ(FindFile(*m, "/d/f")->initial_size, UINT64_MAX);
  EXPECT_EQ(FindFile(*m, "/d/g")->initial_size, UINT64_MAX);
}

TEST(ModelUntrusted, MappingSnapshotEndingBeforeItsStartIsIgnored) {
  TraceBuilder b;
  uint32_t name = b.Str("/d/lib.so");
  b.Fault(100, 0x5000, false);
  model::ModelBuilder mb;
  mb.SetMeta(b.meta());
  ASSERT_TRUE(b.Feed(mb).ok());
  iot_map_snapshot snap{};
  snap.hdr.type = IOT_REC_MAP_SNAPSHOT;
  snap.hdr.size = sizeof snap;
  snap.tgid = 100;
  snap.start = 0x9000;
  snap.end = 0x1000;  // before start: the length would wrap to nearly 2^64
  snap.path_id = name;
  ASSERT_TRUE(mb.Add(&snap.hdr).ok());
  auto r = mb.Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->mappings().empty());
}

// ---- file kinds ------------------------------------------------------------------------------

// An strace capture records "/" without a file type (the importer takes st_mode only where it
// can): "/" is a directory whatever the record says.
TEST(ModelUntrusted, RootStatWithoutTypeIsADirectory) {
  TraceBuilder b;
  b.PathOp(100, IOT_OP_NEWFSTATAT, "/", 0).ftype = 0;
  b.Openat(100, "/etc/hosts", O_RDONLY, 3, 100).ftype = 0;
  b.Read(100, 3, 100, 100);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* root = FindFile(*m, "/");
  ASSERT_TRUE(root);
  EXPECT_TRUE(root->is_dir);
  EXPECT_TRUE(m->warnings().empty());
  const auto* hosts = FindFile(*m, "/etc/hosts");
  ASSERT_TRUE(hosts);
  EXPECT_FALSE(hosts->is_dir);
  EXPECT_EQ(hosts->initial_size, 100u);
}

TEST(ModelUntrusted, ParentOfAUsedPathIsADirectory) {
  TraceBuilder b;
  b.PathOp(100, IOT_OP_NEWFSTATAT, "/data", 0).ftype = 0;  // seen first, type unknown
  b.PathOp(100, IOT_OP_NEWFSTATAT, "/data/sub", 0).ftype = 0;
  b.Openat(100, "/data/sub/f", O_RDONLY, 3, 10).ftype = 0;
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  EXPECT_TRUE(FindFile(*m, "/data")->is_dir);
  EXPECT_TRUE(FindFile(*m, "/data/sub")->is_dir);
  EXPECT_FALSE(FindFile(*m, "/data/sub/f")->is_dir);
  EXPECT_TRUE(m->warnings().empty());
}

TEST(ModelUntrusted, DirectoryOpsMarkDirectories) {
  TraceBuilder b;
  b.Openat(100, "/a", O_RDONLY | O_DIRECTORY, 3).ftype = 0;
  b.Openat(100, "/b", O_RDONLY, 4).ftype = 0;
  b.FdOp(100, IOT_OP_GETDENTS64, 4, 48);
  b.Openat(100, "/c", O_RDONLY, 5).ftype = 0;
  b.FdOp(100, IOT_OP_FCHDIR, 5);
  b.PathOp(100, IOT_OP_CHDIR, "/d", 0);
  b.PathOp(100, IOT_OP_MKDIR, "/e", 0);
  b.PathOp(100, IOT_OP_MKDIR, "/f", -EEXIST);
  b.Openat(100, "/g", O_RDONLY, 6).ftype = 0;  // no evidence: stays a file
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  for (const char* d : {"/a", "/b", "/c", "/d", "/e", "/f"}) {
    ASSERT_TRUE(FindFile(*m, d)) << d;
    EXPECT_TRUE(FindFile(*m, d)->is_dir) << d;
  }
  EXPECT_FALSE(FindFile(*m, "/g")->is_dir);
  EXPECT_TRUE(m->warnings().empty());
}

TEST(ModelUntrusted, FileAndDirectoryConflictIsAWarning) {
  TraceBuilder b;
  b.Openat(100, "/x", O_RDONLY, 3, 100).ftype = 0;
  b.Read(100, 3, 100, 100);
  b.PathOp(100, IOT_OP_NEWFSTATAT, "/x/y", 0).ftype = 0;
  b.Openat(100, "/z", O_RDONLY, 4, 100).ftype = 0;
  b.Read(100, 4, 100, 100);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->warnings().size(), 1u);
  const model::ModelWarning& w = m->warnings()[0];
  EXPECT_EQ(m->path(w.path), "/x");
  EXPECT_NE(w.message.find("'/x'"), std::string::npos) << w.message;
  EXPECT_NE(w.message.find("'/x/y'"), std::string::npos) << w.message;
  EXPECT_NE(w.message.find("newfstatat of tid 100, op #2"), std::string::npos) << w.message;
  EXPECT_NE(w.message.find("read of tid 100, op #1"), std::string::npos) << w.message;
  EXPECT_TRUE(FindFile(*m, "/x")->is_dir);  // the name below it needs a directory
  EXPECT_FALSE(FindFile(*m, "/z")->is_dir);
}

TEST(ModelUntrusted, WarningPrintsPathBytesNotTheirEncoding) {
  TraceBuilder b;
  const std::string odd = std::string("/o\xff\n", 4);
  b.PathOp(100, IOT_OP_MKDIR, odd, 0);
  b.Openat(100, odd, O_WRONLY | O_TRUNC, 3, 0).ftype = 0;
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->warnings().size(), 1u);
  EXPECT_NE(m->warnings()[0].message.find("'/o\\xff\\x0a'"), std::string::npos)
      << m->warnings()[0].message;
}

}  // namespace
}  // namespace iotwin::test
