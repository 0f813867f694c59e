// iotwin record, memory layer: page faults on file mappings, page-cache insertions and
// readahead, dirtied pages and their write-back, cache state and sub-page changes, checked
// against what the test programs (tests/progs/mem_touch.cc, mem_store.cc) logged they did.
#include <fcntl.h>
#include <signal.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kTouchMb = 16;
constexpr uint64_t kTouchStride = 3;
constexpr uint64_t kTouchThreads = 2;

// Writes the file mem_touch reads, before the capture, so the trace holds only its reads.
bool PrepareTouchFile(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<uint8_t> buf(1 << 20);
  for (uint64_t off = 0; off < (kTouchMb << 20); off += buf.size()) {
    for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<uint8_t>((off + i) * 13 + 1);
    if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) return false;
  }
  bool ok = fsync(fd) == 0;
  close(fd);
  return ok;
}

// One recording of mem_touch shared by the fault tests.
class MemTouch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!CanLoadBpf()) return;
    dir_ = new TempDir();
    file_ = *dir_ / "weights.bin";
    ASSERT_TRUE(PrepareTouchFile(file_));
    std::string trace = *dir_ / "touch.iotwin";
    std::string log = *dir_ / "touch.json";
    run_ = RecordCommand(trace, {},
                         {TestProg("mem_touch"), file_, std::to_string(kTouchMb),
                          std::to_string(kTouchStride), std::to_string(kTouchThreads), log});
    trace_ = LoadMemTrace(trace);
    log_ = ReadJsonFile(log);
  }
  static void TearDownTestSuite() {
    // IOTWIN_KEEP_MEM_TRACE=DIR keeps the recording (trace, program log) for `iotwin dump`: a
    // flaky failure is only diagnosable from its own records.
    const char* keep = getenv("IOTWIN_KEEP_MEM_TRACE");
    if (dir_ && keep && *keep) {
      std::error_code ec;
      std::filesystem::create_directories(keep, ec);
      for (const char* name : {"touch.iotwin", "touch.json"}) {
        std::filesystem::copy_file(*dir_ / name, std::filesystem::path(keep) / name,
                                   std::filesystem::copy_options::overwrite_existing, ec);
      }
    }
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    IOTWIN_REQUIRE_BPF_OR_SKIP();
    ASSERT_EQ(run_.exit_code, 0) << run_.err;
    ASSERT_TRUE(trace_.error.empty()) << trace_.error;
    ASSERT_TRUE(trace_.summary.has_value());
    ASSERT_TRUE(log_.is_object()) << "mem_touch wrote no log";
    ino_ = log_["ino"].get<uint64_t>();
    dev_ = KernelDevOf(log_["dev"].get<uint64_t>());
  }
  bool OnFile(uint64_t ino, uint32_t dev) const { return ino == ino_ && dev == dev_; }

  static TempDir* dir_;
  static std::string file_;
  static RunResult run_;
  static MemTrace trace_;
  static nlohmann::json log_;
  uint64_t ino_ = 0;
  uint32_t dev_ = 0;
};
TempDir* MemTouch::dir_ = nullptr;
std::string MemTouch::file_;
RunResult MemTouch::run_;
MemTrace MemTouch::trace_;
nlohmann::json MemTouch::log_;

// No fault may be lost: VMAs are found from the per-thread cache or by the lock-free maple-tree
// walk, which neither try-lock the mmap lock nor defer an unlock to an IPI (the -EBUSY losses of
// bpf_find_vma in a page fault, 12 to 141 of ~350 faults on this loaded machine, are gone); a
// lookup that still fails is retried at the thread's next fault or from /proc/PID/maps. Any loss
// must still be a counted lookup failure.
TEST_F(MemTouch, LayerIsOnAndNothingWasLost) {
  const auto& mem = trace_.meta["layers"]["memory"];
  EXPECT_TRUE(mem["enabled"].get<bool>()) << mem.dump();
  for (const char* part : {"faults", "cache", "writeback", "state"}) {
    EXPECT_TRUE(mem["parts"][part]["enabled"].get<bool>()) << part << ": " << mem.dump();
  }
  EXPECT_FALSE(mem["parts"]["subpage"]["enabled"].get<bool>());
  const auto& kernel = (*trace_.summary)["memory"]["kernel"];
  EXPECT_EQ(MemoryLost(trace_), kernel["vma_lookups_lost"].get<uint64_t>())
      << "every memory loss must be a counted VMA lookup failure: " << trace_.summary->dump();
  EXPECT_EQ(MemoryLost(trace_), 0u) << trace_.summary->dump();
  EXPECT_EQ((*trace_.summary)["memory"]["late_faults_lost"].get<uint64_t>(), 0u);
  EXPECT_GT(kernel["vma_lookups_cached"].get<uint64_t>(), 0u) << "the VMA cache never hit";
}

// Every fault on the file is one of the thread's touches, in the thread's order, read-only on a
// shared mapping; every touched page was faulted or mapped by a fault's fault-around.
TEST_F(MemTouch, FaultsFollowEachThreadsTouchesAndCoverThem) {
  std::vector<uint64_t> all_pgoffs;
  std::vector<std::pair<uint64_t, uint64_t>> windows;  // [start, end)
  for (const auto& f : trace_.faults) {
    if (!OnFile(f.ino, f.dev)) continue;
    all_pgoffs.push_back(f.pgoff);
    windows.emplace_back(f.around_start, f.around_start + f.nr_pages);
    EXPECT_LE(f.around_start, f.pgoff);
    EXPECT_LT(f.pgoff, f.around_start + f.nr_pages);
  }
  ASSERT_FALSE(all_pgoffs.empty()) << "no fault on the file recorded";
  size_t touched_total = 0;
  ASSERT_EQ(log_["threads"].size(), kTouchThreads);
  for (const auto& th : log_["threads"]) {
    uint32_t tid = th["tid"].get<uint32_t>();
    std::vector<uint64_t> touched = th["touched"].get<std::vector<uint64_t>>();
    touched_total += touched.size();
    std::map<uint64_t, size_t> order;  // page -> position in the thread's touches
    for (size_t i = 0; i < touched.size(); i++) order[touched[i]] = i;

    std::vector<iot_page_fault> mine;
    for (const auto& f : trace_.faults) {
      if (OnFile(f.ino, f.dev) && f.tid == tid) mine.push_back(f);
    }
    std::sort(mine.begin(), mine.end(),
              [](const iot_page_fault& a, const iot_page_fault& b) { return a.ts < b.ts; });
    ASSERT_FALSE(mine.empty()) << "thread " << tid << " has no fault on the file";
    size_t last = 0;
    bool first = true;
    std::set<uint64_t> faulted;
    for (const auto& f : mine) {
      auto it = order.find(f.pgoff);
      ASSERT_NE(it, order.end()) << "fault on page " << f.pgoff << " that thread " << tid
                                 << " never touched";
      EXPECT_TRUE(first || it->second > last)
          << "thread " << tid << ": fault on page " << f.pgoff << " out of touch order";
      last = it->second;
      first = false;
      EXPECT_EQ(f.flags & IOT_PFF_WRITE, 0) << "a read was recorded as a write";
      EXPECT_NE(f.flags & IOT_PFF_SHARED, 0) << "the mapping is MAP_SHARED";
      EXPECT_EQ(f.tgid, mine.front().tgid);
      faulted.insert(f.pgoff);
    }
    EXPECT_LE(mine.size(), touched.size());
    // Coverage: a touched page without its own fault was mapped by some fault-around.
    std::vector<uint64_t> uncovered;
    for (uint64_t p : touched) {
      if (faulted.count(p)) continue;
      bool around = std::any_of(windows.begin(), windows.end(), [p](const auto& w) {
        return w.first <= p && p < w.second;
      });
      if (!around) uncovered.push_back(p);
    }
    EXPECT_TRUE(uncovered.empty()) << "thread " << tid << ": " << uncovered.size()
                                   << " touched pages neither faulted nor mapped around, first "
                                   << uncovered.front();
  }
  EXPECT_LE(all_pgoffs.size(), touched_total);
}

// Cold cache: the pages the threads touched were inserted into the page cache during the run
// (after the program's DONTNEED), inside recorded readahead windows; major faults are the
// faults whose page was not cached as they began, inserted during the run by the faulting
// thread or by the other one (both read ahead into the same window at first).
TEST_F(MemTouch, PageCacheInsertionsAndReadaheadServedTheFaults) {
  // The program's DONTNEED is the last removal before the first fault. Later removals are
  // reclaim's (this VM runs DAMON's kdamond, which evicts cold pages mid-run), not the start of
  // the cold read.
  uint64_t first_fault = UINT64_MAX;
  for (const auto& f : trace_.faults) {
    if (OnFile(f.ino, f.dev)) first_fault = std::min(first_fault, f.ts);
  }
  uint64_t last_delete = 0;
  for (const auto& c : trace_.caches) {
    if (OnFile(c.ino, c.dev) && c.kind == IOT_PC_DELETE && c.ts < first_fault) {
      last_delete = std::max(last_delete, c.ts);
    }
  }
  auto added = PagesOf(trace_.caches, [&](const iot_page_cache& c) {
    return OnFile(c.ino, c.dev) && c.kind == IOT_PC_ADD && c.ts >= last_delete;
  });
  auto windows = PagesOf(trace_.caches, [&](const iot_page_cache& c) {
    return OnFile(c.ino, c.dev) && c.kind == IOT_PC_READAHEAD;
  });
  ASSERT_FALSE(added.empty());
  ASSERT_FALSE(windows.empty()) << "no readahead window recorded";
  std::set<uint64_t> touched_missing, outside_windows;
  for (const auto& th : log_["threads"]) {
    for (uint64_t p : th["touched"].get<std::vector<uint64_t>>()) {
      if (!added.count(p)) touched_missing.insert(p);
    }
  }
  for (uint64_t p : added) {
    if (!windows.count(p)) outside_windows.insert(p);
  }
  EXPECT_TRUE(touched_missing.empty())
      << touched_missing.size() << " touched pages never inserted: " << ListOf(touched_missing);
  EXPECT_TRUE(outside_windows.empty())
      << outside_windows.size() << " inserted pages outside every readahead window: "
      << ListOf(outside_windows);
  uint64_t pages = log_["pages"].get<uint64_t>();
  EXPECT_LE(*added.rbegin(), pages - 1) << "insertion beyond the end of the file";

  size_t majors = 0;
  for (const auto& f : trace_.faults) {
    if (!OnFile(f.ino, f.dev) || !(f.flags & IOT_PFF_MAJOR)) continue;
    majors++;
    // Inserted during the cold read, by either thread. (An insertion record is a run stamped
    // with its first page's time, so a run that began before the fault may still have inserted
    // the fault's page after it began: the time is not compared.)
    bool inserted = std::any_of(trace_.caches.begin(), trace_.caches.end(), [&](const auto& c) {
      return OnFile(c.ino, c.dev) && c.kind == IOT_PC_ADD && c.ts >= last_delete &&
             c.index <= f.pgoff && f.pgoff < c.index + c.nr_pages;
    });
    EXPECT_TRUE(inserted) << "major fault on page " << f.pgoff
                          << ", a page never inserted during the cold read";
  }
  // The counters say which path each fault took (a late-resolved one is major when its page is
  // among those its thread inserted meanwhile: iot_mem_unresolved_was_major).
  EXPECT_GT(majors, 0u) << "a cold read through a mapping had no major fault; memory counters: "
                        << (*trace_.summary)["memory"]["kernel"].dump();
}

TEST_F(MemTouch, CacheStateTakenBeforeTheFirstTouch) {
  const iot_cache_state* state = nullptr;
  for (size_t i = 0; i < trace_.states.size(); i++) {
    if (OnFile(trace_.states[i].ino, trace_.states[i].dev)) {
      EXPECT_EQ(state, nullptr) << "two cache states for one file";
      state = &trace_.states[i];
      EXPECT_EQ(std::filesystem::path(trace_.state_paths[i]).filename(), "weights.bin");
    }
  }
  ASSERT_NE(state, nullptr) << "no cache state for the file";
  EXPECT_EQ(state->total_pages, log_["pages"].get<uint64_t>());
  EXPECT_EQ(state->fsize, kTouchMb << 20);
  EXPECT_LE(state->resident_pages, state->total_pages);
  // Taken before any page-cache event of the workload on the file.
  for (const auto& c : trace_.caches) {
    if (OnFile(c.ino, c.dev)) {
      EXPECT_LE(state->ts, c.ts);
    }
  }
  for (const auto& f : trace_.faults) {
    if (OnFile(f.ino, f.dev)) {
      EXPECT_LE(state->ts, f.ts);
    }
  }
}

// Anonymous memory is filtered in the kernel: 8 MiB were written, no fault of them is recorded.
TEST_F(MemTouch, AnonymousFaultsAreNotRecorded) {
  uint64_t anon_start = log_["anon_start"].get<uint64_t>();
  uint64_t anon_end = log_["anon_end"].get<uint64_t>();
  for (const auto& f : trace_.faults) {
    EXPECT_NE(f.ino, 0u) << "a fault without a file";
    EXPECT_FALSE(f.addr >= anon_start && f.addr < anon_end)
        << "fault at " << f.addr << " in the anonymous buffer was recorded";
  }
  const auto& kernel = (*trace_.summary)["memory"]["kernel"];
  EXPECT_GT(kernel["anonymous_faults_dropped"].get<uint64_t>(), 0u)
      << "the kernel saw no anonymous fault at all: the filter was not exercised";
}

// ---- stores into a shared mapping ------------------------------------------------------------

struct StoreRun {
  RunResult run;
  MemTrace trace;
  nlohmann::json log;
  uint64_t ino = 0;
  uint32_t dev = 0;
  uint32_t pid = 0;
  uint64_t mmap_ts = 0;  // the program's mmap of the file: stores come after
  bool ext4 = false;
};

StoreRun RecordStores(const TempDir& dir, const std::vector<std::string>& extra) {
  StoreRun s;
  std::string file = dir / "state.bin";
  std::string trace = dir / "store.iotwin";
  std::string log = dir / "store.json";
  s.run = RecordCommand(trace, extra, {TestProg("mem_store"), file, "16", "100", log});
  s.trace = LoadMemTrace(trace);
  s.log = ReadJsonFile(log);
  if (!s.log.is_object()) return s;
  s.ino = s.log["ino"].get<uint64_t>();
  s.dev = KernelDevOf(s.log["dev"].get<uint64_t>());
  s.pid = s.log["pid"].get<uint32_t>();
  for (const auto& sc : s.trace.syscalls) {
    if (sc.op == IOT_OP_MMAP && sc.tgid == s.pid && sc.ino == s.ino && s.mmap_ts == 0) {
      s.mmap_ts = sc.ts;
    }
  }
  struct statfs fs;
  s.ext4 = statfs(dir.path().c_str(), &fs) == 0 && fs.f_type == 0xEF53;
  return s;
}

// (page, word) of every 8-byte word the program's stores changed.
std::set<std::pair<uint64_t, uint64_t>> WordsWritten(const nlohmann::json& log) {
  std::set<std::pair<uint64_t, uint64_t>> out;
  for (const auto& w : log["writes"]) {
    uint64_t off = w["off"].get<uint64_t>(), len = w["len"].get<uint64_t>();
    for (uint64_t b = off; b < off + len; b++) out.emplace(b / 4096, (b % 4096) / 8);
  }
  return out;
}

std::set<uint64_t> PagesWritten(const nlohmann::json& log, int round) {
  std::set<uint64_t> out;
  for (const auto& w : log["writes"]) {
    if (round && w["round"].get<int>() != round) continue;
    uint64_t off = w["off"].get<uint64_t>(), len = w["len"].get<uint64_t>();
    for (uint64_t p = off / 4096; p <= (off + len - 1) / 4096; p++) out.insert(p);
  }
  return out;
}

TEST(MemoryStores, DirtiedPagesAndMsyncWriteBackAreAttributedToTheFile) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  StoreRun s = RecordStores(dir, {});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  ASSERT_TRUE(s.trace.error.empty()) << s.trace.error;
  ASSERT_TRUE(s.log.is_object());
  ASSERT_NE(s.mmap_ts, 0u) << "the program's mmap is not in the trace";
  EXPECT_EQ(MemoryLost(s.trace), 0u);

  // Pages dirtied after the mapping was made, by the program: every page stored to, and no
  // folio without a store (a large folio is dirtied, and written back, as a whole); page 0,
  // stored to in both rounds, is dirtied again after the first msync cleaned it.
  const std::set<uint64_t> written = PagesWritten(s.log, 0);
  std::map<uint64_t, int> dirtied;
  for (const auto& w : s.trace.writebacks) {
    if (w.kind != IOT_WB_DIRTY_FOLIO || w.ino != s.ino || w.dev != s.dev || w.ts < s.mmap_ts) {
      continue;
    }
    EXPECT_EQ(w.tgid, s.pid) << "page " << w.index << " dirtied by another process";
    bool has_store = false;
    for (uint64_t p = w.index; p < w.index + w.nr; p++) {
      dirtied[p]++;
      has_store |= written.count(p) > 0;
    }
    EXPECT_TRUE(has_store) << "pages " << w.index << "+" << w.nr << " dirtied without a store";
  }
  for (uint64_t p : written) EXPECT_GT(dirtied[p], 0) << "page " << p << " stored to, not dirtied";
  EXPECT_EQ(dirtied[0], 2) << "page 0 was stored to before each of the two msyncs";

  // The faults that dirtied them: write faults on a shared mapping of the file.
  std::set<uint64_t> write_faults;
  for (const auto& f : s.trace.faults) {
    if (f.ino == s.ino && f.dev == s.dev && (f.flags & IOT_PFF_WRITE)) {
      EXPECT_NE(f.flags & IOT_PFF_SHARED, 0);
      write_faults.insert(f.pgoff);
    }
  }
  EXPECT_EQ(write_faults, PagesWritten(s.log, 0));

  // Write-back: msync(MS_SYNC) writes the file back in the program's context, WB_SYNC_ALL,
  // during each msync call.
  std::vector<iot_syscall> msyncs;
  for (const auto& sc : s.trace.syscalls) {
    if (sc.op == IOT_OP_MSYNC && sc.tgid == s.pid) msyncs.push_back(sc);
  }
  ASSERT_EQ(msyncs.size(), 2u);
  if (!s.ext4) GTEST_SKIP() << "fsync/msync write-back records need ext4 (the test dir is not)";
  // Under memory pressure (another job writing a lot) the flusher may write some of a round's
  // pages back before msync; those count as written, by the flusher, between the round's start
  // and the msync.
  for (size_t round = 0; round < 2; round++) {
    const auto& m = msyncs[round];
    const uint64_t round_start = round == 0 ? s.mmap_ts : msyncs[0].ts + msyncs[0].dur;
    uint64_t written = 0, flushed_early = 0;
    bool started = false;
    for (const auto& w : s.trace.writebacks) {
      if (w.ino != s.ino || w.dev != s.dev) continue;
      if (w.kind == IOT_WB_INODE_DONE && w.tgid != s.pid && w.ts >= round_start && w.ts < m.ts) {
        flushed_early += w.nr;
      }
      if (w.ts < m.ts || w.ts > m.ts + m.dur) continue;
      if (w.kind == IOT_WB_INODE_START) {
        started = true;
        EXPECT_EQ(w.sync_mode, 1u) << "msync(MS_SYNC) write-back is WB_SYNC_ALL";
        EXPECT_EQ(w.tgid, s.pid) << "write-back started by the application, in its context";
      }
      if (w.kind == IOT_WB_INODE_DONE && w.tgid == s.pid) written += w.nr;
    }
    const uint64_t dirtied_pages = PagesWritten(s.log, static_cast<int>(round + 1)).size();
    EXPECT_TRUE(started || flushed_early >= dirtied_pages)
        << "no write-back start during msync round " << round + 1 << " (flusher wrote "
        << flushed_early << " of " << dirtied_pages << " pages before it)";
    EXPECT_GE(written + flushed_early, dirtied_pages)
        << "msync round " << round + 1 << " wrote back fewer pages than were dirtied";
  }
}

TEST(MemoryStores, SubpageReportsExactlyTheWordsStoredTo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  StoreRun s = RecordStores(dir, {"--subpage", "--subpage-interval-ms", "10"});
  ASSERT_EQ(s.run.exit_code, 0) << s.run.err;
  ASSERT_TRUE(s.trace.error.empty()) << s.trace.error;
  ASSERT_TRUE(s.log.is_object());
  const auto& part = s.trace.meta["layers"]["memory"]["parts"]["subpage"];
  ASSERT_TRUE(part["enabled"].get<bool>()) << part.dump();

  std::set<std::pair<uint64_t, uint64_t>> reported;
  for (const auto& sp : s.trace.subpages) {
    ASSERT_EQ(sp.ino, s.ino);
    EXPECT_EQ(sp.dev, s.dev);
    EXPECT_EQ(sp.tgid, s.pid);
    uint32_t count = 0;
    for (uint64_t w = 0; w < 512; w++) {
      if (sp.bitmap[w / 64] >> (w % 64) & 1) {
        reported.emplace(sp.pgoff, w);
        count++;
      }
    }
    EXPECT_EQ(count, sp.changed_words);
  }
  auto expected = WordsWritten(s.log);
  std::set<std::pair<uint64_t, uint64_t>> missing, extra;
  std::set_difference(expected.begin(), expected.end(), reported.begin(), reported.end(),
                      std::inserter(missing, missing.begin()));
  std::set_difference(reported.begin(), reported.end(), expected.begin(), expected.end(),
                      std::inserter(extra, extra.begin()));
  EXPECT_TRUE(missing.empty()) << missing.size() << " words stored to but not reported, first page "
                               << (missing.empty() ? 0 : missing.begin()->first) << " word "
                               << (missing.empty() ? 0 : missing.begin()->second);
  EXPECT_TRUE(extra.empty()) << extra.size() << " words reported but never stored to, first page "
                             << (extra.empty() ? 0 : extra.begin()->first) << " word "
                             << (extra.empty() ? 0 : extra.begin()->second);
  const auto& stats = (*s.trace.summary)["memory"]["subpage"];
  EXPECT_EQ(stats["baselines_without_data"].get<uint64_t>(), 0u) << stats.dump();
  EXPECT_GT(stats["baselines"].get<uint64_t>(), 0u);
}

// The scenario: iotwin-workload model-load --mode mmap with a cold cache (safetensors
// shards read through a shared mapping, one logged load per page, two loader threads).
TEST(MemoryModelLoad, MmapLoadFaultsAndInsertionsMatchTheWorkloadsTouches) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access(WorkloadBin().c_str(), X_OK) != 0) GTEST_SKIP() << "no " << WorkloadBin();
  TempDir dir;
  std::string model = dir / "model";
  RunResult prep = ::iotwin::test::Run({WorkloadBin(), "model-load", "--dir", model, "--prepare-only",
                        "--shards", "2", "--shard-mb", "8", "--quiet"});
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  std::string trace = dir / "load.iotwin", log = dir / "ops.jsonl";
  RunResult r = RecordCommand(trace, {},
                              {WorkloadBin(), "model-load", "--dir", model, "--mode", "mmap",
                               "--threads", "2", "--drop-cache", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(MemoryLost(t), 0u);
  auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind('{')), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << r.out;

  // file -> (tid -> touched pages in order)
  std::map<std::string, std::map<uint32_t, std::vector<uint64_t>>> touches;
  size_t n_touches = 0;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    auto op = nlohmann::json::parse(line, nullptr, false);
    if (!op.is_object() || op["op"] != "touch") continue;
    touches[op["file"].get<std::string>()][op["tid"].get<uint32_t>()].push_back(
        op["pgoff"].get<uint64_t>());
    n_touches++;
  }
  EXPECT_EQ(n_touches, summary["pages_touched"].get<size_t>());
  ASSERT_EQ(touches.size(), 2u);

  for (const auto& [file, by_tid] : touches) {
    struct stat st;
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    const uint64_t ino = st.st_ino;
    const uint32_t dev = KernelDevOf(st.st_dev);
    auto on = [&](uint64_t i, uint32_t d) { return i == ino && d == dev; };
    std::vector<std::pair<uint64_t, uint64_t>> windows;
    for (const auto& f : t.faults) {
      if (on(f.ino, f.dev)) windows.emplace_back(f.around_start, f.around_start + f.nr_pages);
    }
    ASSERT_FALSE(windows.empty()) << "no fault on " << file;
    uint64_t last_delete = 0;
    for (const auto& c : t.caches) {
      if (on(c.ino, c.dev) && c.kind == IOT_PC_DELETE) last_delete = std::max(last_delete, c.ts);
    }
    auto added = PagesOf(t.caches, [&](const iot_page_cache& c) {
      return on(c.ino, c.dev) && c.kind == IOT_PC_ADD && c.ts >= last_delete;
    });
    for (const auto& [tid, pages] : by_tid) {
      std::map<uint64_t, size_t> order;
      for (size_t i = 0; i < pages.size(); i++) order.emplace(pages[i], i);
      std::vector<iot_page_fault> mine;
      for (const auto& f : t.faults) {
        if (on(f.ino, f.dev) && f.tid == tid) mine.push_back(f);
      }
      std::sort(mine.begin(), mine.end(),
                [](const auto& a, const auto& b) { return a.ts < b.ts; });
      EXPECT_FALSE(mine.empty()) << file << ": thread " << tid << " touched pages, no fault";
      EXPECT_LE(mine.size(), pages.size());
      std::set<uint64_t> faulted;
      size_t last = 0;
      for (size_t i = 0; i < mine.size(); i++) {
        auto it = order.find(mine[i].pgoff);
        ASSERT_NE(it, order.end()) << file << ": fault on untouched page " << mine[i].pgoff;
        EXPECT_TRUE(i == 0 || it->second > last) << "fault on page " << mine[i].pgoff
                                                 << " out of the thread's touch order";
        last = it->second;
        faulted.insert(mine[i].pgoff);
      }
      std::set<uint64_t> uncovered, not_inserted;
      for (uint64_t p : pages) {
        if (!added.count(p)) not_inserted.insert(p);
        if (faulted.count(p)) continue;
        if (std::none_of(windows.begin(), windows.end(),
                         [p](const auto& w) { return w.first <= p && p < w.second; })) {
          uncovered.insert(p);
        }
      }
      EXPECT_TRUE(uncovered.empty()) << file << ": touched, neither faulted nor mapped around: "
                                     << ListOf(uncovered);
      EXPECT_TRUE(not_inserted.empty()) << file << ": touched but never inserted after the "
                                        << "workload's DONTNEED: " << ListOf(not_inserted);
    }
  }
}

// --pid: the files a running process already holds are measured at attach.
TEST(MemoryAttach, CacheStateOfFilesHeldAtAttach) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string file = dir / "held.bin";
  {
    // Written just now: all 64 pages are in the page cache.
    int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    std::vector<uint8_t> buf(64 * 4096, 0x11);
    ASSERT_EQ(write(fd, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
    close(fd);
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = open(file.c_str(), O_RDONLY);
    dup2(fd, 0);
    execl("/bin/sleep", "sleep", "3", static_cast<char*>(nullptr));
    _exit(127);
  }
  usleep(200 * 1000);  // let it open the file and exec
  std::string trace = dir / "attach.iotwin";
  RunResult r = ::iotwin::test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--pid",
                                     std::to_string(child), "--duration", "0.5"});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  size_t found = 0;
  for (size_t i = 0; i < t.states.size(); i++) {
    const auto& cs = t.states[i];
    if (cs.ino != st.st_ino || cs.dev != KernelDevOf(st.st_dev)) continue;
    found++;
    EXPECT_EQ(t.state_paths[i], file);
    EXPECT_EQ(cs.total_pages, 64u);
    EXPECT_EQ(cs.fsize, 64u * 4096);
    EXPECT_EQ(cs.resident_pages, 64u) << "a file just written is fully cached";
  }
  EXPECT_EQ(found, 1u) << "one cache state for the file the process holds";
}

TEST(MemoryOptions, NoMemoryLeavesTheLayerOffAndSaysWhy) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string file = dir / "weights.bin";
  ASSERT_TRUE(PrepareTouchFile(file));
  std::string trace = dir / "off.iotwin";
  RunResult r = RecordCommand(trace, {"--no-memory"},
                              {TestProg("mem_touch"), file, std::to_string(kTouchMb), "64", "1",
                               dir / "log.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_TRUE(t.faults.empty());
  EXPECT_TRUE(t.caches.empty());
  EXPECT_TRUE(t.writebacks.empty());
  EXPECT_TRUE(t.states.empty());
  const auto& mem = t.meta["layers"]["memory"];
  EXPECT_FALSE(mem["enabled"].get<bool>()) << mem.dump();
  EXPECT_NE(mem["parts"]["faults"]["reason"].get<std::string>().find("--no-memory"),
            std::string::npos)
      << mem.dump();

  // A subset: faults only.
  std::string trace2 = dir / "faults.iotwin";
  r = RecordCommand(trace2, {"--memory", "faults"},
                    {TestProg("mem_touch"), file, std::to_string(kTouchMb), "64", "1",
                     dir / "log2.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  MemTrace t2 = LoadMemTrace(trace2);
  EXPECT_FALSE(t2.faults.empty());
  EXPECT_TRUE(t2.caches.empty());
  EXPECT_TRUE(t2.writebacks.empty());
  EXPECT_TRUE(t2.states.empty());
  EXPECT_FALSE(t2.meta["layers"]["memory"]["parts"]["cache"]["enabled"].get<bool>());

  RunResult bad = ::iotwin::test::Run({IotwinBin(), "record", "-o", dir / "x.iotwin", "--memory", "faults,bogus",
                       "--", "/bin/true"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bogus"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace iotwin::test
