// The report takes descriptors, their positions and the processes holding them from the trace
// interpreter (model::TraceState), the one set of rules every consumer follows: close_range with
// CLOSE_RANGE_CLOEXEC marks its descriptors close-on-exec, and the exec that follows closes them,
// so a later call on such a number is no longer the old file's.
#include <linux/close_range.h>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;

constexpr uint32_t kTgid = 100;
constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kIno = 42;
constexpr uint64_t kStart = 1'000'000'000ULL;

iot_syscall Call(uint16_t op, uint64_t ts, int32_t fd, int64_t ret) {
  iot_syscall s{};
  s.hdr.type = IOT_REC_SYSCALL;
  s.hdr.size = sizeof(s);
  s.op = op;
  s.ts = ts;
  s.dur = 1000;
  s.tgid = kTgid;
  s.tid = kTgid;
  s.fd = fd;
  s.fd2 = -1;
  s.ret = ret;
  return s;
}

// A read of 4096 bytes at the position; `ino` 0: the record names no file.
iot_syscall Read(uint64_t ts, int32_t fd, uint64_t recorded_offset, uint64_t ino) {
  iot_syscall s = Call(IOT_OP_READ, ts, fd, 4096);
  s.offset = recorded_offset;
  s.length = 4096;
  s.ino = ino;
  s.dev = ino ? kDev : 0;
  if (!ino) s.sflags = IOT_SCF_NO_FILE;
  return s;
}

json Analyze(const std::vector<iot_syscall>& calls, const std::vector<iot_proc>& procs,
             size_t procs_after) {
  Analyzer a;
  a.SetMeta({{"host", {{"clock", "monotonic"}}}});
  for (size_t i = 0; i < calls.size(); i++) {
    if (i == procs_after)
      for (const iot_proc& p : procs) a.Consume(&p.hdr);
    a.Consume(&calls[i].hdr);
  }
  return a.Model(std::nullopt);
}

TEST(AnalyzerInterpreter, CloseRangeCloexecThenExecClosesTheDescriptor) {
  iot_syscall open = Call(IOT_OP_OPENAT, kStart + 1000, -100, 3);
  open.ino = kIno;
  open.dev = kDev;
  open.ftype = 8;
  iot_syscall mark = Call(IOT_OP_CLOSE_RANGE, kStart + 20'000, 3, 0);
  mark.fd2 = 3;  // close_range(3, 3, CLOSE_RANGE_CLOEXEC)
  mark.flags = CLOSE_RANGE_CLOEXEC;
  iot_proc exec{};
  exec.hdr.type = IOT_REC_PROC;
  exec.hdr.size = sizeof(exec);
  exec.kind = IOT_PROC_EXEC;
  exec.ts = kStart + 30'000;
  exec.tgid = kTgid;
  exec.tid = kTgid;
  // After the exec, number 3 is closed: the read that names no file is nobody's, and its
  // offset is the one recorded, not the old description's position (4096).
  const json m = Analyze({open, Read(kStart + 10'000, 3, 0, kIno), mark,
                          Read(kStart + 40'000, 3, 777, 0)},
                         {exec}, 3);
  EXPECT_EQ(m["offsets"]["tracked"], 1) << m["offsets"];
  EXPECT_EQ(m["offsets"]["recorded"], 1) << m["offsets"];
  EXPECT_EQ(m["offsets"]["tracked_vs_recorded_mismatch"], 0) << m["offsets"];
  EXPECT_EQ(m["totals"]["unattributed_ops"], 1) << m["totals"];
  ASSERT_EQ(m["files"]["rows"].size(), 1u);
  EXPECT_EQ(m["files"]["rows"][0]["read"]["ops"], 1) << m["files"];
}

// Without the mark, the descriptor survives the exec and the read is the file's.
TEST(AnalyzerInterpreter, DescriptorWithoutCloexecSurvivesExec) {
  iot_syscall open = Call(IOT_OP_OPENAT, kStart + 1000, -100, 3);
  open.ino = kIno;
  open.dev = kDev;
  open.ftype = 8;
  iot_proc exec{};
  exec.hdr.type = IOT_REC_PROC;
  exec.hdr.size = sizeof(exec);
  exec.kind = IOT_PROC_EXEC;
  exec.ts = kStart + 30'000;
  exec.tgid = kTgid;
  exec.tid = kTgid;
  const json m = Analyze({open, Read(kStart + 10'000, 3, 0, kIno), Read(kStart + 40'000, 3, 4096, 0)},
                         {exec}, 2);
  EXPECT_EQ(m["offsets"]["tracked"], 2) << m["offsets"];
  EXPECT_EQ(m["totals"]["unattributed_ops"], 0) << m["totals"];
  ASSERT_EQ(m["files"]["rows"].size(), 1u);
  EXPECT_EQ(m["files"]["rows"][0]["read"]["ops"], 2) << m["files"];
}

}  // namespace
}  // namespace iotwin::analysis
