// Record a real multi-threaded, multi-process program, replay it with --record, and compare the
// two traces thread by thread: every replayable op of the original must appear in the replay,
// in order, with the same arguments (100% match). Needs root, BPF and `iotwin record`.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "model/op_fields.h"
#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

// The tracer: this build's iotwin, or IOTWIN_RECORD_BIN (also honoured by replay --record).
std::string RecordBin() {
  const char* b = getenv("IOTWIN_RECORD_BIN");
  return b && *b ? b : IotwinBin();
}

bool RecordAvailable() {
  RunResult r = test::Run({RecordBin(), "record", "--help"}, 30);
  return r.exit_code == 0 && (r.out + r.err).find("not implemented") == std::string::npos;
}

// The comparable form of a replayable syscall: op and arguments, the path relative to its
// sandbox, and the result where it is a count. Descriptor numbers and addresses differ by
// nature and are left out.
std::string Signature(const model::TraceModel& m, const model::Op& op, const std::string& strip) {
  const iot_syscall& sc = op.sc;
  std::ostringstream s;
  s << OpName(sc.op);
  auto path = [&](uint32_t id) {
    std::string p = id == model::kNone ? "" : m.path(id);
    if (!strip.empty() && p.rfind(strip, 0) == 0) p = p.substr(strip.size());
    return p.empty() ? "/" : p;
  };
  if (op.path != model::kNone && sc.op != IOT_OP_SYMLINK && sc.op != IOT_OP_SYMLINKAT) {
    s << " " << path(op.path);
  }
  if (op.path2 != model::kNone) s << " -> " << path(op.path2);
  switch (sc.op) {
    case IOT_OP_MMAP:
      s << " len=" << sc.length << " off=" << sc.offset << " prot=" << sc.mode
        << " flags=" << sc.flags;
      break;
    case IOT_OP_MUNMAP: case IOT_OP_MSYNC: case IOT_OP_MADVISE:
      s << " moff=" << op.map_offset << " len=" << model::MemLength(sc);
      break;
    case IOT_OP_DUP2: case IOT_OP_DUP3: case IOT_OP_CLOSE: case IOT_OP_DUP:
      s << " flags=" << sc.flags;
      break;
    default:
      s << " off=" << sc.offset << " len=" << sc.length << " aux=" << sc.aux
        << " flags=" << sc.flags << " mode=" << ((sc.flags & O_CREAT) || sc.op == IOT_OP_FCNTL ? sc.mode : 0);
  }
  if (model::OpResultIsCount(sc.op)) s << " = " << sc.ret;
  else s << (sc.ret < 0 ? " = -" + std::to_string(-sc.ret) : " = ok");
  for (uint32_t k = 0; k < op.extra_count && (OpIsRead(sc.op) || OpIsWrite(sc.op)); k++) {
    s << (k ? "," : " iov=") << m.ExtraBegin(op)[k];
  }
  return s.str();
}

bool IsAsyncSetup(uint16_t op) {
  return op == IOT_OP_IO_SETUP || op == IOT_OP_IO_URING_SETUP || op == IOT_OP_IO_DESTROY;
}

TEST(ReplayRecord, RecordedReplayMatchesTheOriginalOpByOp) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (!RecordAvailable()) GTEST_SKIP() << "iotwin record is not built on this branch";
  // /var/tmp: a real file system (O_DIRECT-capable, not tmpfs).
  TempDir tmp("iotwin-replay-rec", "/var/tmp");
  ASSERT_TRUE(tmp.ok());
  std::string base = tmp.path(), work = base + "/work", root = base + "/root";
  mkdir(work.c_str(), 0755);
  {
    std::ofstream in(work + "/in.bin", std::ios::binary);
    std::string mb(1 << 20, 'x');
    in << mb;
  }
  std::string orig = base + "/orig.iotwin", rep = base + "/replay.iotwin";
  RunResult rec = test::Run({RecordBin(), "record", "-o", orig, "--", TestProg("replay_mt_prog"), work}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  ASSERT_NE(rec.out.find("main: shared position after child 8192"), std::string::npos) << rec.out;

  auto r = RunReplayCmd({orig, "--root", root, "--pace", "fast", "--record", rep, "--json", "-q"}, 180);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  ASSERT_TRUE(r.summary["record"]["ok"].get<bool>()) << r.summary["record"].dump();

  auto om = model::LoadTraceModel(orig);
  auto rm = model::LoadTraceModel(rep);
  ASSERT_TRUE(om.ok()) << om.status().ToString();
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  EXPECT_EQ(rm.value()->meta()["replay"]["source"], orig);
  EXPECT_EQ(rm.value()->meta()["replay"]["pace"], "fast");

  std::map<uint32_t, uint32_t> worker_of;  // recorded tid -> worker tid
  for (const auto& t : r.summary["thread_map"]) {
    worker_of[t["recorded_tid"].get<uint32_t>()] = t["worker_tid"].get<uint32_t>();
  }
  std::map<uint32_t, std::vector<std::string>> replayed;  // worker tid -> signatures
  for (const auto& th : rm.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall || IsAsyncSetup(op.sc.op)) continue;
      replayed[th.tid].push_back(Signature(*rm.value(), op, root));
    }
  }
  size_t compared = 0, threads = 0;
  for (const auto& th : om.value()->threads()) {
    std::vector<std::string> expect;
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall || op.skip != model::Skip::kReplayable) continue;
      if (IsAsyncSetup(op.sc.op)) continue;
      expect.push_back(Signature(*om.value(), op, ""));
    }
    if (expect.empty()) continue;
    threads++;
    ASSERT_TRUE(worker_of.count(th.tid)) << "no worker for thread " << th.tid;
    const auto& got = replayed[worker_of[th.tid]];
    size_t n = std::min(expect.size(), got.size());
    for (size_t i = 0; i < n; i++) {
      ASSERT_EQ(got[i], expect[i]) << "thread " << th.tid << " op " << i;
    }
    EXPECT_EQ(got.size(), expect.size()) << "thread " << th.tid;
    compared += n;
  }
  EXPECT_GE(threads, 5u);  // main, 3 workers, the child
  EXPECT_GT(compared, 100u);

  // The replay's own window (first to last call issued) is the one compare measures on its
  // recording, give or take the tracer's entry time per call; duration_s also holds the start
  // gate and the teardown.
  RunResult cmp = test::Run({IotwinBin(), "compare", orig, rep, "--json"}, 120);
  nlohmann::json cj = nlohmann::json::parse(cmp.out, nullptr, false);
  ASSERT_TRUE(cj.is_object()) << cmp.err << cmp.out;
  const double compare_window_s = cj["timing"]["window"]["replay"]["ns"].get<double>() / 1e9;
  const double replay_window_s = r.summary["window_s"].get<double>();
  EXPECT_NEAR(replay_window_s, compare_window_s, 0.001 + 0.02 * compare_window_s);
  EXPECT_LE(replay_window_s, r.summary["duration_s"].get<double>());
}

// The dynamic loader maps a library whose segments are aligned beyond the page size MAP_FIXED
// into an anonymous reservation it made first; the reservation is anonymous memory, which replay
// does not recreate. The replayed mmap must still be MAP_FIXED, as recorded.
TEST(ReplayRecord, FixedMappingIntoAnUnreplayedReservationKeepsMapFixed) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (!RecordAvailable()) GTEST_SKIP() << "iotwin record is not built on this branch";
  TempDir tmp;
  const uint64_t kLib = 256 << 10, kAt = 0x7f0000200000;
  TraceBuilder b;
  b.Thread(100, 100);
  b.Mmap(100, -1, 0, 2 * kLib, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, kAt);
  b.Openat(100, "/lib/libaligned.so", O_RDONLY | O_CLOEXEC, 3, kLib);
  b.Read(100, 3, 832, 832, kLib);
  b.Mmap(100, 3, 0, kLib, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE, kAt);
  b.Close(100, 3);
  std::string orig = WriteTrace(b, tmp / "t.iotwin"), rep = tmp / "r.iotwin";
  auto r = RunReplayCmd({orig, "--root", tmp / "root", "--pace", "fast", "--record", rep,
                         "--json", "-q"}, 180);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  auto rm = model::LoadTraceModel(rep);
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  size_t file_maps = 0;
  for (const auto& th : rm.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall || op.sc.op != IOT_OP_MMAP) continue;
      if (op.sc.flags & MAP_ANONYMOUS) continue;
      file_maps++;
      EXPECT_EQ(op.sc.flags, static_cast<uint32_t>(MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE));
      EXPECT_EQ(op.sc.length, kLib);
    }
  }
  EXPECT_EQ(file_maps, 1u);
}

// A workload's drop_caches write is replayed as an eviction of the sandbox's files, made by the
// replayer on a thread of its own: the recording holds the workload's calls only.
TEST(ReplayRecord, PageCacheDropLeavesNoCallsInTheRecording) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (!RecordAvailable()) GTEST_SKIP() << "iotwin record is not built on this branch";
  TempDir tmp;
  TraceBuilder b;
  b.Thread(100, 100);
  for (int i = 0; i < 4; i++) {
    b.Openat(100, "/data/f" + std::to_string(i), O_RDONLY, 3, 64 << 10);
    b.Pread(100, 3, 0, 64 << 10, 64 << 10, 64 << 10);
    b.Close(100, 3);
  }
  b.Openat(100, "/proc/sys/vm/drop_caches", O_WRONLY, 4, 0);
  b.Write(100, 4, 2, 2);
  b.Close(100, 4);
  b.Openat(100, "/data/f0", O_RDONLY, 3, 64 << 10);
  b.Close(100, 3);
  std::string orig = WriteTrace(b, tmp / "t.iotwin"), rep = tmp / "r.iotwin";
  auto r = RunReplayCmd({orig, "--root", tmp / "root", "--pace", "fast", "--record", rep,
                         "--json", "-q"}, 180);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(r.summary["per_op"]["page_cache_drop"]["count"], 1) << r.summary["per_op"].dump();
  EXPECT_EQ(r.summary["per_op"]["page_cache_drop"]["errors"], 0) << r.summary["per_op"].dump();
  auto rm = model::LoadTraceModel(rep);
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  std::map<std::string, int> calls;
  for (const auto& th : rm.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind == model::OpKind::kSyscall) calls[std::string(OpName(op.sc.op))]++;
    }
  }
  EXPECT_EQ(calls["openat"], 5);
  EXPECT_EQ(calls["close"], 5);
  EXPECT_EQ(calls["fadvise64"], 0);
  EXPECT_EQ(calls["getdents64"], 0);
}

// A workload that changes directory (chdir, fchdir), replayed from another directory with a
// relative --record path: the recording lands where the path named when the replay started.
TEST(ReplayRecord, RelativeOutputWhenTheWorkloadChangesDirectory) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (!RecordAvailable()) GTEST_SKIP() << "iotwin record is not built on this branch";
  TempDir tmp("iotwin-replay-relrec", "/var/tmp");
  ASSERT_TRUE(tmp.ok());
  std::string base = tmp.path(), data = base + "/data", out = base + "/out";
  mkdir(data.c_str(), 0755);
  mkdir(out.c_str(), 0755);
  std::string orig = base + "/orig.iotwin";
  RunResult rec = test::Run({RecordBin(), "record", "-o", orig, "--no-status", "--",
                             TestProg("io_relpaths"), base + "/log.jsonl", data}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;

  auto replay_in_out = [&](const std::string& record_arg, const std::string& root) {
    std::string cmd = "cd '" + out + "' && exec '" + IotwinBin() + "' replay '" + orig +
                      "' --root '" + root + "' --pace fast --quiet --json --record '" +
                      record_arg + "'";
    return test::Run({"/bin/sh", "-c", cmd}, 180);
  };
  RunResult ok = replay_in_out("rel.iotwin", base + "/root1");
  ASSERT_EQ(ok.exit_code, 0) << ok.err << ok.out;
  nlohmann::json summary = nlohmann::json::parse(ok.out);
  ASSERT_TRUE(summary["record"]["ok"].get<bool>()) << summary["record"].dump();
  EXPECT_EQ(summary["record"]["path"], out + "/rel.iotwin");
  auto rm = model::LoadTraceModel(out + "/rel.iotwin");
  ASSERT_TRUE(rm.ok()) << rm.status().ToString();
  size_t chdirs = 0;
  for (const auto& th : rm.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind == model::OpKind::kSyscall &&
          (op.sc.op == IOT_OP_CHDIR || op.sc.op == IOT_OP_FCHDIR)) {
        chdirs++;
      }
    }
  }
  EXPECT_GT(chdirs, 0u) << "the recorded replay holds no chdir: the test no longer tests it";

  // A recording that cannot be written stops the replay before it runs, naming the path.
  RunResult bad = replay_in_out("missing-dir/rel.iotwin", base + "/root2");
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_NE(bad.err.find("missing-dir"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
}

}  // namespace
}  // namespace iotwin::test
