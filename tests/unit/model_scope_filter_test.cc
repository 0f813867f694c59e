// ScopeRecordFilter (model/scope_filter.h): the records `record --scope` leaves out, judged on
// names resolved against the cwd and dirfds.
#include <fcntl.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trace_builder.h"
#include "model/scope_filter.h"

namespace iotwin::model {
namespace {

using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;

iot_syscall Call(uint16_t op, uint64_t ts, int fd, uint64_t ino, int64_t ret) {
  iot_syscall s = TraceBuilder::Sys(op, 1, ts);
  s.fd = fd;
  s.dev = kDev;
  s.ino = ino;
  s.ftype = 8;
  s.ret = ret;
  return s;
}

// Attached in /w: opens data/a.bin (relative, fd 3) and lib/x.so.1 (relative, fd 4), reads
// both, faults on both, closes both. Returns the kept records' (type, op, ino).
std::vector<std::tuple<int, int, uint64_t>> Kept(const Scope& scope, ScopeFilterCounts* counts) {
  TraceBuilder t(FullCaptureMeta());
  iot_proc attach{};
  InitRecord(&attach, IOT_REC_PROC);
  attach.kind = IOT_PROC_ATTACH;
  attach.ts = kStart;
  attach.tgid = attach.tid = 1;
  attach.path_id = t.Str("/w");
  t.Add(attach);
  uint64_t ts = kStart + 1;
  for (auto [path, fd, ino] : {std::tuple<const char*, int, uint64_t>{"data/a.bin", 3, 11},
                               std::tuple<const char*, int, uint64_t>{"lib/x.so.1", 4, 12}}) {
    iot_syscall open = Call(IOT_OP_OPENAT, ts++, -100, ino, fd);
    open.path_id = t.Str(path);
    open.flags = O_RDONLY;
    t.Add(open);
    t.Add(Call(IOT_OP_READ, ts++, fd, ino, 100));
    iot_page_fault f{};
    InitRecord(&f, IOT_REC_PAGE_FAULT);
    f.ts = ts++;
    f.tgid = f.tid = 1;
    f.dev = kDev;
    f.ino = ino;
    t.Add(f);
    t.Add(Call(IOT_OP_CLOSE, ts++, fd, ino, 0));
  }
  ScopeRecordFilter filter(scope);
  std::vector<std::tuple<int, int, uint64_t>> kept;
  t.ForEach([&](const iot_rec_hdr* r) {
    if (!filter.Keep(r) || r->type == IOT_REC_STRING || r->type == IOT_REC_PROC) return;
    if (r->type == IOT_REC_SYSCALL) {
      const auto& s = As<iot_syscall>(r);
      kept.emplace_back(r->type, s.op, s.ino);
    } else if (r->type == IOT_REC_PAGE_FAULT) {
      kept.emplace_back(r->type, 0, As<iot_page_fault>(r).ino);
    }
  });
  *counts = filter.dropped();
  return kept;
}

TEST(ScopeRecordFilter, DropsEveryRecordOfAFileOutOfScopeByItsResolvedName) {
  ScopeFilterCounts counts;
  auto kept = Kept(*Scope::Parse("data", {}, {}), &counts);
  const std::vector<std::tuple<int, int, uint64_t>> a_only = {
      {IOT_REC_SYSCALL, IOT_OP_OPENAT, 11}, {IOT_REC_SYSCALL, IOT_OP_READ, 11},
      {IOT_REC_PAGE_FAULT, 0, 11}, {IOT_REC_SYSCALL, IOT_OP_CLOSE, 11}};
  EXPECT_EQ(kept, a_only);
  EXPECT_EQ(counts.calls, 3u);
  EXPECT_EQ(counts.bytes, 100u);
  EXPECT_EQ(counts.faults, 1u);
  EXPECT_EQ(counts.records, 4u);
  // The same by an include glob on the resolved path (the program named it relatively).
  EXPECT_EQ(Kept(*Scope::Parse("all", {"/w/data/*"}, {}), &counts), a_only);
  // Nothing left out without a scope.
  EXPECT_EQ(Kept(Scope(), &counts).size(), 8u);
  EXPECT_EQ(counts.records, 0u);
}

// What no open shows: a pipe's descriptor (judged by its kind) and an executable mapped by exec
// (its cache state names it, and its faults follow that verdict).
TEST(ScopeRecordFilter, PipesByTheirKindAndExecutablesByTheirCacheState) {
  TraceBuilder t(FullCaptureMeta());
  iot_syscall pipe_read = Call(IOT_OP_READ, kStart + 1, 5, 77, 10);
  pipe_read.ftype = 1;  // S_IFIFO
  t.Add(pipe_read);
  iot_cache_state cs{};
  InitRecord(&cs, IOT_REC_CACHE_STATE);
  cs.dev = kDev;
  cs.ino = 88;
  cs.path_id = t.Str("/usr/bin/python3.11");
  t.Add(cs);
  iot_page_fault f{};
  InitRecord(&f, IOT_REC_PAGE_FAULT);
  f.ts = kStart + 2;
  f.tgid = f.tid = 1;
  f.dev = kDev;
  f.ino = 88;
  t.Add(f);
  ScopeRecordFilter filter(*Scope::Parse("data", {}, {}));
  std::vector<int> kept;
  t.ForEach([&](const iot_rec_hdr* r) {
    if (filter.Keep(r) && r->type != IOT_REC_STRING) kept.push_back(r->type);
  });
  EXPECT_TRUE(kept.empty()) << kept.size() << " records kept";
  EXPECT_EQ(filter.dropped().calls, 1u);
  EXPECT_EQ(filter.dropped().faults, 1u);
  // Without the preset a pipe stays.
  ScopeRecordFilter all(*Scope::Parse("all", {}, {"/nothing/*"}));
  size_t kept_all = 0;
  t.ForEach([&](const iot_rec_hdr* r) { kept_all += all.Keep(r) && r->type != IOT_REC_STRING; });
  EXPECT_EQ(kept_all, 3u);
}

TEST(ScopeRecordFilter, KeepsTheCallsThatMakeAndRemoveDirectories) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart;
  auto path_call = [&](uint16_t op, const char* path, uint32_t flags) {
    iot_syscall s = TraceBuilder::Sys(op, 1, ts++);
    s.fd = -100;
    s.flags = flags;
    s.path_id = t.Str(path);
    t.Add(s);
  };
  path_call(IOT_OP_MKDIR, "/data/run", 0);
  path_call(IOT_OP_MKDIRAT, "/data/run/sub", 0);
  path_call(IOT_OP_UNLINKAT, "/data/run/sub", AT_REMOVEDIR);
  path_call(IOT_OP_RMDIR, "/data/run", 0);
  path_call(IOT_OP_UNLINK, "/data/other", 0);  // a file out of scope: left out
  ScopeRecordFilter filter(*Scope::Parse("all", {"/data/run/*"}, {}));
  std::vector<int> kept;
  t.ForEach([&](const iot_rec_hdr* r) {
    if (filter.Keep(r) && r->type == IOT_REC_SYSCALL) kept.push_back(As<iot_syscall>(r).op);
  });
  EXPECT_EQ(kept, (std::vector<int>{IOT_OP_MKDIR, IOT_OP_MKDIRAT, IOT_OP_UNLINKAT, IOT_OP_RMDIR}));
  EXPECT_EQ(filter.dropped().calls, 1u);
}

}  // namespace
}  // namespace iotwin::model
