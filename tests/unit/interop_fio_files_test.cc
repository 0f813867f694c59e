// fio export: which files a job names. Files a program only mapped are left out with a note
// (fio would open them and nothing creates them), or prepared at their faulted extent with
// --fio-faults; pipes, sockets, character devices, anonymous inodes and pseudo-files are never
// exported and are counted by reason; a relative --fio-root stays relative for fio to resolve;
// files out of the data scope are left out.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop/exporters.h"
#include "model/scope.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ReadFile;
using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kCacheIno = 500;

// A live capture (its header has "capture"): the loader maps /etc/ld.so.cache and never reads
// it; the program reads /data/in.bin, writes a pipe and /dev/null, reads an eventfd.
void WriteMappedTrace(const std::string& path, bool with_fault) {
  TraceBuilder b(nlohmann::json{{"capture", nlohmann::json::object()}});
  {
    auto& s = b.Call(IOT_OP_OPENAT, 1 * kMs, 10, 10, AT_FDCWD, 3);
    s.path_id = b.Str("/etc/ld.so.cache");
    s.ino = kCacheIno;
    s.dev = 1;
  }
  {
    auto& s = b.Call(IOT_OP_MMAP, 1 * kMs + 100, 10, 10, 3, 0x7f0000000000);
    s.length = 3 * 4096;
    s.flags = MAP_PRIVATE;
    s.mode = PROT_READ;
    s.ino = kCacheIno;
    s.dev = 1;
  }
  b.Call(IOT_OP_CLOSE, 1 * kMs + 200, 10, 10, 3, 0);
  if (with_fault) {
    iot_page_fault pf{};
    InitRecord(&pf, IOT_REC_PAGE_FAULT);
    pf.flags = IOT_PFF_MAJOR;
    pf.ts = 1 * kMs + 300;
    pf.addr = 0x7f0000001000;
    pf.ino = kCacheIno;
    pf.dev = 1;
    pf.pgoff = 1;
    pf.nr_pages = 1;
    pf.tgid = 10;
    pf.tid = 10;
    b.Add(pf);
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 2 * kMs, 10, 10, AT_FDCWD, 3);
    s.path_id = b.Str("/data/in.bin");
    s.ino = 600;
    s.dev = 1;
  }
  b.Call(IOT_OP_READ, 3 * kMs, 10, 10, 3, 4096).length = 4096;
  {
    // A pipe made by pipe2 (no open): the descriptor is unknown, the record says FIFO.
    auto& s = b.Call(IOT_OP_WRITE, 4 * kMs, 10, 10, 7, 100);
    s.length = 100;
    s.ftype = S_IFIFO >> 12;
    s.ino = 700;
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 5 * kMs, 10, 10, AT_FDCWD, 4);
    s.path_id = b.Str("/dev/null");
    s.ftype = S_IFCHR >> 12;
    s.ino = 800;
  }
  {
    auto& s = b.Call(IOT_OP_WRITE, 5 * kMs + 100, 10, 10, 4, 10);
    s.length = 10;
    s.ftype = S_IFCHR >> 12;
    s.ino = 800;
  }
  {
    // An eventfd: an identity without a type.
    auto& s = b.Call(IOT_OP_READ, 6 * kMs, 10, 10, 8, 8);
    s.length = 8;
    s.ftype = 0;
    s.ino = 900;
  }
  b.Call(IOT_OP_CLOSE, 7 * kMs, 10, 10, 3, 0);
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

// The defect: fio failed with open(.../f00000_etc_ld.so.cache) ENOENT, since the job opened a
// file that only the loader's mmap touched and no preparation job created.
TEST(FioExportFiles, MappedOnlyFileIsLeftOutWithANote) {
  ScratchDir dir;
  WriteMappedTrace(dir / "t.iotwin", false);
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string iolog = ReadFile(dir / "fio/p10-t10.iolog");
  EXPECT_EQ(iolog.find("ld.so.cache"), std::string::npos) << iolog;
  EXPECT_NE(iolog.find("f00001_data_in.bin read 0 4096"), std::string::npos) << iolog;
  const std::string job = ReadFile(dir / "fio/replay.fio");
  EXPECT_EQ(job.find("filename=" + (dir / "fio/files/f00000")), std::string::npos) << job;
  EXPECT_NE(job.find("# Left out: 1 file only mapped"), std::string::npos) << job;
  EXPECT_EQ(r->files, 1u);
  EXPECT_EQ(r->reads, 1u);
  ASSERT_EQ(r->files_left_out.size(), 1u);
  EXPECT_EQ(r->files_left_out.begin()->second, 1u);
  EXPECT_NE(r->files_left_out.begin()->first.find("--fio-faults"), std::string::npos);
  ASSERT_EQ(r->per_file.size(), 2u);
  EXPECT_EQ(r->per_file[0].original, "/etc/ld.so.cache");
  EXPECT_FALSE(r->per_file[0].left_out.empty());
  EXPECT_EQ(r->per_file[1].original, "/data/in.bin");
  EXPECT_TRUE(r->per_file[1].left_out.empty());
  EXPECT_EQ(r->per_file[1].reads, 1u);
  EXPECT_EQ(r->per_file[1].read_bytes, 4096u);
  // files.tsv maps the names of the files the job replays, and only those.
  const std::string tsv = ReadFile(dir / "fio/files.tsv");
  EXPECT_EQ(tsv.find("ld.so.cache"), std::string::npos) << tsv;
  EXPECT_NE(tsv.find("\t/data/in.bin\t4096\n"), std::string::npos) << tsv;
  auto info = nlohmann::json::parse(ReadFile(dir / "fio/export.json"));
  EXPECT_EQ(info["per_file"][1]["reads"], 1);
  EXPECT_TRUE(info["per_file"][0].contains("left_out"));
}

TEST(FioExportFiles, FaultsPrepareTheMappedFileAtItsFaultedExtent) {
  ScratchDir dir;
  WriteMappedTrace(dir / "t.iotwin", true);
  FioExportOptions o;
  o.dir = dir / "fio";
  o.faults = true;
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->files_left_out.empty());
  EXPECT_EQ(r->files, 2u);
  EXPECT_EQ(r->reads, 2u);
  const std::string job = ReadFile(dir / "fio/replay.fio");
  EXPECT_NE(job.find("filename=" + (dir / "fio/files/f00000_etc_ld.so.cache") + "\nsize=8192\n"),
            std::string::npos)
      << job;
  EXPECT_EQ(r->per_file[0].reads, 1u);
}

// Pipes, character devices and anonymous inodes (eventfd) are not storage: never in the job,
// counted by what they are.
TEST(FioExportFiles, NonStorageFilesAreNeverExported) {
  ScratchDir dir;
  WriteMappedTrace(dir / "t.iotwin", false);
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped["write: pipe (not storage)"], 1u);
  EXPECT_EQ(r->skipped["write: character device: tty, /dev/null, ... (not storage)"], 1u);
  EXPECT_EQ(r->skipped["read: anonymous inode: eventfd, epoll, timerfd, ... (not storage)"], 1u);
  for (const FioFileResult& f : r->per_file) EXPECT_NE(f.original, "/dev/null");
  EXPECT_EQ(r->writes, 0u);
}

// A relative root is left to fio (its working directory: each server's own), not made here.
TEST(FioExportFiles, RelativeRootStaysRelative) {
  ScratchDir dir;
  WriteMappedTrace(dir / "t.iotwin", false);
  FioExportOptions o;
  o.dir = dir / "fio";
  o.fio_root = "./replay-files/";
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string job = ReadFile(dir / "fio/replay.fio");
  EXPECT_NE(job.find("filename=replay-files/f00001_data_in.bin\n"), std::string::npos) << job;
  EXPECT_NE(ReadFile(dir / "fio/p10-t10.iolog").find("\n0 replay-files/f00001_data_in.bin add\n"),
            std::string::npos);
  struct stat st {};
  EXPECT_NE(stat("replay-files", &st), 0);
}

// --scope data: the shared library the loader read is left out, counted as a file and a call;
// the data file is replayed.
TEST(FioExportFiles, DataScopeLeavesOutTheLibrary) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json{{"capture", nlohmann::json::object()}});
    {
      auto& s = b.Call(IOT_OP_OPENAT, 1 * kMs, 10, 10, AT_FDCWD, 3);
      s.path_id = b.Str("/lib/x86_64-linux-gnu/libc.so.6");
      s.ino = 1;
    }
    b.Call(IOT_OP_READ, 1 * kMs + 100, 10, 10, 3, 832).length = 832;
    b.Call(IOT_OP_CLOSE, 1 * kMs + 200, 10, 10, 3, 0);
    {
      auto& s = b.Call(IOT_OP_OPENAT, 2 * kMs, 10, 10, AT_FDCWD, 3);
      s.path_id = b.Str("/data/in.bin");
      s.ino = 2;
    }
    b.Call(IOT_OP_READ, 3 * kMs, 10, 10, 3, 4096).length = 4096;
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  FioExportOptions o;
  o.dir = dir / "fio";
  auto scope = model::Scope::Parse("data", {}, {});
  ASSERT_TRUE(scope.ok());
  o.scope = *scope;
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 1u);
  EXPECT_EQ(r->reads, 1u);
  EXPECT_EQ(r->files_left_out["out of scope"], 1u);
  EXPECT_EQ(r->skipped["read: out of scope"], 1u);
  const std::string iolog = ReadFile(dir / "fio/p10-t10.iolog");
  EXPECT_EQ(iolog.find("libc"), std::string::npos) << iolog;
  EXPECT_NE(iolog.find("\n0 " + (dir / "fio/files/f00000_data_in.bin") + " add\n"), std::string::npos)
      << iolog;
  EXPECT_NE(ReadFile(dir / "fio/replay.fio").find("# Scope: data: "), std::string::npos);
  auto info = nlohmann::json::parse(ReadFile(dir / "fio/export.json"));
  EXPECT_EQ(info["scope"]["preset"], "data");
}

}  // namespace
}  // namespace iotwin::interop
