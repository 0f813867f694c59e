// The report follows what changes a descriptor's open file after the open: F_SETFL turns O_DIRECT
// (and O_APPEND) on and off for every descriptor of the description, and exec closes the
// close-on-exec descriptors (O_CLOEXEC at open, FD_CLOEXEC by F_SETFD), after which a call on the
// number uses its recorded offset, not the closed file's position. A close that fails otherwise
// than with EBADF still releases the number, and dup2 from a descriptor the trace never opened
// leaves the target unknown.
#include <fcntl.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor

json Analyze(const TraceBuilder& t) {
  Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

void Fcntl(TraceBuilder& t, uint64_t ts, int fd, int cmd, uint64_t arg) {
  iot_syscall s = TraceBuilder::Sys(IOT_OP_FCNTL, 100, ts);
  s.fd = fd;
  s.mode = static_cast<uint32_t>(cmd);
  s.aux = arg;
  s.ret = 0;
  t.Add(s);
}

TEST(AnalyzerDescriptorFlags, SetflODirectMakesLaterReadsDirect) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(100, kStart + 1000, "/data/f", 3, kDev, 42, O_RDONLY);
  t.Io(IOT_OP_READ, 100, kStart + 10'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  Fcntl(t, kStart + 20'000, 3, F_SETFL, O_DIRECT);
  t.Io(IOT_OP_READ, 100, kStart + 30'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  t.Io(IOT_OP_READ, 100, kStart + 40'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  Fcntl(t, kStart + 50'000, 3, F_SETFL, 0);
  t.Io(IOT_OP_READ, 100, kStart + 60'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  json m = Analyze(t);
  EXPECT_EQ(m["totals"]["direct_ops"], 2);
  EXPECT_EQ(m["totals"]["direct_bytes"], 8192);
}

TEST(AnalyzerDescriptorFlags, ExecClosesCloexecDescriptors) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(100, kStart + 1000, "/data/a", 3, kDev, 42, O_RDONLY | O_CLOEXEC);
  t.Open(100, kStart + 2000, "/data/b", 4, kDev, 43, O_RDONLY);
  t.Open(100, kStart + 3000, "/data/c", 5, kDev, 44, O_RDONLY);
  Fcntl(t, kStart + 4000, 4, F_SETFD, FD_CLOEXEC);
  for (int fd : {3, 4, 5})
    t.Io(IOT_OP_READ, 100, kStart + 10'000 + fd, 1000, fd, kDev, 39 + fd, 0, 4096, 4096);
  t.ProcAt(IOT_PROC_EXEC, kStart + 20'000, 100, 100, "next");
  // After the exec: 3 and 4 are gone (their reads take the recorded offset), 5 is still open.
  for (int fd : {3, 4, 5})
    t.Io(IOT_OP_READ, 100, kStart + 30'000 + fd, 1000, fd, kDev, 39 + fd, 0, 4096, 4096);
  json m = Analyze(t);
  EXPECT_EQ(m["offsets"]["tracked"], 4);   // three before the exec, fd 5 after
  EXPECT_EQ(m["offsets"]["recorded"], 2);  // fds 3 and 4 after the exec
}

TEST(AnalyzerDescriptorFlags, FailedCloseStillReleasesTheNumber) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(100, kStart + 1000, "/data/a", 3, kDev, 42, O_RDONLY);
  t.Io(IOT_OP_READ, 100, kStart + 10'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  iot_syscall c = TraceBuilder::Sys(IOT_OP_CLOSE, 100, kStart + 20'000);
  c.fd = 3;
  c.ret = -EIO;
  t.Add(c);
  t.Io(IOT_OP_READ, 100, kStart + 30'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  json m = Analyze(t);
  EXPECT_EQ(m["offsets"]["tracked"], 1);
  EXPECT_EQ(m["offsets"]["recorded"], 1);  // the read after the close
}

TEST(AnalyzerDescriptorFlags, Dup2FromAnUnknownDescriptorForgetsTheTarget) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(100, kStart + 1000, "/data/a", 3, kDev, 42, O_RDONLY);
  t.Io(IOT_OP_READ, 100, kStart + 10'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  iot_syscall d = TraceBuilder::Sys(IOT_OP_DUP2, 100, kStart + 20'000);
  d.fd = 9;  // never opened in the trace (inherited, say)
  d.fd2 = 3;
  d.ret = 3;
  t.Add(d);
  t.Io(IOT_OP_READ, 100, kStart + 30'000, 1000, 3, kDev, 42, 0, 4096, 4096);
  json m = Analyze(t);
  EXPECT_EQ(m["offsets"]["tracked"], 1);
  EXPECT_EQ(m["offsets"]["recorded"], 1);  // fd 3 now refers to fd 9's unknown file
}

}  // namespace
}  // namespace iotwin::analysis
