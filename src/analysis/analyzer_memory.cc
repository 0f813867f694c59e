// Analyzer: the memory layer (page faults and mapped I/O, the page cache and its misses,
// write-back, cache state at start) and its part of the report model ("memory").
#include "analysis/analyzer.h"

#include <algorithm>
#include <array>

#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"

namespace iotwin::analysis {
using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers

using nlohmann::json;

namespace {

// The memory layer's trace-wide counters.
struct MemoryCounts {
  uint64_t faults, faults_major, faults_write, fault_pages, faults_unattributed;
  uint64_t pc_add, pc_delete, ra_windows, ra_pages;
  uint64_t wb_dirtied, wb_written, wb_works, wb_waits;
  uint64_t page_size;
  bool have_page_cache;
  uint64_t cache_state_files, cache_state_resident, cache_state_total;
};
json MemoryJson(const MemoryCounts& c, const ReadPages& read) {
  json mem = {{"faults", {{"total", c.faults}, {"major", c.faults_major},
                          {"minor", c.faults - c.faults_major}, {"write", c.faults_write},
                          {"pages", c.fault_pages}, {"unattributed", c.faults_unattributed}}},
              {"page_cache", {{"added_pages", c.pc_add}, {"deleted_pages", c.pc_delete},
                              {"readahead_windows", c.ra_windows}, {"readahead_pages", c.ra_pages}}},
              {"writeback", {{"dirtied_pages", c.wb_dirtied}, {"written_pages", c.wb_written},
                             {"flusher_works", c.wb_works}, {"waits", c.wb_waits}}},
              {"page_size", c.page_size}};
  // A fault is major as the kernel counts it (ru_majflt; the capture's flag); the hit ratio is
  // the share of pages read that did not miss (docs/report.md).
  if (c.faults) mem["fault_hit_ratio"] = Round4(Share(c.faults - c.faults_major, c.faults));
  const uint64_t accessed = SaturatingAdd(SaturatingAdd(read.call, read.mapped), read.exec);
  const uint64_t missed = SaturatingAdd(read.missed_call, read.missed_fault);
  if (c.have_page_cache) {
    mem["misses"] = {{"read_pages", read.call},       {"mapped_pages", read.mapped},
                     {"exec_pages", read.exec},
                     {"missed_call_pages", read.missed_call},
                     {"missed_fault_pages", read.missed_fault},
                     {"untracked_pages", read.untracked}};
    if (accessed) mem["read_hit_ratio"] = Round4(1.0 - std::min(1.0, Share(missed, accessed)));
  }
  if (c.cache_state_files) {
    mem["cache_at_start"] = {{"files", c.cache_state_files},
                             {"resident_pages", c.cache_state_resident},
                             {"total_pages", c.cache_state_total}};
  }
  return mem;
}

}  // namespace

// ---- memory layer --------------------------------------------------------------------------

void Analyzer::OnPageFault(const iot_page_fault& r) {
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || !TaskAllowed(r.tgid, r.tid)) {
    ++filtered_out_;
    return;
  }
  if (!FileAllowed(file)) {
    ++filtered_out_;
    NoteScopedOut(file, &scoped_out_faults_, nullptr, 0);
    return;
  }
  first_ts_ = std::min(first_ts_, r.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  uint64_t pages = r.nr_pages ? r.nr_pages : 1;
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  // Mapped I/O and cache misses are storage's: a mapping of /dev/zero or of a /proc file is not.
  const uint64_t mapped_before = f ? f->mmap_read_pages : 0;
  // Major as the kernel counts it (docs/report.md): a fault that waited for pages an earlier
  // readahead was still reading mapped missed pages, yet the kernel counts it minor.
  const bool major = r.flags & IOT_PFF_MAJOR;
  if (f && model::IsStorage(f->kind)) MappedFault(r, file, *f, pages);
  if (open_intents_ != 0) NotePhaseFault(r.tid, f ? f->mmap_read_pages - mapped_before : 0, major);
  ++faults_;
  fault_pages_ += pages;
  if (major) {
    ++faults_major_;
    series_.Add(kMajorFaults, r.ts, 1);
  }
  if (r.flags & IOT_PFF_WRITE) ++faults_write_;
  ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
  ++t.faults;
  ++procs_[t.proc].faults;
  if (!f) {
    ++faults_unattributed_;
    return;
  }
  ++f->faults;
  f->fault_pages += pages;
  f->max_end = std::max(f->max_end, SaturatingMul(SaturatingAdd(r.pgoff, pages), page_size_));
  if (major) ++f->faults_major;
  if (r.flags & IOT_PFF_WRITE) ++f->faults_write;
  if (!heatmaps_.empty()) {
    Heat(file, r.ts, SaturatingMul(r.pgoff, page_size_), SaturatingMul(pages, page_size_),
         (r.flags & IOT_PFF_WRITE) ? 1 : 0);
  }
}

bool Analyzer::MappedFault(const iot_page_fault& r, int32_t file, FileStats& f, uint64_t pages) {
  // The pages the fault mapped: its fault-around window when that holds the faulting page.
  uint64_t first = r.pgoff;
  if (r.nr_pages && r.around_start <= r.pgoff && r.pgoff - r.around_start < r.nr_pages)
    first = r.around_start;
  uint64_t end = PendingPages::End(first, pages);
  // Fault-around never maps past the end of the file.
  const uint64_t size_pages = f.fsize ? PageIndex(f.fsize - 1) + 1 : 0;
  if (size_pages > first && end > size_pages) end = size_pages;
  const bool write = r.flags & IOT_PFF_WRITE;
  if (write) {
    // Pages dirtied through a shared mapping reach the file at write-back: the program wrote
    // them. A private mapping's write fault copies the page into anonymous memory.
    NoteAccess(file, f, kAccessWrite, first, end);
    if (r.flags & IOT_PFF_SHARED) {
      ++f.shared_write_faults;
      f.mmap_write_pages = SaturatingAdd(f.mmap_write_pages, end - first);
      series_.AddOpAndBytes(kMmapWriteOps, kMmapWriteBytes, r.ts,
                            SaturatingMul(end - first, page_size_));
    }
    return false;
  }
  // A fault that waited for pages another fault of the same window brought in maps them again:
  // only pages outside the previous fault's window are new reads.
  uint64_t fresh = end - first;
  const uint64_t lo = std::max(first, f.fault_window_first);
  const uint64_t hi = std::min(end, f.fault_window_end);
  if (lo < hi) {
    fresh -= hi - lo;
    f.fault_window_first = std::min(first, f.fault_window_first);
    f.fault_window_end = std::max(end, f.fault_window_end);
  } else {
    f.fault_window_first = first;
    f.fault_window_end = end;
  }
  if (r.flags & IOT_PFF_EXEC) {
    ++f.exec_faults;
    f.exec_pages = SaturatingAdd(f.exec_pages, fresh);
  } else {
    ++f.read_faults;
    f.mmap_read_pages = SaturatingAdd(f.mmap_read_pages, fresh);
    series_.AddOpAndBytes(kMmapReadOps, kMmapReadBytes, r.ts, SaturatingMul(fresh, page_size_));
  }
  const uint64_t missed = NoteAccess(file, f, kAccessFault, first, end);
  f.missed_fault_pages = SaturatingAdd(f.missed_fault_pages, missed);
  return missed > 0;
}

void Analyzer::NotePageAdd(int32_t file_index, FileStats& f, uint64_t first, uint64_t count,
                           uint64_t ts) {
  // The capture writes a run of insertions when the run ends (a read call's record at its exit,
  // a run at its thread's next readahead window or fault, or 1 ms after it began): reads of the
  // file recorded before the run but seen since it began found its pages only because the run
  // brought them in. They count as those reads' misses, newest read first, each page once;
  // pages a write put in the cache are the program's own, neither misses nor pending.
  constexpr uint64_t kRunLateNs = 2'000'000;
  // The run's pages no read has taken yet, as ranges in order (held in place: this runs for
  // every insertion record). A range splits in two only around a whole read, which then has
  // nothing left to credit: each read adds at most one range, so at most kRecentReads + 1.
  std::array<std::pair<uint64_t, uint64_t>, kRecentReads + 1> rest;
  rest[0] = {first, PendingPages::End(first, count)};
  size_t n = 1;
  for (auto r = f.recent_reads.rbegin(); r != f.recent_reads.rend() && n > 0; ++r) {
    // A read from before the run began found its pages cached (evicted since, added again).
    if (SaturatingAdd(r->seen_ts, kRunLateNs) < ts) break;
    for (size_t i = 0; i < n && r->first < r->end;) {
      const auto [a, b] = rest[i];
      const uint64_t lo = std::max(a, r->first), hi = std::min(b, r->end);
      if (lo >= hi) {
        ++i;
        continue;
      }
      CreditRecentRead(f, *r, lo, hi, ts);
      // [a, b) becomes its pieces outside [lo, hi): none, one or two.
      std::array<std::pair<uint64_t, uint64_t>, 2> pieces;
      size_t k = 0;
      if (a < lo) pieces[k++] = {a, lo};
      if (hi < b) pieces[k++] = {hi, b};
      const auto tail = rest.begin() + static_cast<std::ptrdiff_t>(i + 1);
      const auto end = rest.begin() + static_cast<std::ptrdiff_t>(n);
      if (k == 2)
        std::copy_backward(tail, end, end + 1);
      else if (k == 0)
        std::copy(tail, end, tail - 1);
      for (size_t j = 0; j < k; j++) rest[i + j] = pieces[j];
      n = n - 1 + k;
      i += k;
    }
  }
  for (size_t i = 0; i < n; i++) AddPending(file_index, f, rest[i].first, rest[i].second);
}

void Analyzer::CreditRecentRead(FileStats& f, RecentRead& r, uint64_t lo, uint64_t hi,
                                uint64_t /*ts*/) {
  if (r.access == kAccessCall) f.missed_call_pages = SaturatingAdd(f.missed_call_pages, hi - lo);
  if (r.access == kAccessFault) f.missed_fault_pages = SaturatingAdd(f.missed_fault_pages, hi - lo);
  // Credited once: the same pages evicted and added again without a new read are pending.
  if (lo == r.first) {
    r.first = hi;
  } else {
    r.end = lo;
  }
}


void Analyzer::AddPending(int32_t file_index, FileStats& f, uint64_t first, uint64_t end) {
  const uint64_t added = pending_pages_.Add(static_cast<uint32_t>(file_index), first, end);
  if (added == 0) return;
  if (f.pending_pages == 0) {
    f.pending_first = first;
    f.pending_end = end;
  } else {
    f.pending_first = std::min(f.pending_first, first);
    f.pending_end = std::max(f.pending_end, end);
  }
  f.pending_pages += added;
}
void Analyzer::OnPageCache(const iot_page_cache& r) {
  have_page_cache_ = true;
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || !FileAllowed(file) ||
      (r.tgid != 0 && !TaskAllowed(r.tgid, r.tid))) {
    ++filtered_out_;
    return;
  }
  uint64_t pages = r.nr_pages ? r.nr_pages : 1;
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  switch (r.kind) {
    case IOT_PC_ADD:
      pc_add_ += pages;
      if (f) {
        f->pc_add += pages;
        if (model::IsStorage(f->kind)) NotePageAdd(file, *f, r.index, pages, r.ts);
      }
      break;
    case IOT_PC_DELETE:
      pc_delete_ += pages;
      if (f) {
        f->pc_delete += pages;
        // An evicted page read later is read from storage again: a miss then, when its
        // insertion is seen; not one of this insertion's.
        TakePending(file, *f, r.index, PendingPages::End(r.index, pages));
      }
      break;
    case IOT_PC_READAHEAD:
      ++ra_windows_;
      ra_pages_ += r.nr_pages;
      if (f) {
        ++f->ra_windows;
        f->ra_pages += r.nr_pages;
      }
      break;
    default: break;
  }
}

void Analyzer::OnWriteback(const iot_writeback& r) {
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || (r.ino && !FileAllowed(file))) {
    ++filtered_out_;
    return;
  }
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  switch (r.kind) {
    case IOT_WB_DIRTY_FOLIO: {
      uint64_t pages = r.nr ? r.nr : 1;
      wb_dirtied_ += pages;
      if (f) f->wb_dirtied += pages;
      break;
    }
    case IOT_WB_INODE_DONE:
      wb_written_ += r.nr;
      if (f) f->wb_written += r.nr;
      break;
    case IOT_WB_WORK_START: ++wb_works_; break;
    case IOT_WB_WAIT: ++wb_waits_; break;
    default: break;
  }
}

void Analyzer::OnCacheState(const iot_cache_state& r) {
  if (!r.ino) return;
  int32_t file = FileIndex(r.dev, r.ino, true);
  FileStats& f = files_[static_cast<size_t>(file)];
  // The capture names an O_TMPFILE file by the directory it was opened in.
  if (!f.tmpfile) AddFileName(file, r.path_id, AbsoluteName(r.path_id));
  f.cache_resident = static_cast<int64_t>(r.resident_pages);
  f.cache_total = static_cast<int64_t>(r.total_pages);
  ++cache_state_files_;
  cache_state_resident_ += r.resident_pages;
  cache_state_total_ += r.total_pages;
}
json Analyzer::MemoryModel(const ReadPages& read) const {
  if (!faults_ && !have_page_cache_ && !wb_dirtied_ && !wb_written_ && !cache_state_files_)
    return nullptr;
  const MemoryCounts counts = {.faults = faults_,
                               .faults_major = faults_major_,
                               .faults_write = faults_write_,
                               .fault_pages = fault_pages_,
                               .faults_unattributed = faults_unattributed_,
                               .pc_add = pc_add_,
                               .pc_delete = pc_delete_,
                               .ra_windows = ra_windows_,
                               .ra_pages = ra_pages_,
                               .wb_dirtied = wb_dirtied_,
                               .wb_written = wb_written_,
                               .wb_works = wb_works_,
                               .wb_waits = wb_waits_,
                               .page_size = page_size_,
                               .have_page_cache = have_page_cache_,
                               .cache_state_files = cache_state_files_,
                               .cache_state_resident = cache_state_resident_,
                               .cache_state_total = cache_state_total_};
  return MemoryJson(counts, read);
}
}  // namespace iotwin::analysis
