// Unit tests of the capture's user-space parts that need no kernel: the syscall table, /proc
// parsing, --uprobe specs and the conversion of ring records into trace records.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "capture/proc_snapshot.h"
#include "capture/recorder.h"
#include "capture/ring_consumer.h"
#include "capture/syscall_table.h"
#include "capture_wire.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "temp_dir.h"

namespace iotwin::capture {
namespace {

TEST(SyscallTable, MapsThisArchitecturesNumbersToOps) {
  std::vector<uint8_t> t = SyscallNrToOp(IOT_NR_MAX);
  EXPECT_EQ(t[SYS_pread64], IOT_OP_PREAD64);
  EXPECT_EQ(t[SYS_openat], IOT_OP_OPENAT);
  EXPECT_EQ(t[SYS_io_uring_enter], IOT_OP_IO_URING_ENTER);
  EXPECT_EQ(t[SYS_getpid], 0);  // not file I/O
  EXPECT_EQ(t[SYS_execve], 0);
  std::set<long> nrs;
  std::set<uint16_t> ops;
  for (const SyscallOp& s : CapturedSyscalls()) {
    EXPECT_TRUE(nrs.insert(s.nr).second) << "syscall " << s.nr << " twice";
    EXPECT_TRUE(ops.insert(s.op).second) << OpName(s.op) << " twice";
    EXPECT_LT(s.nr, IOT_NR_MAX);
    EXPECT_GT(s.op, 0);
    EXPECT_LE(s.op, IOT_OP_MAX);
  }
#if defined(__x86_64__)
  EXPECT_EQ(ops.size(), static_cast<size_t>(IOT_OP_MAX));  // every op exists on x86-64
#endif
}

TEST(ProcSnapshot, ParsesFileMappingsAndSkipsAnonymousOnes) {
  MapEntry m;
  ASSERT_TRUE(
      ParseMapsLine("7f1c2a400000-7f1c2a428000 r--p 00001000 fe:01 1234567    "
                    "/usr/lib/x86_64-linux-gnu/libc.so.6",
                    &m));
  EXPECT_EQ(m.start, 0x7f1c2a400000u);
  EXPECT_EQ(m.end, 0x7f1c2a428000u);
  EXPECT_EQ(m.pgoff, 0x1000u);
  EXPECT_EQ(m.ino, 1234567u);
  EXPECT_EQ(m.dev, (0xfeu << 20) | 1);
  EXPECT_EQ(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(m.prot, 1u);   // PROT_READ
  EXPECT_EQ(m.flags, 2u);  // MAP_PRIVATE
  ASSERT_TRUE(ParseMapsLine("7f00-8f00 rw-s 00000000 00:05 42 /dev/shm/x (deleted)", &m));
  EXPECT_EQ(m.flags, 1u);  // MAP_SHARED
  EXPECT_EQ(m.prot, 3u);
  EXPECT_EQ(m.path, "/dev/shm/x (deleted)");
  EXPECT_FALSE(ParseMapsLine("55d0-55e0 rw-p 00000000 00:00 0    [heap]", &m));
  EXPECT_FALSE(ParseMapsLine("garbage", &m));
}

TEST(ProcSnapshot, SeesItsOwnProcess) {
  EXPECT_TRUE(ProcessExists(getpid()));
  EXPECT_FALSE(ProcessExists(0));
  auto fds = SnapshotFds(getpid());
  ASSERT_TRUE(fds.ok()) << fds.status().ToString();
  EXPECT_FALSE(fds.value().empty());
  auto cwd = ProcessCwd(getpid());
  ASSERT_TRUE(cwd.ok());
  EXPECT_EQ(cwd.value(), std::filesystem::current_path().string());
  EXPECT_EQ(SnapshotFds(2147483).status().code(), Status::Code::kNotFound);
}

TEST(UprobeSpec, ParsesBinaryFunctionAndLabel) {
  auto u = ParseUprobeSpec("/usr/bin/python3:PyEval_EvalCode=eval");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().binary, "/usr/bin/python3");
  EXPECT_EQ(u.value().function, "PyEval_EvalCode");
  EXPECT_EQ(u.value().label, "eval");
  u = ParseUprobeSpec("libc.so.6:fsync");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u.value().label, "fsync");
  EXPECT_FALSE(ParseUprobeSpec("nocolon").ok());
  EXPECT_FALSE(ParseUprobeSpec(":f").ok());
  EXPECT_FALSE(ParseUprobeSpec("bin:").ok());
  EXPECT_FALSE(ParseUprobeSpec("bin:f=").ok());
}

// Feeds ring records to a consumer writing a real trace, then reads the trace back.
class ConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(tmp_.ok());
    path_ = tmp_ / "consumer.iotwin";
    auto w = TraceWriter::Create(path_, nlohmann::json::object());
    ASSERT_TRUE(w.ok());
    writer_ = std::move(w).value();
    consumer_ = std::make_unique<RingConsumer>(writer_.get());
  }

  void Feed(const std::vector<uint8_t>& rec) {
    ASSERT_TRUE(consumer_->Handle(rec.data(), rec.size()).ok());
  }
  std::unique_ptr<TraceReader> Finish() {
    EXPECT_TRUE(writer_->Finish(nlohmann::json::object()).ok());
    auto r = TraceReader::Open(path_);
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  }
  static iot_syscall Syscall(uint16_t op) {
    iot_syscall sc;
    memset(&sc, 0, sizeof sc);
    InitRecord(&sc, IOT_REC_SYSCALL);
    sc.op = op;
    sc.ts = 1000;
    sc.tid = 7;
    sc.tgid = 7;
    return sc;
  }
  static std::vector<uint8_t> Ext(iot_syscall sc, uint16_t l1, uint16_t l2, const std::string& tail,
                                  uint16_t iov_count = 0, uint16_t iov_captured = 0) {
    iot_wire_syscall_ext ext;
    memset(&ext, 0, sizeof ext);
    ext.sc = sc;
    ext.path_len[0] = l1;
    ext.path_len[1] = l2;
    ext.iov_count = iov_count;
    ext.iov_captured = iov_captured;
    std::vector<uint8_t> out(sizeof ext + tail.size());
    ext.sc.hdr.type = IOT_WIRE_SYSCALL_EXT;
    ext.sc.hdr.size = static_cast<uint16_t>(out.size());
    memcpy(out.data(), &ext, sizeof ext);
    memcpy(out.data() + sizeof ext, tail.data(), tail.size());
    return out;
  }
  static std::vector<uint8_t> Intent(const std::string& line,
                                     uint16_t source = IOT_INTENT_SRC_MARKER, uint64_t cookie = 0) {
    iot_wire_intent w;
    memset(&w, 0, sizeof w);
    w.hdr.type = IOT_WIRE_INTENT;
    w.hdr.size = static_cast<uint16_t>(sizeof w + line.size());
    w.len = static_cast<uint16_t>(line.size());
    w.source = source;
    w.ts = 5;
    w.tid = 9;
    w.cookie = cookie;
    std::vector<uint8_t> out(sizeof w + line.size());
    memcpy(out.data(), &w, sizeof w);
    memcpy(out.data() + sizeof w, line.data(), line.size());
    return out;
  }

  // First member, so destroyed last: after the writer, which may still write an unfinished trace.
  test::TempDir tmp_{"iotwin-consumer"};
  std::string path_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<RingConsumer> consumer_;
};

TEST_F(ConsumerTest, PathsAreInternedAndVectorsSplitOff) {
  iot_syscall plain = Syscall(IOT_OP_PREAD64);
  plain.length = 4096;
  std::vector<uint8_t> raw(sizeof plain);
  memcpy(raw.data(), &plain, sizeof plain);
  Feed(raw);
  Feed(Ext(Syscall(IOT_OP_RENAMEAT), 5, 3, "a/b/cxyz"));
  Feed(Ext(Syscall(IOT_OP_OPENAT), 4, IOT_WIRE_NO_PATH, "/tmp"));
  iot_syscall faulted = Syscall(IOT_OP_OPENAT);
  faulted.sflags = IOT_SCF_PATH_FAULT;
  Feed(Ext(faulted, 0, IOT_WIRE_NO_PATH, ""));
  uint64_t lens[2] = {100, 200};
  Feed(Ext(Syscall(IOT_OP_READV), IOT_WIRE_NO_PATH, IOT_WIRE_NO_PATH,
           std::string(reinterpret_cast<const char*>(lens), sizeof lens), 2, 2));
  auto reader = Finish();
  std::vector<iot_syscall> calls;
  std::vector<std::pair<std::string, std::string>> paths;
  std::vector<uint64_t> iov;
  for (;;) {
    auto n = reader->Next();
    ASSERT_TRUE(n.ok());
    if (!n.value()) break;
    const iot_rec_hdr* h = n.value();
    if (h->type == IOT_REC_SYSCALL) {
      calls.push_back(As<iot_syscall>(h));
      paths.emplace_back(reader->String(calls.back().path_id),
                         reader->String(calls.back().path2_id));
    } else if (h->type == IOT_REC_IOVEC) {
      const auto& v = As<iot_iovec>(h);
      EXPECT_EQ(v.count, 2);
      EXPECT_EQ(v.tid, 7u);
      EXPECT_EQ(v.ts, 1000u);
      for (int i = 0; i < v.captured; i++) {
        uint64_t l;
        memcpy(&l, reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec) + 8 * i, 8);
        iov.push_back(l);
      }
    }
  }
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[0].op, IOT_OP_PREAD64);
  EXPECT_EQ(calls[0].length, 4096u);
  EXPECT_EQ(paths[1], std::make_pair(std::string("a/b/c"), std::string("xyz")));
  EXPECT_EQ(paths[2].first, "/tmp");
  EXPECT_EQ(calls[2].path2_id, 0u);
  EXPECT_EQ(calls[3].path_id, 0u);  // unreadable path: no string
  EXPECT_EQ(calls[4].op, IOT_OP_READV);
  EXPECT_EQ(iov, (std::vector<uint64_t>{100, 200}));
  EXPECT_EQ(consumer_->counts().records[IOT_REC_SYSCALL], 5u);
  EXPECT_EQ(consumer_->counts().malformed, 0u);
}

TEST_F(ConsumerTest, MarkerLinesFollowTheProtocol) {
  Feed(Intent("B load\n"));
  Feed(Intent("I step 42\n"));
  Feed(Intent("E load\n"));
  Feed(Intent("I plain"));
  Feed(Intent("X nope\n"));
  Feed(Intent("B \n"));
  Feed(Intent("B a 12\n"));  // only instants carry values
  Feed(Intent("I n 12x\n"));
  Feed(Intent("", IOT_INTENT_SRC_UPROBE, IOT_UPROBE_COOKIE(3, IOT_INTENT_END)));
  auto reader = Finish();
  std::vector<iot_intent> intents;
  std::vector<std::string> labels;
  for (;;) {
    auto n = reader->Next();
    ASSERT_TRUE(n.ok());
    if (!n.value()) break;
    if (n.value()->type == IOT_REC_INTENT) {
      intents.push_back(As<iot_intent>(n.value()));
      labels.emplace_back(reader->String(intents.back().label_id));
    }
  }
  ASSERT_EQ(intents.size(), 5u);
  EXPECT_EQ(intents[0].kind, IOT_INTENT_BEGIN);
  EXPECT_EQ(labels[0], "load");
  EXPECT_EQ(intents[1].kind, IOT_INTENT_INSTANT);
  EXPECT_EQ(intents[1].value, 42u);
  EXPECT_EQ(labels[1], "step");
  EXPECT_EQ(intents[2].kind, IOT_INTENT_END);
  EXPECT_EQ(labels[3], "plain");
  EXPECT_EQ(intents[4].source, IOT_INTENT_SRC_UPROBE);
  EXPECT_EQ(intents[4].kind, IOT_INTENT_END);
  EXPECT_EQ(intents[4].label_id, 3u);
  EXPECT_EQ(consumer_->counts().bad_markers, 4u);
}

TEST_F(ConsumerTest, MalformedRingRecordsAreCountedNotWritten) {
  std::vector<uint8_t> tiny = {1, 0};
  Feed(tiny);
  iot_syscall sc = Syscall(IOT_OP_READ);
  sc.hdr.size = 200;  // claims more than was delivered
  std::vector<uint8_t> raw(sizeof sc);
  memcpy(raw.data(), &sc, sizeof sc);
  Feed(raw);
  Feed(Ext(Syscall(IOT_OP_OPENAT), 50, IOT_WIRE_NO_PATH, "short"));  // path beyond the record
  EXPECT_EQ(consumer_->counts().malformed, 3u);
  EXPECT_EQ(consumer_->counts().records[IOT_REC_SYSCALL], 0u);
}

}  // namespace
}  // namespace iotwin::capture
