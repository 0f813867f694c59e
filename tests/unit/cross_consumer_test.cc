// Every consumer that answers "which file, which bytes" gives the same answer for the same trace.
//
// Five consumers rebuild descriptors, paths and positions from a trace on their own: TraceState
// (model/trace_state.h), the TraceModel replay works from, the Analyzer behind `report`, the
// strace importer (whose records must mean what a capture's would) and the fio export. Each
// scenario below is one edge case of that state (close_range CLOSE_RANGE_CLOEXEC then exec,
// F_SETFL O_APPEND, a dup2 racing another thread's write, fork and exec, a renamed cwd), given
// as a capture would record it and, where strace can show it, as strace -f -ttt -T prints it.
// Every consumer's answer is, per file with data moved: bytes read, bytes written, and the end
// of the furthest byte moved; it must equal the scenario's truth.
//
// A consumer known to disagree on a scenario is listed in kKnownDisagreements: for it the test
// requires the disagreement (so a fix shows as a failure until the entry is removed) and prints
// both answers. The list is what is left to fix.
#include <gtest/gtest.h>
#include <linux/close_range.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/analyzer.h"
#include "format/op_info.h"
#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"
#include "model/trace_model.h"
#include "model/trace_state.h"
#include "trace_builder.h"

namespace iotwin::cross_consumer_test {
namespace {

using test::TraceBuilder;

// What a consumer says about one file.
struct FileAnswer {
  uint64_t read = 0, written = 0, end = 0;
  bool operator==(const FileAnswer&) const = default;
};
void PrintTo(const FileAnswer& f, std::ostream* os) {
  *os << "{read " << f.read << ", written " << f.written << ", end " << f.end << "}";
}
using Answer = std::map<std::string, FileAnswer>;  // by path

std::string Show(const Answer& a) {
  std::string s;
  for (const auto& [path, f] : a) {
    s += "  " + path + ": read " + std::to_string(f.read) + ", written " +
         std::to_string(f.written) + ", end " + std::to_string(f.end) + "\n";
  }
  return s.empty() ? "  (nothing)\n" : s;
}

void Count(Answer* a, const std::string& path, bool write, uint64_t pos, uint64_t bytes) {
  FileAnswer& f = (*a)[path];
  (write ? f.written : f.read) += bytes;
  f.end = std::max(f.end, pos + bytes);
}

bool MovesData(const iot_syscall& sc) {
  return (OpIsRead(sc.op) || OpIsWrite(sc.op)) && sc.ret > 0 &&
         !(sc.sflags & IOT_SCF_INTERRUPTED);
}

// ---- the scenarios ----------------------------------------------------------------------------

struct Scenario {
  std::string name;
  TraceBuilder trace{test::FullCaptureMeta()};
  std::string strace;  // the same calls as strace prints them; empty: none
  Answer truth;
};

constexpr uint32_t kDev = (8u << 20) | 1;

// The capture's record of a data call: the file's identity and its size after the call, the
// offset the call used (the capture reads it from the position after the call).
iot_syscall& Data(TraceBuilder& b, uint32_t tid, uint16_t op, int fd, uint64_t pos, uint64_t len,
                  uint64_t ino, uint64_t fsize) {
  iot_syscall& r = b.Syscall(tid, op, static_cast<int64_t>(len));
  r.fd = fd;
  r.offset = pos;
  r.length = len;
  r.ino = ino;
  r.dev = kDev;
  r.ftype = 8;
  r.fsize = fsize;
  return r;
}

iot_syscall& Open(TraceBuilder& b, uint32_t tid, std::string_view path, uint32_t flags, int fd,
                  uint64_t ino, uint64_t fsize = 0) {
  iot_syscall& r = b.Openat(tid, path, flags, fd, fsize);
  r.ino = ino;
  r.dev = kDev;
  return r;
}

Scenario CloseRangeCloexecThenExec() {
  Scenario s;
  s.name = "close_range_cloexec_then_exec";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  Open(b, 100, "/s1/a", O_RDWR, 3, 11);
  Open(b, 100, "/s1/b", O_RDWR, 4, 12);
  b.CloseRange(100, 3, ~0u, CLOSE_RANGE_CLOEXEC);
  Data(b, 100, IOT_OP_WRITE, 3, 0, 100, 11, 100);  // still open until the exec
  Open(b, 100, "/s1/e", O_RDWR, 5, 13);
  b.Exec(100, "/bin/next");
  Data(b, 100, IOT_OP_WRITE, 5, 0, 50, 13, 50);  // opened after: kept across the exec
  Open(b, 100, "/s1/f", O_RDWR, 3, 14);          // 3 was closed by the exec
  Data(b, 100, IOT_OP_WRITE, 3, 0, 10, 14, 10);
  s.strace =
      "100 1700000000.000100 openat(AT_FDCWD, \"/s1/a\", O_RDWR) = 3 <0.000001>\n"
      "100 1700000000.000200 openat(AT_FDCWD, \"/s1/b\", O_RDWR) = 4 <0.000001>\n"
      "100 1700000000.000300 close_range(3, 4294967295, CLOSE_RANGE_CLOEXEC) = 0 <0.000001>\n"
      "100 1700000000.000400 write(3, \"\"..., 100) = 100 <0.000001>\n"
      "100 1700000000.000500 openat(AT_FDCWD, \"/s1/e\", O_RDWR) = 5 <0.000001>\n"
      "100 1700000000.000600 execve(\"/bin/next\", [\"next\"], 0x7ffc /* 3 vars */) = 0 "
      "<0.000010>\n"
      "100 1700000000.000700 write(5, \"\"..., 50) = 50 <0.000001>\n"
      "100 1700000000.000800 openat(AT_FDCWD, \"/s1/f\", O_RDWR) = 3 <0.000001>\n"
      "100 1700000000.000900 write(3, \"\"..., 10) = 10 <0.000001>\n";
  s.truth = {{"/s1/a", {0, 100, 100}}, {"/s1/e", {0, 50, 50}}, {"/s1/f", {0, 10, 10}}};
  return s;
}

// O_APPEND set by F_SETFL: every write lands at the file's end, wherever lseek put the position.
Scenario SetflAppendThenWrites() {
  Scenario s;
  s.name = "setfl_append_then_writes";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  Open(b, 100, "/s2/log", O_WRONLY | O_CREAT | O_TRUNC, 3, 21);
  Data(b, 100, IOT_OP_WRITE, 3, 0, 10, 21, 10);
  b.Fcntl(100, 3, F_SETFL, O_APPEND, 0);
  b.Lseek(100, 3, 0, SEEK_SET, 0);
  Data(b, 100, IOT_OP_WRITE, 3, 10, 10, 21, 20);  // at the end, not at 0
  Data(b, 100, IOT_OP_WRITE, 3, 20, 10, 21, 30);
  s.strace =
      "100 1700000000.000100 openat(AT_FDCWD, \"/s2/log\", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3 "
      "<0.000001>\n"
      "100 1700000000.000200 write(3, \"\"..., 10) = 10 <0.000001>\n"
      "100 1700000000.000300 fcntl(3, F_SETFL, O_WRONLY|O_APPEND) = 0 <0.000001>\n"
      "100 1700000000.000350 lseek(3, 0, SEEK_SET) = 0 <0.000001>\n"
      "100 1700000000.000400 write(3, \"\"..., 10) = 10 <0.000001>\n"
      "100 1700000000.000500 write(3, \"\"..., 10) = 10 <0.000001>\n";
  s.truth = {{"/s2/log", {0, 30, 30}}};
  return s;
}

// Thread 101's write of fd 5 starts before thread 100's dup2(3, 5) and ends after it: the
// kernel took the file at the write's start (/s3/y). Records come in the order calls end.
Scenario Dup2RacesAWrite() {
  Scenario s;
  s.name = "dup2_races_a_write";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  b.NewThread(100, 101);
  Open(b, 100, "/s3/x", O_RDWR, 3, 31);
  Open(b, 100, "/s3/y", O_RDWR, 5, 32);
  const uint64_t t0 = b.now();
  b.SetTime(t0 + 1000);
  b.Dup2(100, 3, 5, 5).dur = 1000;  // ends at t0 + 2 us
  b.SetTime(t0);
  Data(b, 101, IOT_OP_WRITE, 5, 0, 20, 32, 20).dur = 100'000;  // ends at t0 + 100 us
  b.SetTime(t0 + 200'000);
  Data(b, 101, IOT_OP_WRITE, 5, 0, 30, 31, 30);  // after the dup2: /s3/x
  s.strace =
      "100 1700000000.000100 openat(AT_FDCWD, \"/s3/x\", O_RDWR) = 3 <0.000001>\n"
      "100 1700000000.000200 openat(AT_FDCWD, \"/s3/y\", O_RDWR) = 5 <0.000001>\n"
      "100 1700000000.000250 clone(child_stack=0x7f00, flags=CLONE_VM|CLONE_FS|CLONE_FILES|"
      "CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 101 <0.000010>\n"
      "101 1700000000.000300 write(5, \"\"..., 20 <unfinished ...>\n"
      "100 1700000000.000301 dup2(3, 5) = 5 <0.000001>\n"
      "101 1700000000.000400 <... write resumed>) = 20 <0.000100>\n"
      "101 1700000000.000500 write(5, \"\"..., 30) = 30 <0.000001>\n";
  s.truth = {{"/s3/y", {0, 20, 20}}, {"/s3/x", {0, 30, 30}}};
  return s;
}

// Thread 101's write of fd 5 starts before thread 100 closes 5 and opens another file on it;
// the write ends last, so it is recorded after both. The kernel took /s6/y at the write's start.
Scenario CloseReopenRacesAWrite() {
  Scenario s;
  s.name = "close_reopen_races_a_write";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  b.NewThread(100, 101);
  Open(b, 100, "/s6/y", O_RDWR, 5, 62);
  const uint64_t t0 = b.now();
  b.SetTime(t0 + 1000);
  b.Close(100, 5).dur = 1000;
  b.SetTime(t0 + 3000);
  Open(b, 100, "/s6/z", O_RDWR, 5, 63).dur = 1000;
  b.SetTime(t0);
  Data(b, 101, IOT_OP_WRITE, 5, 0, 20, 62, 20).dur = 100'000;  // ends at t0 + 100 us
  b.SetTime(t0 + 200'000);
  Data(b, 101, IOT_OP_WRITE, 5, 0, 30, 63, 30);  // after the reopen: /s6/z
  s.truth = {{"/s6/y", {0, 20, 20}}, {"/s6/z", {0, 30, 30}}};
  return s;
}

// A child shares its parent's open file descriptions (and positions); exec closes only the
// close-on-exec descriptors.
Scenario ForkExecInherits() {
  Scenario s;
  s.name = "fork_exec_inherits";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  Open(b, 100, "/s4/in", O_RDONLY, 3, 41, 10000);
  Open(b, 100, "/s4/cl", O_RDONLY | O_CLOEXEC, 4, 42, 10000);
  b.Fork(100, 200);
  b.Exec(200, "/bin/child");
  Data(b, 200, IOT_OP_READ, 3, 0, 4096, 41, 10000);
  Data(b, 100, IOT_OP_READ, 3, 4096, 100, 41, 10000);  // the shared position
  Open(b, 200, "/s4/n", O_RDONLY, 4, 43, 100);         // 4 was closed by the exec
  Data(b, 200, IOT_OP_READ, 4, 0, 10, 43, 100);
  s.strace =
      "100 1700000000.000100 openat(AT_FDCWD, \"/s4/in\", O_RDONLY) = 3 <0.000001>\n"
      "100 1700000000.000200 openat(AT_FDCWD, \"/s4/cl\", O_RDONLY|O_CLOEXEC) = 4 <0.000001>\n"
      "100 1700000000.000300 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|"
      "CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f00) = 200 <0.000010>\n"
      "200 1700000000.000400 execve(\"/bin/child\", [\"child\"], 0x7ffc /* 3 vars */) = 0 "
      "<0.000010>\n"
      "200 1700000000.000500 read(3, \"\"..., 4096) = 4096 <0.000001>\n"
      "100 1700000000.000600 read(3, \"\"..., 100) = 100 <0.000001>\n"
      "200 1700000000.000700 openat(AT_FDCWD, \"/s4/n\", O_RDONLY) = 4 <0.000001>\n"
      "200 1700000000.000800 read(4, \"\"..., 10) = 10 <0.000001>\n";
  s.truth = {{"/s4/in", {4196, 0, 4196}}, {"/s4/n", {10, 0, 10}}};
  return s;
}

// The cwd's directory renamed: a relative open resolves below its new name.
Scenario RenamedCwd() {
  Scenario s;
  s.name = "renamed_cwd";
  TraceBuilder& b = s.trace;
  b.Attach(100, "/");
  b.PathOp(100, IOT_OP_CHDIR, "/s5/w", 0);
  b.Path2Op(100, IOT_OP_RENAME, "/s5/w", "/s5/w2");
  Open(b, 100, "f", O_WRONLY | O_CREAT, 3, 51);
  Data(b, 100, IOT_OP_WRITE, 3, 0, 10, 51, 10);
  s.strace =
      "100 1700000000.000100 chdir(\"/s5/w\") = 0 <0.000001>\n"
      "100 1700000000.000200 rename(\"/s5/w\", \"/s5/w2\") = 0 <0.000001>\n"
      "100 1700000000.000300 openat(AT_FDCWD, \"f\", O_WRONLY|O_CREAT, 0644) = 3 <0.000001>\n"
      "100 1700000000.000400 write(3, \"\"..., 10) = 10 <0.000001>\n";
  s.truth = {{"/s5/w2/f", {0, 10, 10}}};
  return s;
}

std::vector<Scenario> Scenarios() {
  std::vector<Scenario> v;
  v.push_back(CloseRangeCloexecThenExec());
  v.push_back(SetflAppendThenWrites());
  v.push_back(Dup2RacesAWrite());
  v.push_back(CloseReopenRacesAWrite());
  v.push_back(ForkExecInherits());
  v.push_back(RenamedCwd());
  return v;
}

// ---- the consumers ----------------------------------------------------------------------------

using RecordVisitor = std::function<void(const std::function<void(const iot_rec_hdr*)>&)>;
using StringLookup = std::function<std::optional<std::string_view>(uint32_t)>;

// TraceState fed the records in their order.
Answer FromTraceState(const RecordVisitor& records, const StringLookup& text) {
  model::TraceState state;
  Answer a;
  records([&](const iot_rec_hdr* h) {
    if (h->type == IOT_REC_SYSCALL) {
      const auto& sc = *reinterpret_cast<const iot_syscall*>(h);
      const OpInfo& info = GetOpInfo(sc.op);
      std::optional<std::string_view> p1, p2;
      if (info.path != PathRole::kNone) p1 = text(sc.path_id);
      if (info.path2 != PathRole::kNone) p2 = text(sc.path2_id);
      const model::SyscallEffect e = state.OnSyscall(sc, p1, p2);
      if (MovesData(sc)) {
        const model::OpenFileDescription* d = state.Description(e.desc);
        Count(&a, d ? d->path : "?", OpIsWrite(sc.op), e.pos, static_cast<uint64_t>(sc.ret));
      }
    } else if (h->type == IOT_REC_PROC) {
      const auto& p = *reinterpret_cast<const iot_proc*>(h);
      state.OnProc(p, text(p.path_id));
    } else {
      state.NextRecord();
    }
  });
  return a;
}

Answer FromTraceStateOfTrace(const TraceBuilder& b) {
  std::map<uint32_t, std::string> strings;
  b.ForEach([&](const iot_rec_hdr* h) {
    if (h->type != IOT_REC_STRING) return;
    const auto* s = reinterpret_cast<const iot_string*>(h);
    strings[s->id] = std::string(reinterpret_cast<const char*>(s + 1), s->len);
  });
  return FromTraceState([&](const auto& fn) { b.ForEach(fn); },
                        [&](uint32_t id) -> std::optional<std::string_view> {
                          auto it = strings.find(id);
                          if (it == strings.end()) return std::nullopt;
                          return std::string_view(it->second);
                        });
}

Answer FromModel(const TraceBuilder& b) {
  model::ModelBuilder mb;
  mb.SetMeta(nlohmann::json::object());
  Answer a;
  if (!b.Feed(mb).ok()) return {{"<model failed>", {}}};
  auto m = mb.Finish();
  if (!m.ok()) return {{"<model failed>", {}}};
  const model::TraceModel& model = **m;
  for (const model::Thread& t : model.threads()) {
    for (const model::Op& op : t.ops) {
      if (op.kind != model::OpKind::kSyscall || !MovesData(op.sc)) continue;
      std::string path = "?";
      if (op.file != model::kNone && model.files()[op.file].path != model::kNone) {
        path = model.path(model.files()[op.file].path);
      }
      Count(&a, path, OpIsWrite(op.sc.op), op.pos, static_cast<uint64_t>(op.sc.ret));
    }
  }
  return a;
}

Answer FromAnalyzer(const TraceBuilder& b) {
  analysis::AnalyzerOptions o;
  o.top = 0;
  analysis::Analyzer an(std::move(o));
  an.SetMeta(test::FullCaptureMeta());
  b.ForEach([&](const iot_rec_hdr* h) { an.Consume(h); });
  const nlohmann::json m = an.Model(std::nullopt);
  Answer a;
  for (const auto& row : m["files"]["rows"]) {
    const uint64_t read = row["read"]["bytes"], written = row["write"]["bytes"];
    if (read == 0 && written == 0) continue;
    // The names a file was opened by, as recorded and resolved: the absolute one answers.
    std::string path = "?";
    for (const auto& name : row["names"]) {
      if (path == "?" || name.get<std::string>().starts_with('/')) path = name;
      if (path.starts_with('/')) break;
    }
    a[path] = FileAnswer{read, written, row["max_end"].get<uint64_t>()};
  }
  return a;
}

// The importer's records, read as a capture's are (by TraceState).
Answer FromStraceImport(const std::string& text) {
  interop::testing::ImportOutcome out;
  interop::testing::ImportText(&out, interop::ImportFormat::kStrace, text);
  if (!out.status.ok()) return {{"<import failed: " + out.status.ToString() + ">", {}}};
  const interop::MemorySink& sink = out.sink;
  return FromTraceState(
      [&](const auto& fn) {
        for (const auto& r : sink.records()) {
          std::vector<uint8_t> buf(r);
          const auto* h = reinterpret_cast<const iot_rec_hdr*>(r.data());
          buf.resize(std::max<size_t>(buf.size(), RecordFixedSize(h->type)), 0);
          fn(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
        }
      },
      [&](uint32_t id) -> std::optional<std::string_view> {
        if (id == 0) return std::nullopt;
        return sink.String(id);
      });
}

Answer FromFioExport(const TraceBuilder& b) {
  interop::testing::ScratchDir dir;
  const std::string trace = dir.path() + "/trace.iot";
  if (!b.WriteFile(trace).ok()) return {{"<write failed>", {}}};
  interop::FioExportOptions o;
  o.dir = dir.path() + "/fio";
  auto r = interop::ExportFio(trace, o);
  if (!r.ok()) return {{"<export failed: " + r.status().ToString() + ">", {}}};
  Answer a;
  for (const interop::FioFileResult& f : r->per_file) {
    if (f.read_bytes == 0 && f.write_bytes == 0) continue;
    a[f.original] = FileAnswer{f.read_bytes, f.write_bytes, f.extent};
  }
  return a;
}

// ---- the test ---------------------------------------------------------------------------------

// (scenario, consumer) pairs that disagree with the truth today. Each fix removes its line.
const std::set<std::pair<std::string, std::string>> kKnownDisagreements = {
};

TEST(CrossConsumer, EveryConsumerGivesTheSameFilesBytesAndEnds) {
  for (Scenario& s : Scenarios()) {
    std::vector<std::pair<std::string, Answer>> answers;
    answers.emplace_back("trace_state", FromTraceStateOfTrace(s.trace));
    answers.emplace_back("model", FromModel(s.trace));
    answers.emplace_back("analyzer", FromAnalyzer(s.trace));
    if (!s.strace.empty()) answers.emplace_back("strace_import", FromStraceImport(s.strace));
    answers.emplace_back("fio_export", FromFioExport(s.trace));
    for (const auto& [consumer, answer] : answers) {
      const bool known = kKnownDisagreements.count({s.name, consumer}) != 0;
      const std::string detail = s.name + " / " + consumer + "\n truth:\n" + Show(s.truth) +
                                 " " + consumer + ":\n" + Show(answer);
      if (known) {
        EXPECT_NE(answer, s.truth) << "now agrees, remove it from kKnownDisagreements: " << detail;
      } else {
        EXPECT_EQ(answer, s.truth) << detail;
      }
    }
  }
}

}  // namespace
}  // namespace iotwin::cross_consumer_test
