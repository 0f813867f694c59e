// The memory layer names the file of each fault when one thread maps two files in turn at the
// same address (tests/progs/mem_remap.cc): a fault on the second mapping must not be given the
// inode of the first, whose unmapped VMA the capture's per-thread VMA cache may still hold.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

struct Mapping {
  uint64_t start = 0, end = 0, ino = 0;
  std::set<uint64_t> pages;  // file pages the faults on it mapped
};

TEST(MemoryRemap, FaultsNameTheFileMappedNowAndTheirWindowsHoldEveryPageRead) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = dir / "remap.iotwin", log = dir / "remap.json";
  RunResult r = RecordCommand(trace, {},
                              {TestProg("mem_remap"), dir / "a.bin", dir / "b.bin", "200", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json l = ReadJsonFile(log);
  ASSERT_TRUE(l.is_object()) << "mem_remap wrote no log";
  const uint64_t ino_a = l["ino_a"].get<uint64_t>(), ino_b = l["ino_b"].get<uint64_t>();
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;

  // The program's mmap and munmap calls and its faults in time order: a fault inside a mapping
  // of one of the two files must name that file.
  struct Event {
    uint64_t ts;
    const iot_syscall* call;
    const iot_page_fault* fault;
  };
  std::vector<Event> events;
  for (const iot_syscall& s : t.syscalls) {
    if (s.op == IOT_OP_MMAP && s.ret > 0 && (s.ino == ino_a || s.ino == ino_b)) {
      events.push_back({s.ts + s.dur, &s, nullptr});
    } else if (s.op == IOT_OP_MUNMAP && s.ret == 0) {
      events.push_back({s.ts, &s, nullptr});
    }
  }
  for (const iot_page_fault& f : t.faults) events.push_back({f.ts, nullptr, &f});
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts < b.ts; });

  std::map<uint64_t, Mapping> live;  // by start address
  uint64_t checked = 0, wrong = 0, mapped = 0, short_mappings = 0, short_pages = 0;
  std::string first_wrong;
  for (const Event& e : events) {
    if (e.call && e.call->op == IOT_OP_MMAP) {
      const uint64_t start = static_cast<uint64_t>(e.call->ret);
      live[start] = {start, start + e.call->length, e.call->ino, {}};
      mapped++;
    } else if (e.call) {
      auto it = live.find(e.call->offset);
      if (it == live.end()) continue;
      // The program read every page: the faults' windows (fault-around, whole large folios)
      // hold them all.
      const uint64_t pages = (it->second.end - it->second.start + 4095) / 4096;
      if (it->second.pages.size() < pages) {
        short_mappings++;
        short_pages += pages - it->second.pages.size();
      }
      live.erase(it);
    } else {
      auto it = live.upper_bound(e.fault->addr);
      if (it == live.begin()) continue;
      --it;
      if (e.fault->addr >= it->second.end) continue;
      checked++;
      const uint64_t nr = e.fault->nr_pages ? e.fault->nr_pages : 1;
      const uint64_t first = e.fault->nr_pages ? e.fault->around_start : e.fault->pgoff;
      for (uint64_t p = first; p < first + nr; p++) it->second.pages.insert(p);
      if (e.fault->ino != it->second.ino) {
        if (!wrong++) {
          first_wrong = "fault at " + std::to_string(e.fault->addr) + " names inode " +
                        std::to_string(e.fault->ino) + ", mapped: " +
                        std::to_string(it->second.ino);
        }
      }
    }
  }
  EXPECT_EQ(mapped, 200u);
  // Every mapping is read through: at least one fault each.
  EXPECT_GE(checked, 200u);
  EXPECT_EQ(short_mappings, 0u) << short_pages << " pages read through " << short_mappings
                                << " of " << mapped << " mappings are in no fault's window";
  EXPECT_EQ(wrong, 0u) << wrong << " of " << checked << " faults name the wrong file (moved CPU "
                       << l["moved"] << " times); first: " << first_wrong;
}

// A cold file read through a mapping at an offset inside each page (as numpy reads an .npy past
// its 128-byte header): the kernel maps a whole large folio at a time, a PMD-sized one in one
// page-table entry; the recorded fault windows hold every page the program read.
TEST(MemoryRemap, FaultWindowsHoldEveryPageOfAColdMappedReadAtAnOffset) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string file = dir / "weights.bin", trace = dir / "touch.iotwin";
  const std::string log = dir / "touch.json";
  // mem_touch creates the file (fsynced) when missing, then evicts it before mapping it.
  RunResult made = ::iotwin::test::Run({TestProg("mem_touch"), file, "64", "64", "1", log});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  RunResult r = RecordCommand(trace, {}, {TestProg("mem_touch"), file, "64", "1", "1", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json l = ReadJsonFile(log);
  ASSERT_TRUE(l.is_object()) << "mem_touch wrote no log";
  const uint64_t ino = l["ino"].get<uint64_t>(), pages = l["pages"].get<uint64_t>();
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  std::set<uint64_t> mapped;
  uint64_t faults = 0;
  for (const iot_page_fault& f : t.faults) {
    if (f.ino != ino) continue;
    faults++;
    const uint64_t nr = f.nr_pages ? f.nr_pages : 1;
    const uint64_t first = f.nr_pages ? f.around_start : f.pgoff;
    for (uint64_t p = first; p < first + nr; p++) mapped.insert(p);
  }
  std::set<uint64_t> touched;
  for (const auto& th : l["threads"]) {
    for (const auto& p : th["touched"]) touched.insert(p.get<uint64_t>());
  }
  ASSERT_EQ(touched.size(), pages);
  uint64_t outside = 0;
  for (uint64_t p : touched) outside += mapped.count(p) ? 0 : 1;
  EXPECT_EQ(outside, 0u) << outside << " of " << pages << " pages read are in none of the "
                         << faults << " faults' windows";
}

}  // namespace
}  // namespace iotwin::test
