// Importers on hostile input: what cannot be represented is flagged and counted, never cut or
// guessed silently, and the output is never written through a planted symlink.
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

TEST(ImportUntrusted, PathOverStringMaxIsFlaggedTruncated) {
  ScratchDir dir;
  std::string in = dir / "s.txt";
  std::string longpath = "/" + std::string(5000, 'a');
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "1700000000.000001 openat(AT_FDCWD, \"%s\", O_RDONLY) = -1 ENAMETOOLONG (x)\n",
                 longpath.c_str());
    std::fclose(f);
  }
  ImportRequest req;
  req.format = ImportFormat::kStrace;
  req.inputs = {in};
  req.output = dir / "s.iotwin";
  auto r = RunImport(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto t = ReadTrace(req.output);
  auto sc = t.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_TRUE(sc[0].sflags & IOT_SCF_PATH_TRUNC);
  EXPECT_EQ(t.strings[sc[0].path_id].size(), size_t{IOT_STRING_MAX});
  EXPECT_EQ((*t.summary)["import"]["counters"]["names_truncated"], 1) << t.summary->dump();
  // The STRING record carries the truncated flag.
  auto reader = TraceReader::Open(req.output);
  ASSERT_TRUE(reader.ok());
  bool flagged = false;
  for (;;) {
    auto next = (*reader)->Next();
    ASSERT_TRUE(next.ok());
    if (!*next) break;
    if ((*next)->type == IOT_REC_STRING) {
      flagged = flagged || (As<iot_string>(*next).flags & IOT_STRF_TRUNCATED);
    }
  }
  EXPECT_TRUE(flagged);
}

TEST(ImportUntrusted, PlantedPartialSymlinkIsNeverWrittenThrough) {
  ScratchDir dir;
  std::string victim = dir / "victim";
  {
    FILE* f = std::fopen(victim.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("precious", f);
    std::fclose(f);
  }
  std::string in = dir / "s.txt";
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("1700000000.000001 openat(AT_FDCWD, \"/x\", O_RDONLY) = 3</x>\n", f);
    std::fclose(f);
  }
  ImportRequest req;
  req.format = ImportFormat::kStrace;
  req.inputs = {in};
  req.output = dir / "out.iotwin";
  // The output goes to a private temporary (base/output_file.h): a link at the old OUT.partial
  // name is neither followed nor in the way (links another user planted at OUT itself:
  // tests/runtime/output_files_test.cc).
  ASSERT_EQ(::symlink(victim.c_str(), (req.output + ".partial").c_str()), 0);
  auto r = RunImport(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadFile(victim), "precious");
  struct stat st;
  EXPECT_EQ(::lstat((req.output + ".partial").c_str(), &st), 0);  // not removed either
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_EQ(::lstat(req.output.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// ---- 4. strace -s 0: iovec arrays elided -------------------------------------------------------

TEST(StraceUntrusted, ElidedIovecLengthComesFromResultAndIsCounted) {
  ImportOutcome o;
  ImportText(&o, ImportFormat::kStrace,
             "45 1700000000.000001 preadv2(45</f>, [...], 1, 131072, 0) = 131072\n"
             "45 1700000000.000002 writev(45</f>, [...], 2) = 8192\n"
             "45 1700000000.000003 readv(45</f>, [{iov_base=\"\"..., iov_len=4096}, ...], 3) = "
             "12288\n"
             "45 1700000000.000004 preadv(45</f>, [...], 1, 0) = -1 EIO (Input/output error)\n"
             "45 1700000000.000005 readv(45</f>, [{iov_base=\"\"..., iov_len=4096}], 1) = 10\n");
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  auto sc = o.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 5u);
  EXPECT_EQ(sc[0].length, 131072u);
  EXPECT_EQ(sc[0].offset, 131072u);
  EXPECT_EQ(sc[1].length, 8192u);
  EXPECT_EQ(sc[2].length, 12288u);  // one length shown, the rest elided: the result
  EXPECT_EQ(sc[3].length, 0u);      // failed: nothing tells
  EXPECT_EQ(sc[4].length, 4096u);   // complete array: the request, not the short result
  EXPECT_EQ(o.stats.counters["length_from_result"], 3u);
  EXPECT_EQ(o.stats.counters["length_unknown"], 1u);
}

// ---- 5. NUL in a path ------------------------------------------------------------------------

TEST(StraceUntrusted, PathWithNulIsUnrepresentable) {
  ImportOutcome o;
  ImportText(&o, ImportFormat::kStrace,
             "45 1700000000.000001 openat(AT_FDCWD, \"/tmp/a\\0b\", O_RDONLY) = -1 ENOENT (x)\n"
             "45 1700000000.000002 unlink(\"/tmp/c\\x00d\") = -1 ENOENT (x)\n"
             "45 1700000000.000003 rename(\"/tmp/ok\", \"/tmp/e\\000f\") = 0\n"
             "45 1700000000.000004 read(7</tmp/g\\0h>, \"\"..., 10) = 10\n"
             "45 1700000000.000005 openat(AT_FDCWD, \"/tmp/fine\", O_RDONLY) = 3</tmp/fine>\n");
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  auto sc = o.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 5u);
  for (size_t id = 1;; id++) {
    std::string_view s = o.sink.String(static_cast<uint32_t>(id));
    if (s.empty()) break;
    EXPECT_EQ(s.find('\0'), std::string_view::npos) << id;
  }
  EXPECT_EQ(sc[0].path_id, 0u);
  EXPECT_TRUE(sc[0].sflags & IOT_SCF_PATH_FAULT);
  EXPECT_EQ(sc[1].path_id, 0u);
  EXPECT_TRUE(sc[1].sflags & IOT_SCF_PATH_FAULT);
  EXPECT_EQ(o.sink.String(sc[2].path_id), "/tmp/ok");
  EXPECT_EQ(sc[2].path2_id, 0u);
  EXPECT_TRUE(sc[2].sflags & IOT_SCF_PATH_FAULT);
  for (const auto& s : o.sink.Of<iot_fd_snapshot>(IOT_REC_FD_SNAPSHOT)) {
    EXPECT_EQ(s.path_id, 0u);
  }
  EXPECT_TRUE(sc[3].sflags & IOT_SCF_NO_FILE);
  EXPECT_EQ(o.sink.String(sc[4].path_id), "/tmp/fine");
  EXPECT_EQ(sc[4].sflags, 0u);
  EXPECT_EQ(o.stats.counters["names_with_nul"], 4u);
}

TEST(FioIologUntrusted, FileNameWithNulIsAnUnknownLine) {
  using namespace std::string_literals;
  ImportOutcome o;
  ImportText(&o, ImportFormat::kFioIolog,
             "fio version 2 iolog\n/tmp/a\0b add\n/tmp/a\0b open\n/tmp/a\0b read 0 4096\n"
             "/tmp/ok open\n/tmp/ok read 0 4096\n"s);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.stats.unknown_lines, 3u);
  for (const auto& sc : o.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    EXPECT_EQ(o.sink.String(sc.path_id).find('\0'), std::string_view::npos);
  }
}

}  // namespace
}  // namespace iotwin::interop
