// The pipeline of the CSV/JSONL export: rows are formatted on a second thread while the first
// reads the trace and keeps the model (table_context.h).
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/records.h"
#include "interop/table_rows.h"
#include "interop/table_schema.h"

namespace iotwin::interop::table_export {

// Rows are formatted on a second thread while this one reads the trace and keeps the model
// (each half is about half the work). Records go over in batches, copied with the strings their
// rows show (the reader reuses both), and one thread formats them all in order, so each table
// keeps the trace's order. The formatting thread writes the tables; nothing else touches them
// until Finish has joined it.
class RowPipeline {
 public:
  explicit RowPipeline(const RowFormatter& formatter);
  ~RowPipeline() { Finish(); }
  RowPipeline(const RowPipeline&) = delete;
  RowPipeline& operator=(const RowPipeline&) = delete;

  // Queues the row of record `h` (valid, zero-extended by the reader) for table `t`.
  void Push(Table* t, const iot_rec_hdr* h, const RowContext& ctx) {
    if (!worker_.joinable()) return formatter_.Row(*t, h, ctx);
    Batch& b = *filling_;
    Job& j = b.jobs.emplace_back();
    j.table = t;
    j.file = ctx.file;
    j.file2 = ctx.file2;
    const size_t fixed =
        h->type < fixed_size_.size() ? fixed_size_[h->type] : RecordFixedSize(h->type);
    j.record = b.Append(h, std::max<size_t>(h->size, fixed));
    for (int i = 0; i < 2; i++) {
      j.text_at[i] = static_cast<uint32_t>(b.texts.size());
      j.text_len[i] = static_cast<uint32_t>(ctx.text[i].size());
      if (!ctx.text[i].empty()) b.texts.append(ctx.text[i]);
    }
    if (b.jobs.size() >= kBatchRows || b.texts.size() >= kBatchTextBytes) Submit();
  }

  // Formats what is queued and ends the thread.
  void Finish();

 private:
  // Small batches: the records in flight stay in cache between the two threads.
  static constexpr size_t kBatches = 4, kBatchRows = 2048, kBatchTextBytes = size_t{1} << 20;

  struct Job {
    Table* table;
    uint32_t record;  // offset in Batch::words
    uint32_t file, file2;
    uint32_t text_at[2], text_len[2];
  };
  struct Batch {
    std::vector<Job> jobs;
    std::unique_ptr<uint64_t[]> words;  // the records, each 8-byte aligned
    size_t used = 0, cap = 0;
    std::string texts;

    // A copy of the record's `size` bytes; the padding of a last partial word is zero.
    uint32_t Append(const iot_rec_hdr* h, size_t size) {
      const size_t n = (size + 7) / 8;
      if (used + n > cap) {
        const size_t grown_cap = std::max(cap * 2, used + n + 4096);
        auto grown = std::make_unique<uint64_t[]>(grown_cap);
        if (used) std::memcpy(grown.get(), words.get(), used * 8);
        words = std::move(grown);
        cap = grown_cap;
      }
      words[used + n - 1] = 0;
      std::memcpy(words.get() + used, h, size);
      used += n;
      return static_cast<uint32_t>(used - n);
    }
    void Clear() {
      jobs.clear();
      used = 0;
      texts.clear();
    }
  };

  // Hands the filled batch to the formatting thread and takes an empty one.
  void Submit();
  // The formatting thread: formats the batches handed over, in order.
  void Work();

  const RowFormatter& formatter_;
  std::array<uint16_t, 64> fixed_size_{};  // RecordFixedSize by type
  std::array<Batch, kBatches> batches_;
  Batch* filling_ = nullptr;
  std::mutex mu_;
  std::condition_variable full_cv_, free_cv_;
  std::deque<Batch*> full_;
  std::vector<Batch*> free_;
  bool stop_ = false;
  std::thread worker_;  // last: started once everything it uses is built
};

}  // namespace iotwin::interop::table_export
