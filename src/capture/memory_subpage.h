// SubpageTracker: which 8-byte words of pages dirtied through shared file mappings changed
// (`iotwin record --subpage`, docs/memory-layer.md).
//
// The kernel side (memory.bpf.c) copies a page at the moment a store through a shared mapping
// dirties it, before the store lands: that copy (the "baseline") is what the file holds on disk
// for that page. From then on the page is a candidate: every sampling interval its current
// content (read from the page cache with RWF_NOWAIT, so never from the device) is compared word
// by word with the shadow copy, each change becomes a SUBPAGE record, and the shadow follows.
// A candidate is dropped once the page is clean again (written back), after a last comparison;
// its next store produces a new baseline. Shadow copies stay in this process's memory only:
// the trace gets bitmaps, never bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "base/fd.h"
#include "base/status.h"
#include "iotwin_abi.h"

namespace iotwin::capture {

inline constexpr size_t kSubpageSize = 4096;
inline constexpr size_t kSubpageWords = kSubpageSize / 8;

struct PageBaseline {
  uint64_t ts = 0;
  uint64_t ino = 0;
  uint32_t dev = 0;
  uint64_t pgoff = 0;
  uint32_t tgid = 0;
  uint64_t vm_start = 0;  // the storing process's mapping of the file
  uint64_t vm_end = 0;
  const uint8_t* data = nullptr;  // kSubpageSize bytes before the store, or null: unknown
};

struct SubpageStats {
  uint64_t baselines = 0;              // baselines received
  uint64_t baselines_without_data = 0; // kernel could not copy: first sample becomes the shadow
  uint64_t samples = 0;                // sampling rounds
  uint64_t records = 0;                // SUBPAGE records written
  uint64_t changed_words = 0;          // sum of their changed words
  uint64_t pages_max = 0;              // most candidate pages at once
  uint64_t pages_cleaned = 0;          // candidates dropped after write-back
  uint64_t pages_evicted = 0;          // candidates gone from the page cache before a sample
  uint64_t files_unopenable = 0;       // files whose mapping could not be opened
  uint64_t over_budget = 0;            // baselines dropped: shadow memory limit reached
};

class SubpageTracker {
 public:
  using Sink = std::function<Status(const iot_subpage&)>;
  // Opens the file a baseline belongs to (default: /proc/TGID/map_files/START-END, checked to be
  // the same inode).
  using Opener = std::function<Result<UniqueFd>(const PageBaseline&)>;

  SubpageTracker(uint64_t max_bytes, Sink sink, Opener opener = {});

  // A page about to be stored to. Replaces the shadow of a page already tracked after
  // reporting what changed since the last sample (the changes written back in between).
  Status OnBaseline(const PageBaseline& b);
  // Compares every candidate page with its shadow, at time `now_ns`.
  Status Sample(uint64_t now_ns);

  size_t pages() const { return pages_.size(); }
  const SubpageStats& stats() const { return stats_; }

  // Sets bit i of `bitmap` for each 8-byte word i that differs; returns how many did.
  static uint32_t DiffWords(const uint8_t* before, const uint8_t* after, uint64_t bitmap[8]);

 private:
  struct FileKey {
    uint32_t dev;
    uint64_t ino;
    auto operator<=>(const FileKey&) const = default;
  };
  struct PageKey {
    FileKey file;
    uint64_t pgoff;
    auto operator<=>(const PageKey&) const = default;
  };
  struct File {
    UniqueFd fd;  // invalid: could not be opened
  };
  struct Page {
    std::unique_ptr<uint8_t[]> shadow;  // null until the first sample (baseline unknown)
    uint32_t tgid = 0;
  };
  enum class Read { kOk, kNotCached, kError };
  Read ReadPage(int fd, uint64_t pgoff, uint8_t* out) const;
  Status Emit(const PageKey& key, const Page& page, uint64_t ts, const uint8_t* now);

  uint64_t max_pages_;
  Sink sink_;
  Opener opener_;
  std::map<FileKey, File> files_;
  std::map<PageKey, Page> pages_;
  SubpageStats stats_;
};

}  // namespace iotwin::capture
