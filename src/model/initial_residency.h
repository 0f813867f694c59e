// Which pages of a file were in the page cache before the workload touched them, as the trace
// shows it: what the workload read or faulted in, and what the kernel inserted into or removed
// from the page cache while it ran (the memory layer's PAGE_CACHE records).
//
// A page decides at the first event that reaches it:
//   - inserted (a read miss, readahead, a write that allocated it), or a major fault on it: it
//     was not resident;
//   - removed before any insertion, or read / minor-faulted before any insertion: it was.
// A read counts once it has returned (the insertions it caused come first), a fault when it
// began. Pages the workload never touched stay undecided: they do not change the workload's
// I/O. The capture's CACHE_STATE record gives only a count; these extents say which pages.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace iotwin::model {

// Pages [first, first + pages) of a file.
struct PageExtent {
  uint64_t first = 0;
  uint64_t pages = 0;
  bool operator==(const PageExtent&) const = default;
};

// The pages to make resident so that a file holds `count` of its `total` pages with every
// `known` resident page among them: the known pages first; then the rest of the
// `window`-page-aligned windows around them (the kernel maps and reads ahead a file's pages in
// such windows: fault-around is 16 pages by default, so a workload uses pages near the ones it
// was seen touching without a record of each); then the first pages of the file not taken yet.
// Pages known `absent` (the kernel inserted them, or a fault missed them) are never taken.
// Never more than `count` pages (nor `total`), unless the known pages alone are more.
std::vector<PageExtent> PagesToWarm(const std::vector<PageExtent>& known,
                                    const std::vector<PageExtent>& absent, uint64_t count,
                                    uint64_t total, uint64_t window = 16);

class ResidencyEvidence {
 public:
  enum class Kind : uint8_t {
    kInserted,  // the kernel added the pages: they were absent
    kMissed,    // a major fault: the page was absent as the fault began
    kRemoved,   // the kernel removed them: present, unless inserted earlier
    kUsed,      // read (at return) or minor-faulted: present, unless inserted earlier
  };
  // One event on pages [first, first + pages) of file (dev, ino) at `ts`. Page counts come from
  // an untrusted trace: ranges are clipped so that first + pages never wraps.
  void Add(uint32_t dev, uint64_t ino, uint64_t ts, Kind kind, uint64_t first, uint64_t pages);
  // The extents of (dev, ino) that were resident at start, and those that were not, each
  // ascending and merged.
  struct AtStart {
    std::vector<PageExtent> resident, absent;
  };
  AtStart Decide(uint32_t dev, uint64_t ino) const;
  bool empty() const { return events_.empty(); }

 private:
  struct Event {
    uint64_t ts;
    uint64_t first, pages;
    Kind kind;
  };
  std::map<std::pair<uint32_t, uint64_t>, std::vector<Event>> events_;
};

}  // namespace iotwin::model
