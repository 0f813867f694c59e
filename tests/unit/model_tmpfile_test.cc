// O_TMPFILE: the descriptor's I/O is the unnamed file's, not its directory's; linkat by
// AT_EMPTY_PATH or through /proc/self/fd/N names that file.
#include <fcntl.h>

#include "model/op_fields.h"
#include "model/path.h"
#include "model_test_util.h"

namespace iotwin::test {
namespace {

// open("/d", O_TMPFILE | O_RDWR) = 3, two writes, then the two ways of naming it.
TraceBuilder TmpfileTrace() {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Openat(100, "/d", O_DIRECTORY | O_RDONLY, 4);
  auto& open = b.Openat(100, "/d", O_TMPFILE | O_RDWR, 3);
  open.ftype = 8;  // the new file's identity
  open.ino = 5555;
  b.Write(100, 3, 4096, 4096).fsize = 4096;
  b.Pwrite(100, 3, 4096, 100, 100);
  auto& empty = b.Path2Op(100, IOT_OP_LINKAT, "", "named");
  empty.fd = 3;
  empty.fd2 = 4;
  empty.flags = AT_EMPTY_PATH;
  auto& proc = b.Path2Op(100, IOT_OP_LINKAT, "/proc/self/fd/3", "named2");
  proc.fd2 = 4;
  proc.flags = AT_SYMLINK_FOLLOW;
  return b;
}

TEST(ModelTmpfile, DescriptorIoIsTheUnnamedFilesNotTheDirectorys) {
  auto m = BuildModel(TmpfileTrace());
  const auto& ops = FindThread(*m, 100)->ops;
  const model::FileInfo* dir = FindFile(*m, "/d");
  ASSERT_NE(dir, nullptr);
  EXPECT_TRUE(dir->is_dir);
  EXPECT_EQ(dir->origin, model::FileOrigin::kPreexisting);
  const uint32_t tmp = ops[2].file;  // the write
  ASSERT_NE(tmp, model::kNone);
  EXPECT_NE(&m->files()[tmp], dir);
  EXPECT_FALSE(m->files()[tmp].is_dir);
  EXPECT_EQ(m->files()[tmp].origin, model::FileOrigin::kCreated);
  EXPECT_EQ(m->files()[tmp].ino, 5555u);
  EXPECT_EQ(ops[3].file, tmp);
  EXPECT_TRUE(m->warnings().empty()) << m->warnings()[0].message;
}

TEST(ModelTmpfile, BothLinkFormsNameTheUnnamedFile) {
  auto m = BuildModel(TmpfileTrace());
  const auto& ops = FindThread(*m, 100)->ops;
  const uint32_t tmp = ops[2].file;
  for (size_t i : {4u, 5u}) {
    EXPECT_EQ(ops[i].skip, model::Skip::kReplayable) << i;
    EXPECT_TRUE(ops[i].empty_path) << i;
    EXPECT_EQ(ops[i].file, tmp) << i;
    EXPECT_EQ(model::PathDirFd(ops[i].sc), 3) << i;  // the replay links its descriptor for 3
  }
  EXPECT_EQ(m->path(ops[4].path2), "/d/named");
  EXPECT_EQ(m->path(ops[5].path2), "/d/named2");
  EXPECT_EQ(m->path(m->files()[tmp].path), "/d/named");
  // The named file is no initial file: the replay makes it.
  for (uint32_t f : m->InitialFileSet()) EXPECT_NE(f, tmp);
}

TEST(ModelTmpfile, AnotherProcessesFdPathStaysAPseudoFileName) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Openat(100, "/d", O_DIRECTORY | O_RDONLY, 4);
  auto& other = b.Path2Op(100, IOT_OP_LINKAT, "/proc/999/fd/3", "x");
  other.fd2 = 4;
  other.flags = AT_SYMLINK_FOLLOW;
  auto m = BuildModel(b);
  EXPECT_EQ(FindThread(*m, 100)->ops[1].skip, model::Skip::kPseudoFs);
}

TEST(ModelTmpfile, ProcSelfFdNumberReadsOnlyTheCallersOwnDescriptors) {
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fd/3", 42), 3);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/thread-self/fd/17", 42), 17);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/42/fd/5", 42), 5);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/43/fd/5", 42), -1);  // another process's
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fd/", 42), -1);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fd/3/x", 42), -1);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fd/-1", 42), -1);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fd/99999999999", 42), -1);
  EXPECT_EQ(model::ProcSelfFdNumber("/proc/self/fdinfo/3", 42), -1);
  EXPECT_EQ(model::ProcSelfFdNumber("/tmp/proc/self/fd/3", 42), -1);
}

}  // namespace
}  // namespace iotwin::test
