#include "interop/table_pipeline.h"

#include <sched.h>

#include <algorithm>

namespace iotwin::interop::table_export {

RowPipeline::RowPipeline(const RowFormatter& formatter) : formatter_(formatter) {
  // On one CPU a second thread only adds the hand-over: rows are then formatted in Push.
  cpu_set_t cpus;
  if (::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2) return;
  for (uint16_t type = 0; type < fixed_size_.size(); type++) {
    fixed_size_[type] = static_cast<uint16_t>(RecordFixedSize(type));
  }
  for (Batch& b : batches_) {
    b.jobs.reserve(kBatchRows);
    free_.push_back(&b);
  }
  filling_ = free_.back();
  free_.pop_back();
  worker_ = std::thread([this] { Work(); });
}

void RowPipeline::Finish() {
  if (!worker_.joinable()) return;
  if (!filling_->jobs.empty()) Submit();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  full_cv_.notify_one();
  worker_.join();
}

void RowPipeline::Submit() {
  std::unique_lock lock(mu_);
  full_.push_back(filling_);
  full_cv_.notify_one();
  free_cv_.wait(lock, [&] { return !free_.empty(); });
  filling_ = free_.back();
  free_.pop_back();
}

void RowPipeline::Work() {
  for (;;) {
    Batch* b;
    {
      std::unique_lock lock(mu_);
      full_cv_.wait(lock, [&] { return !full_.empty() || stop_; });
      if (full_.empty()) return;
      b = full_.front();
      full_.pop_front();
    }
    for (const Job& j : b->jobs) {
      RowContext ctx;
      ctx.file = j.file;
      ctx.file2 = j.file2;
      for (int i = 0; i < 2; i++) ctx.text[i] = {b->texts.data() + j.text_at[i], j.text_len[i]};
      formatter_.Row(*j.table, reinterpret_cast<const iot_rec_hdr*>(b->words.get() + j.record),
                     ctx);
    }
    b->Clear();
    {
      std::lock_guard lock(mu_);
      free_.push_back(b);
    }
    free_cv_.notify_one();
  }
}

}  // namespace iotwin::interop::table_export
