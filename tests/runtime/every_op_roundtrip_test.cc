// Capture -> model -> replay for every IOT_OP_*: tests/progs/io_every_op makes each call and logs
// it; the test checks that each op is captured with the logged fields, that the model keeps
// every call the op table says replay re-issues as replayable, and that `iotwin replay
// --record` issues it again with the same arguments. Ops the table says replay does not
// re-issue are listed as such; their requests (io_uring, libaio) are compared as ASYNC_IO
// records. The failure message lists each op that fails, and why.
#include <sys/stat.h>

#include <map>
#include <set>
#include <sstream>

#include "format/op_info.h"
#include "model/op_fields.h"
#include "model/trace_model.h"
#include "record_check.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

constexpr int kBeginMark = -1001, kEndMark = -1002;  // tests/progs/prog_log.h

// The comparable form of a syscall: op, paths relative to their root, the file read or written,
// the argument fields the op table names (addresses and descriptor numbers differ by nature),
// flags and, for counts, the result.
std::string Signature(const model::TraceModel& m, const model::Op& op, const std::string& root) {
  const iot_syscall& sc = op.sc;
  const OpInfo& info = GetOpInfo(sc.op);
  auto rel = [&](uint32_t id) {
    std::string p = id == model::kNone ? "" : m.path(id);
    if (!root.empty() && p.rfind(root, 0) == 0) p = p.substr(root.size());
    return p;
  };
  std::ostringstream s;
  s << info.name;
  if (info.path == PathRole::kResolved) s << " " << rel(op.path);
  if (info.path2 == PathRole::kResolved) s << " -> " << rel(op.path2);
  if (op.file != model::kNone && m.files()[op.file].path != model::kNone) {
    s << " file=" << rel(m.files()[op.file].path);
  }
  // The record's file identity is the file behind `fd` (docs/trace-format.md): for a copy whose
  // `fd` is not the data descriptor (sendfile's out_fd), this names the other file.
  if (info.fd == FdRole::kReadFrom || info.fd == FdRole::kWriteTo) {
    std::string behind_fd = "?";
    for (const auto& f : m.files()) {
      if (f.ino == sc.ino && f.dev == sc.dev && f.path != model::kNone) behind_fd = rel(f.path);
    }
    s << " fd=" << behind_fd;
  }
  auto field = [&](const char* name, FieldUse use, uint64_t v) {
    switch (use) {
      case FieldUse::kUnused:
      case FieldUse::kAddress:
      case FieldUse::kAddressHint:
      case FieldUse::kOldAddress:
      case FieldUse::kCommand:
        return;
      default:
        s << " " << name << "=" << v;
    }
  };
  field("offset", info.offset, sc.offset);
  field("length", info.length, sc.length);
  field("aux", info.aux, sc.aux);
  if (info.family == OpFamily::kMemory && sc.op != IOT_OP_MMAP) s << " moff=" << op.map_offset;
  s << " flags=" << sc.flags;
  if (model::OpResultIsCount(sc.op))
    s << " = " << sc.ret;
  else
    s << (sc.ret < 0 ? " = -" + std::to_string(-sc.ret) : " = ok");
  return s.str();
}

// The model's ops of each thread between the program's brackets (prog_log.h), by recorded tid.
std::map<uint32_t, std::vector<const model::Op*>> BracketedOps(const model::TraceModel& m) {
  std::map<uint32_t, std::vector<const model::Op*>> out;
  for (const auto& th : m.threads()) {
    bool inside = false;
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall && op.kind != model::OpKind::kAsyncSubmit) continue;
      if (op.kind == model::OpKind::kSyscall && op.sc.op == IOT_OP_CLOSE) {
        if (op.sc.fd == kBeginMark) {
          inside = true;
          continue;
        }
        if (op.sc.fd == kEndMark) {
          inside = false;
          continue;
        }
      }
      if (inside) out[th.tid].push_back(&op);
    }
  }
  return out;
}

struct Problems {
  std::map<std::string, std::set<std::string>> by_op;
  void Add(std::string_view op, const std::string& why) { by_op[std::string(op)].insert(why); }
  std::string Text() const {
    std::string t;
    for (const auto& [op, whys] : by_op) {
      for (const auto& w : whys) t += "  " + op + ": " + w + "\n";
    }
    return t;
  }
};

TEST(EveryOpRoundTrip, EveryOpIsCapturedModelledAndReplayed) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  // /var/tmp: a real file system (fallocate, sync_file_range, O_DIRECT-capable), not tmpfs.
  TempDir tmp("iotwin-every-op", "/var/tmp");  // IOTWIN_KEEP_TEST_FILES=1 keeps it
  ASSERT_TRUE(tmp.ok());
  const std::string base = tmp.path(), work = base + "/work", root = base + "/root";
  mkdir(work.c_str(), 0755);
  const std::string orig = base + "/orig.iotwin", rep = base + "/replay.iotwin";
  const std::string log_path = base + "/calls.log";
  RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", orig, "--", TestProg("io_every_op"), log_path, work}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  const std::vector<nlohmann::json> log = ReadLog(log_path);
  ASSERT_FALSE(log.empty());
  Problems problems;

  // 1. Every op is exercised (or the kernel refused it) and captured with the logged fields.
  std::set<std::string> logged, unavailable;
  for (const auto& e : log) {
    if (e.contains("op")) logged.insert(e["op"].get<std::string>());
    if (e.value("kind", "") == "unavailable") unavailable.insert(e["name"].get<std::string>());
  }
  for (uint16_t op = 1; op <= IOT_OP_MAX; op++) {
    const std::string name(OpName(op));
    if (!logged.count(name) && !unavailable.count(name)) {
      problems.Add(name, "not made by io_every_op");
    }
  }
  LoadedTrace trace = LoadTrace(orig);
  ASSERT_TRUE(trace.error.empty()) << trace.error;
  for (const std::string& p : CompareCalls(log, trace)) {
    // "tid T call N (op): ..." or "... logged op, recorded other": file it under the logged op.
    std::string op = "?";
    size_t open = p.find('(');
    if (open != std::string::npos)
      op = p.substr(open + 1, p.find(')', open) - open - 1);
    else if (size_t l = p.find("logged "); l != std::string::npos) {
      op = p.substr(l + 7, p.find(',', l) - l - 7);
    } else if (size_t mi = p.find(" missing"); mi != std::string::npos) {
      op = p.substr(p.rfind(' ', mi - 1) + 1, mi - p.rfind(' ', mi - 1) - 1);
    }
    problems.Add(op, "capture: " + p);
  }

  // 2. The model keeps each op that replay re-issues replayable.
  auto om = model::LoadTraceModel(orig);
  ASSERT_TRUE(om.ok()) << om.status().ToString();
  const model::TraceModel& m = *om.value();
  auto bracketed = BracketedOps(m);
  std::set<std::string> not_reissued;
  size_t async_requests = 0;
  for (const auto& [tid, ops] : bracketed) {
    for (const model::Op* op : ops) {
      if (op->kind == model::OpKind::kAsyncSubmit) {
        async_requests++;
        if (op->skip != model::Skip::kReplayable) {
          problems.Add(AsyncOp(op->aio.engine, op->aio.opcode).name,
                       "async request modelled as " + std::string(model::SkipName(op->skip)));
        }
        continue;
      }
      const OpInfo& info = GetOpInfo(op->sc.op);
      if (info.replay != OpReplay::kReissued) {
        not_reissued.insert(std::string(info.name));
        continue;
      }
      if (op->skip != model::Skip::kReplayable) {
        problems.Add(info.name, "modelled as " + std::string(model::SkipName(op->skip)) + " (" +
                                    Signature(m, *op, "") + ")");
      }
    }
  }

  // 3. Replay issues each again, in order, with the same arguments.
  auto r =
      RunReplayCmd({orig, "--root", root, "--pace", "fast", "--record", rep, "--json", "-q"}, 180);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  auto rm = model::LoadTraceModel(rep);
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  std::map<uint32_t, uint32_t> worker_of;
  for (const auto& t : r.summary["thread_map"]) {
    worker_of[t["recorded_tid"].get<uint32_t>()] = t["worker_tid"].get<uint32_t>();
  }
  std::map<uint32_t, std::vector<std::string>> replayed;  // worker tid -> signatures
  std::multiset<std::string> replayed_async, recorded_async;
  for (const auto& th : rm.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind == model::OpKind::kAsyncSubmit) {
        replayed_async.insert(fmt::format("{} len={} off={}",
                                          AsyncOp(op.aio.engine, op.aio.opcode).name, op.aio.length,
                                          op.aio.offset));
      }
      if (op.kind != model::OpKind::kSyscall) continue;
      if (GetOpInfo(op.sc.op).replay != OpReplay::kReissued) continue;
      replayed[th.tid].push_back(Signature(*rm.value(), op, root));
    }
  }
  for (const auto& [tid, ops] : bracketed) {
    ASSERT_TRUE(worker_of.count(tid)) << "no replay worker for thread " << tid;
    const auto& got = replayed[worker_of[tid]];
    size_t next = 0;
    for (const model::Op* op : ops) {
      if (op->kind == model::OpKind::kAsyncSubmit) {
        recorded_async.insert(fmt::format("{} len={} off={}",
                                          AsyncOp(op->aio.engine, op->aio.opcode).name,
                                          op->aio.length, op->aio.offset));
        continue;
      }
      if (GetOpInfo(op->sc.op).replay != OpReplay::kReissued) continue;
      if (op->skip != model::Skip::kReplayable) continue;  // reported above
      const std::string want = Signature(m, *op, "");
      size_t k = next;
      while (k < got.size() && got[k] != want) k++;
      if (k < got.size()) {
        next = k + 1;
        continue;
      }
      std::string near = "nothing";
      for (size_t j = next; j < got.size(); j++) {
        if (got[j].rfind(std::string(OpName(op->sc.op)) + " ", 0) == 0) {
          near = got[j];
          break;
        }
      }
      problems.Add(OpName(op->sc.op),
                   "replay: want \"" + want + "\", next replayed: \"" + near + "\"");
    }
  }
  for (const auto& a : recorded_async) {
    if (replayed_async.count(a) < recorded_async.count(a)) {
      problems.Add(a.substr(0, a.find(' ')), "async request not replayed: " + a);
    }
  }

  std::string unavailable_text;
  for (const auto& u : unavailable) unavailable_text += " " + u;
  std::string not_reissued_text;
  for (const auto& n : not_reissued) not_reissued_text += " " + n;
  EXPECT_TRUE(problems.by_op.empty())
      << "ops that fail the round trip:\n"
      << problems.Text() << "not re-issued by replay (op table):" << not_reissued_text
      << "\nrefused by this kernel:" << unavailable_text;
  EXPECT_GT(async_requests, 0u) << "no io_uring or libaio request in the trace";
}

}  // namespace
}  // namespace iotwin::test
