// CSV/JSONL tables (docs/tables.md): file ids joined to the files table, flag names next to the
// raw values, the directory rules (atomic replacement, stale tables removed, FIFOs and devices
// written in place) and the integer writer.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/exporters.h"
#include "interop/flag_names.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ReadFile;
using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;

std::vector<nlohmann::json> JsonRows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  const std::string text = ReadFile(path);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    rows.push_back(nlohmann::json::parse(text.substr(pos, nl - pos)));
    pos = nl + 1;
  }
  return rows;
}

std::map<uint64_t, std::string> FilePaths(const std::string& dir) {
  std::map<uint64_t, std::string> paths;
  for (const auto& f : JsonRows(dir + "/files.jsonl")) paths[f["file_id"]] = f["path"];
  return paths;
}

// The names of the temporary tables (*.partial) left in `dir`, space-separated.
std::string PartialFiles(const std::string& dir) {
  std::string found;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.find(".partial") != std::string::npos) found += name + " ";
  }
  return found;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A process in /work: a relative open, an open through a directory descriptor, reads, a failed
// open, a mapping and its faults, and a page-cache insertion seen before the file's open.
void WritePathTrace(const std::string& path) {
  TraceBuilder b(nlohmann::json::object());
  b.Add(b.ProcRecord(IOT_PROC_CWD, 100, 1, 1, "", b.Str("/work")));
  iot_page_cache pc{};
  pc.hdr.type = IOT_REC_PAGE_CACHE;
  pc.hdr.size = sizeof pc;
  pc.kind = 1;
  pc.ts = 150;
  pc.ino = 22;
  pc.dev = kDev;
  pc.nr_pages = 1;
  b.Add(pc);
  {
    auto& s = b.Call(IOT_OP_OPENAT, 200, 1, 1, AT_FDCWD, 3);
    s.path_id = b.Str("data/../data/a.bin");
    s.flags = O_RDONLY | O_CLOEXEC;
    s.ino = 11;
    s.dev = kDev;
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 300, 1, 1, AT_FDCWD, 4);
    s.path_id = b.Str("/srv/dir");
    s.flags = O_RDONLY | O_DIRECTORY;
    s.ino = 30;
    s.dev = kDev;
    s.ftype = 4;
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 400, 1, 1, 4, 5);  // relative to the directory descriptor
    s.path_id = b.Str("b.bin");
    s.flags = O_WRONLY | O_CREAT | O_TRUNC;
    s.mode = 0644;
    s.ino = 22;
    s.dev = kDev;
  }
  {
    auto& s = b.Call(IOT_OP_PREAD64, 500, 1, 1, 3, 4096);
    s.offset = 0;
    s.length = 4096;
    s.ino = 11;
    s.dev = kDev;
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 600, 1, 1, AT_FDCWD, -2);
    s.path_id = b.Str("missing.bin");
    s.ftype = 0;
  }
  {
    auto& s = b.Call(IOT_OP_MMAP, 700, 1, 1, 3, 0x7f0000000000);
    s.length = 8192;
    s.flags = MAP_PRIVATE | MAP_POPULATE;
    s.mode = PROT_READ;
    s.ino = 11;
    s.dev = kDev;
  }
  {
    auto& s = b.Call(IOT_OP_FADVISE64, 750, 1, 1, 5, 0);
    s.aux = POSIX_FADV_DONTNEED;
  }
  {
    auto& s = b.Call(IOT_OP_LSEEK, 760, 1, 1, 5, 0);
    s.aux = SEEK_END;
  }
  iot_page_fault pf{};
  pf.hdr.type = IOT_REC_PAGE_FAULT;
  pf.hdr.size = sizeof pf;
  pf.ts = 800;
  pf.tgid = pf.tid = 1;
  pf.ino = 11;
  pf.dev = kDev;
  pf.flags = IOT_PFF_MAJOR;
  b.Add(pf);
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

TEST(TableExport, RowsCarryFileIdsJoinedToResolvedPaths) {
  ScratchDir dir;
  WritePathTrace(dir / "t.iotwin");
  auto r = ExportTables(dir / "t.iotwin", dir / "out", TableFormat::kJsonl);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto paths = FilePaths(dir / "out");
  auto path_of = [&](const nlohmann::json& row, const char* key = "file_id") -> std::string {
    if (row[key].is_null()) return "(none)";
    auto it = paths.find(row[key].get<uint64_t>());
    return it == paths.end() ? "(no such id)" : it->second;
  };
  std::vector<std::string> syscall_files;
  for (const auto& row : JsonRows(dir / "out/syscalls.jsonl")) syscall_files.push_back(path_of(row));
  EXPECT_EQ(syscall_files,
            (std::vector<std::string>{"/work/data/a.bin", "/srv/dir", "/srv/dir/b.bin",
                                      "/work/data/a.bin", "/work/missing.bin", "/work/data/a.bin",
                                      "/srv/dir/b.bin", "/srv/dir/b.bin"}));
  // The page-cache insertion came before the file was named; the files table has its path.
  const auto cache = JsonRows(dir / "out/page_cache.jsonl");
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_EQ(path_of(cache[0]), "/srv/dir/b.bin");
  const auto faults = JsonRows(dir / "out/page_faults.jsonl");
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(path_of(faults[0]), "/work/data/a.bin");
  // Rows without a file have a null id.
  const auto proc = JsonRows(dir / "out/proc.jsonl");
  EXPECT_FALSE(proc[0].contains("file_id"));
  EXPECT_EQ(r->rows.at("files"), paths.size());
  for (const auto& f : JsonRows(dir / "out/files.jsonl")) {
    EXPECT_EQ(f["kind"], "storage") << f.dump();
  }
}

TEST(TableExport, FlagsAreNamedNextToTheirRawValues) {
  ScratchDir dir;
  WritePathTrace(dir / "t.iotwin");
  auto r = ExportTables(dir / "t.iotwin", dir / "out", TableFormat::kJsonl);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, std::vector<nlohmann::json>> by_op;
  for (const auto& row : JsonRows(dir / "out/syscalls.jsonl")) by_op[row["op"]].push_back(row);
  EXPECT_EQ(by_op["openat"][0]["flags"], O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(by_op["openat"][0]["flags_names"], "O_RDONLY|O_CLOEXEC");
  EXPECT_EQ(by_op["openat"][1]["flags_names"], "O_RDONLY|O_DIRECTORY");
  EXPECT_EQ(by_op["openat"][2]["flags_names"], "O_WRONLY|O_CREAT|O_TRUNC");
  EXPECT_EQ(by_op["openat"][2]["mode_names"], "");  // a creation mode is not a flag word
  EXPECT_EQ(by_op["mmap"][0]["flags_names"], "MAP_PRIVATE|MAP_POPULATE");
  EXPECT_EQ(by_op["mmap"][0]["mode_names"], "PROT_READ");
  EXPECT_EQ(by_op["fadvise64"][0]["aux_names"], "POSIX_FADV_DONTNEED");
  EXPECT_EQ(by_op["lseek"][0]["aux_names"], "SEEK_END");
  EXPECT_EQ(by_op["pread64"][0]["flags_names"], "");

  auto c = ExportTables(dir / "t.iotwin", dir / "csv", TableFormat::kCsv);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string csv = ReadFile(dir / "csv/syscalls.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "ts_ns,dur_ns,tgid,tid,cpu,op,ret,fd,fd2,offset,length,aux,aux_names,flags,"
            "flags_names,mode,mode_names,ino,fsize,dev,file_id,path,file2_id,path2,ftype,sflags");
  EXPECT_NE(csv.find(",0,,524288,O_RDONLY|O_CLOEXEC,0,,"), std::string::npos) << csv;
}

TEST(TableExport, FlagNamesDecodeBitsEnumerationsAndRemainders) {
  const FlagNames x86(040000, 0200000);
  EXPECT_EQ(x86.Text(FlagSet::kOpen, O_RDWR | O_DIRECT | O_SYNC), "O_RDWR|O_SYNC|O_DIRECT");
  EXPECT_EQ(x86.Text(FlagSet::kOpen, O_RDONLY | 0x80000000u), "O_RDONLY|0x80000000");
  EXPECT_EQ(x86.Text(FlagSet::kProt, 0), "PROT_NONE");
  EXPECT_EQ(x86.Text(FlagSet::kMsync, 0), "");
  EXPECT_EQ(x86.Text(FlagSet::kWhence, 77), "77");
  EXPECT_EQ(x86.Text(FlagSet::kFadvise, POSIX_FADV_WILLNEED), "POSIX_FADV_WILLNEED");
  EXPECT_EQ(x86.Text(FlagSet::kNone, 5), "");
  // arm64: O_DIRECTORY is 040000 and O_DIRECT 0200000; O_NOFOLLOW moves with them and is left
  // as a number rather than named with the x86 value.
  const FlagNames arm(0200000, 040000);
  EXPECT_EQ(arm.Text(FlagSet::kOpen, 040000), "O_RDONLY|O_DIRECTORY");
  EXPECT_EQ(arm.Text(FlagSet::kOpen, 0200000), "O_RDONLY|O_DIRECT");
  EXPECT_EQ(arm.Text(FlagSet::kOpen, 0100000), "O_RDONLY|0x8000");
  // Every value fits the documented bound.
  EXPECT_LE(x86.Text(FlagSet::kMap, ~uint64_t{0}).size(), FlagNames::kMaxLength);
  EXPECT_LE(x86.Text(FlagSet::kOpen, ~uint64_t{0}).size(), FlagNames::kMaxLength);
}

void WriteIntentTrace(const std::string& path) {
  TraceBuilder b(nlohmann::json::object());
  iot_intent in{};
  in.hdr.type = IOT_REC_INTENT;
  in.hdr.size = sizeof in;
  in.ts = 10;
  in.label_id = b.Str("step");
  b.Add(in);
  b.Call(IOT_OP_READ, 20, 1, 1, 0, 1).length = 1;
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

TEST(TableExport, StaleTablesOfAnotherTraceAreRemoved) {
  ScratchDir dir;
  WriteIntentTrace(dir / "a.iotwin");
  WritePathTrace(dir / "b.iotwin");
  ASSERT_TRUE(ExportTables(dir / "a.iotwin", dir / "out", TableFormat::kCsv).ok());
  ASSERT_TRUE(ExportTables(dir / "a.iotwin", dir / "out", TableFormat::kJsonl).ok());
  ASSERT_TRUE(Exists(dir / "out/intents.csv"));
  { std::FILE* f = std::fopen((dir / "out/notes.txt").c_str(), "w"); std::fclose(f); }

  auto r = ExportTables(dir / "b.iotwin", dir / "out", TableFormat::kCsv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(Exists(dir / "out/intents.csv"));
  EXPECT_EQ(r->removed, std::vector<std::string>{dir / "out/intents.csv"});
  EXPECT_TRUE(Exists(dir / "out/notes.txt"));        // not a table name
  EXPECT_TRUE(Exists(dir / "out/intents.jsonl"));    // the other format is left alone
  EXPECT_TRUE(Exists(dir / "out/page_cache.csv"));
  auto info = nlohmann::json::parse(ReadFile(dir / "out/trace_info.json"));
  EXPECT_FALSE(info["tables"].contains("intents"));
  EXPECT_EQ(PartialFiles(dir / "out"), "");  // no temporary file is left
}

TEST(TableExport, FailedExportLeavesThePreviousTables) {
  ScratchDir dir;
  WriteIntentTrace(dir / "a.iotwin");
  ASSERT_TRUE(ExportTables(dir / "a.iotwin", dir / "out", TableFormat::kCsv).ok());
  const std::string before = ReadFile(dir / "out/syscalls.csv");
  // A trace of many chunks with one damaged in the middle: it opens (header and footer are
  // intact), so the export fails only after its tables were created.
  {
    TraceBuilder b(nlohmann::json::object());
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 60000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      auto& s = b.Call(IOT_OP_PREAD64, 1000 + i, 1, 1 + i % 7, 3, 4096);
      s.offset = x;
      s.length = 4096;
    }
    EXPECT_TRUE(b.WriteFile(dir / "b.iotwin", nlohmann::json::object()).ok());
  }
  std::string bytes = ReadFile(dir / "b.iotwin");
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; i++) bytes[i] ^= 0x5a;
  std::FILE* f = std::fopen((dir / "bad.iotwin").c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  auto opened = TraceReader::Open(dir / "bad.iotwin");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_GE((*opened)->index().size(), 3u);  // the damage is past the first chunk
  auto r = ExportTables(dir / "bad.iotwin", dir / "out", TableFormat::kCsv);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ReadFile(dir / "out/syscalls.csv"), before);
  EXPECT_TRUE(Exists(dir / "out/intents.csv"));
  EXPECT_EQ(PartialFiles(dir / "out"), "");
}

TEST(TableExport, FifoAndDeviceNamesAreWrittenInPlace) {
  ScratchDir dir;
  WriteIntentTrace(dir / "a.iotwin");
  ASSERT_EQ(::mkdir((dir / "out").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("/dev/null", (dir / "out/syscalls.csv").c_str()), 0);
  auto r = ExportTables(dir / "a.iotwin", dir / "out", TableFormat::kCsv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct stat st;
  ASSERT_EQ(::lstat((dir / "out/syscalls.csv").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(r->rows.at("syscalls"), 1u);
}

TEST(TableExport, OutputThatIsNotADirectoryIsRefusedByName) {
  ScratchDir dir;
  WriteIntentTrace(dir / "a.iotwin");
  std::FILE* f = std::fopen((dir / "out").c_str(), "w");
  std::fclose(f);
  auto r = ExportTables(dir / "a.iotwin", dir / "out", TableFormat::kCsv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir / "out"), std::string::npos) << r.status().message();
}

TEST(TableExport, IntegersAtTheirLimitsRoundTrip) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    uint64_t v = 1;
    for (int i = 0; i < 20; i++, v *= 10) {
      const auto ret = static_cast<int64_t>(v / 10);
      auto& s = b.Call(IOT_OP_PREAD64, v - 1, 1, 1, -1, i % 2 ? -ret : ret);
      s.offset = v;
      s.length = UINT64_MAX - i;
    }
    b.Call(IOT_OP_PREAD64, 0, 1, 1, -1, INT64_MIN).offset = 9;
    // Values of every length, by a fixed pseudo-random sequence.
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 2000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b.Call(IOT_OP_PREAD64, x >> (i % 64), 1, 1, -1, 0).offset = x;
    }
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  auto r = ExportTables(dir / "t.iotwin", dir / "out", TableFormat::kJsonl);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto rows = JsonRows(dir / "out/syscalls.jsonl");
  ASSERT_EQ(rows.size(), 2021u);
  uint64_t v = 1;
  for (int i = 0; i < 20; i++, v *= 10) {
    EXPECT_EQ(rows[i]["ts_ns"].get<uint64_t>(), v - 1);
    EXPECT_EQ(rows[i]["offset"].get<uint64_t>(), v);
    EXPECT_EQ(rows[i]["length"].get<uint64_t>(), UINT64_MAX - i);
    const auto ret = static_cast<int64_t>(v / 10);
    EXPECT_EQ(rows[i]["ret"].get<int64_t>(), i % 2 ? -ret : ret);
  }
  EXPECT_EQ(rows[20]["ret"].get<int64_t>(), INT64_MIN);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 2000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ASSERT_EQ(rows[21 + i]["ts_ns"].get<uint64_t>(), x >> (i % 64)) << i;
    ASSERT_EQ(rows[21 + i]["offset"].get<uint64_t>(), x) << i;
  }
}

// Rows are formatted on a second thread, in batches of thousands of records with the strings
// they show: a trace many batches long keeps each table's rows, and their paths, in trace order.
// `records` records: every third a page fault, the others opens of /p/<i % 997>, ts = i.
void WriteManyBatchTrace(const std::string& path, int records) {
  TraceBuilder b(nlohmann::json::object());
  for (int i = 0; i < records; i++) {
    if (i % 3 == 2) {
      iot_page_fault pf{};
      pf.hdr.type = IOT_REC_PAGE_FAULT;
      pf.hdr.size = sizeof pf;
      pf.ts = static_cast<uint64_t>(i);
      pf.tgid = pf.tid = 1;
      pf.pgoff = static_cast<uint64_t>(i);
      b.Add(pf);
    } else {
      auto& s = b.Call(IOT_OP_OPENAT, static_cast<uint64_t>(i), 1, 1, AT_FDCWD, -2);
      s.path_id = b.Str("/p/" + std::to_string(i % 997));
    }
  }
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

TEST(TableExport, RowsSpanningManyBatchesKeepTraceOrder) {
  ScratchDir dir;
  constexpr int kRecords = 40000;
  WriteManyBatchTrace(dir / "t.iotwin", kRecords);
  auto r = ExportTables(dir / "t.iotwin", dir / "out", TableFormat::kCsv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    for (size_t pos = text.find('\n') + 1; pos < text.size();) {  // after the header
      const size_t nl = text.find('\n', pos);
      out.push_back(text.substr(pos, nl - pos));
      pos = nl + 1;
    }
    return out;
  };
  auto field = [](const std::string& line, int index) {
    size_t start = 0;
    for (int i = 0; i < index; i++) start = line.find(',', start) + 1;
    return line.substr(start, line.find(',', start) - start);
  };
  const auto syscalls = lines(ReadFile(dir / "out/syscalls.csv"));
  const auto faults = lines(ReadFile(dir / "out/page_faults.csv"));
  ASSERT_EQ(syscalls.size() + faults.size(), static_cast<size_t>(kRecords));
  size_t s = 0, f = 0;
  for (int i = 0; i < kRecords; i++) {
    if (i % 3 == 2) {
      ASSERT_EQ(field(faults[f], 0), std::to_string(i)) << faults[f];
      ASSERT_EQ(field(faults[f++], 8), std::to_string(i)) << "pgoff";
    } else {
      ASSERT_EQ(field(syscalls[s], 0), std::to_string(i)) << syscalls[s];
      ASSERT_EQ(field(syscalls[s++], 21), "/p/" + std::to_string(i % 997)) << "path";
    }
  }
}

// Restricted to one CPU, the export formats rows on its own thread: the same bytes.
TEST(TableExport, OneCpuFormatsRowsInlineWithTheSameBytes) {
  ScratchDir dir;
  WriteManyBatchTrace(dir / "t.iotwin", 10000);
  for (TableFormat format : {TableFormat::kCsv, TableFormat::kJsonl}) {
    const std::string ext = format == TableFormat::kCsv ? "csv" : "jsonl";
    ASSERT_TRUE(ExportTables(dir / "t.iotwin", dir / ("threads-" + ext), format).ok());
    cpu_set_t all, one;
    ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &one);
        break;
      }
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    auto inline_result = ExportTables(dir / "t.iotwin", dir / ("inline-" + ext), format);
    ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
    ASSERT_TRUE(inline_result.ok()) << inline_result.status().ToString();
    for (const char* table : {"syscalls", "page_faults", "files"}) {
      const std::string name = std::string("/") + table + "." + ext;
      const std::string threaded = ReadFile(dir / ("threads-" + ext) + name);
      EXPECT_FALSE(threaded.empty()) << name;
      EXPECT_EQ(ReadFile(dir / ("inline-" + ext) + name), threaded) << name;
    }
  }
}

}  // namespace
}  // namespace iotwin::interop
