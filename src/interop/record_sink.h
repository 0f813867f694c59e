// RecordSink: where importers put records. TraceFileSink writes an iotwin trace; MemorySink keeps
// records in memory (tests, fuzzing).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/fd.h"
#include "base/status.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::interop {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Returns the id of `s` (1, 2, ...), defining it before first use. A string longer than
  // IOT_STRING_MAX is cut there, its STRING record flagged IOT_STRF_TRUNCATED, and counted.
  virtual Result<uint32_t> InternString(std::string_view s) = 0;
  // Strings cut to IOT_STRING_MAX by InternString (each time one is interned).
  uint64_t strings_truncated() const { return strings_truncated_; }
  virtual Status Append(const iot_rec_hdr* rec) = 0;
  template <typename T>
    requires(!std::is_pointer_v<T>)
  Status Append(const T& rec) {
    return Append(&rec.hdr);
  }
  // Clock facts the importer learned from its input (merged into the header's "host" object:
  // {"clock": ..., "anchor": {...}}). Importers call it once, as soon as they know, before or
  // after the first records; a file sink holds records back until then (bounded).
  virtual void SetClock(const nlohmann::json& host_clock) = 0;
  // Record counts per type name, for the footer summary.
  const std::map<std::string, uint64_t>& counts() const { return counts_; }
  // Smallest and largest record timestamps seen (0, 0 when none).
  uint64_t min_ts() const { return min_ts_ == UINT64_MAX ? 0 : min_ts_; }
  uint64_t max_ts() const { return max_ts_; }
  // Events lost per source name, from LOST records (their counts are cumulative per CPU).
  std::map<std::string, uint64_t> LostTotals() const;

 protected:
  void Count(const iot_rec_hdr* rec);
  std::map<std::string, uint64_t> counts_;
  uint64_t min_ts_ = UINT64_MAX;
  uint64_t max_ts_ = 0;
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost_;  // (source, cpu) -> last count
  uint64_t strings_truncated_ = 0;
};

// An output file created where nothing exists yet (O_CREAT | O_EXCL | O_NOFOLLOW), so that a file
// or a symlink planted at its name (pointing at a victim file) is refused rather than written
// through. Writers that open by name use writer_path(): /proc/self/fd/N, which reopens the file
// created here whatever happens to its name meanwhile.
class ExclusiveFile {
 public:
  static Result<ExclusiveFile> Create(const std::string& path);
  const std::string& path() const { return path_; }
  const std::string& writer_path() const { return writer_path_; }
  // Removes the file (a failed write), if it is still the one created here.
  void Remove();

 private:
  std::string path_, writer_path_;
  UniqueFd fd_;
};

// Writes a trace file. The file header (metadata) is written once the importer has called
// SetClock, or when kMaxHeld records are waiting, or at Finish: whichever comes first.
class TraceFileSink : public RecordSink {
 public:
  static constexpr size_t kMaxHeld = 1 << 16;

  TraceFileSink(std::string path, nlohmann::json meta);
  // Adds keys to the header metadata (before it is written).
  void MergeMeta(const nlohmann::json& more);
  Result<uint32_t> InternString(std::string_view s) override;
  Status Append(const iot_rec_hdr* rec) override;
  void SetClock(const nlohmann::json& host_clock) override;
  // Writes the footer with `summary` (counts per type are added as "events") and renames the
  // trace to its name (base/output_file.h).
  Status Finish(nlohmann::json summary);
  // Removes what was written: a failed import leaves nothing at the name.
  void Discard() {
    if (writer_) writer_->Discard();
  }
  const nlohmann::json& meta() const { return meta_; }

 private:
  Status Open();

  std::string path_;
  nlohmann::json meta_;
  std::unique_ptr<TraceWriter> writer_;
  bool clock_set_ = false;
  // Held until the writer exists: strings in id order, records with their bytes.
  std::unordered_map<std::string, uint32_t> held_ids_;
  std::vector<std::pair<std::string, bool>> held_strings_;  // bytes, truncated
  std::vector<std::vector<uint8_t>> held_records_;
  // Interleaving of held strings and records (true: next string, false: next record).
  std::vector<bool> held_order_;
};

// Keeps everything in memory: strings by id and copies of the records.
class MemorySink : public RecordSink {
 public:
  Result<uint32_t> InternString(std::string_view s) override;
  Status Append(const iot_rec_hdr* rec) override;
  void SetClock(const nlohmann::json& host_clock) override { clock_ = host_clock; }

  std::string_view String(uint32_t id) const;
  const std::vector<std::vector<uint8_t>>& records() const { return records_; }
  // Records of one type, as typed copies.
  template <typename T>
  std::vector<T> Of(uint16_t type) const {
    std::vector<T> out;
    for (const auto& r : records_) {
      const auto* h = reinterpret_cast<const iot_rec_hdr*>(r.data());
      if (h->type != type) continue;
      T t{};
      std::memcpy(&t, r.data(), std::min(sizeof(T), r.size()));
      out.push_back(t);
    }
    return out;
  }
  const nlohmann::json& clock() const { return clock_; }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> strings_;
  std::vector<std::vector<uint8_t>> records_;
  nlohmann::json clock_;
};

}  // namespace iotwin::interop
