// TraceWriter: streaming writer of iotwin trace files (format v1, docs/trace-format.md).
//
// Records are appended to an in-memory chunk; a full chunk is zstd-compressed, framed with a
// checksummed header and written out, so memory stays bounded whatever the trace length and a
// writer killed mid-way leaves a file readable up to its last complete chunk. Finish() writes
// the time index and the footer that marks a clean end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/fd.h"
#include "base/output_file.h"
#include "base/status.h"
#include "format/record_packing.h"
#include "iotwin_abi.h"

namespace iotwin {

struct TraceWriterOptions {
  size_t chunk_bytes = 1 << 20;  // uncompressed bytes per chunk
  int zstd_level = 3;
  // Chunks XOR-packed before compression, in `packed_layout`: codec 3 (format 1.2) by default,
  // or codec 2, which readers of format 1.1 read. Off writes format-1.0 chunks (codec 1), which
  // every reader reads.
  bool pack_records = true;
  PackedLayout packed_layout = PackedLayout::kShaped;
  // The string table's budget (docs/security.md, "Names"): the bytes of names kept in full, and
  // the distinct names. Past the bytes a new name is stored in a bounded form (its first
  // kBoundedPrefix bytes and a 128-bit digest); past the count every new name shares one id.
  // Both kinds are flagged IOT_STRF_TRUNCATED (no consumer takes them for a path) and counted in
  // the footer ("strings_over_budget"). The defaults keep every trace within the reader's 1 GiB
  // of names (TraceReaderOptions::max_string_bytes) and the writer's own table under about
  // 128 MiB (it keeps a digest of each name, not the name).
  uint64_t max_string_bytes = 256ull << 20;
  uint32_t max_strings = 1u << 21;
  // Destroyed before Finish: true renames what was written to the name, without footer, which
  // readers report as truncated (a recording that failed keeps what it captured); false removes
  // it (TraceWriter::Discard does the same for one writer).
  bool keep_unfinished = true;
  // The file is renamed to its name as soon as its header is written (OutputFile::Publish), then
  // written there: a recording is at its name while it runs, and where it was killed.
  bool publish_at_start = false;
};

struct ChunkIndexEntry {
  uint64_t offset = 0;  // byte offset of the chunk header in the file
  uint64_t min_ts = 0;  // smallest / largest record timestamp in the chunk (0,0: none)
  uint64_t max_ts = 0;
  uint32_t records = 0;
  uint32_t flags = 0;  // chunk flags (layout::kChunkHasStrings)
};

// Names that did not fit the string budget (TraceWriterOptions::max_string_bytes, max_strings).
struct StringsOverBudget {
  uint64_t digested = 0;  // new names stored as prefix + digest
  uint64_t shared = 0;    // new names given the one shared id (each time one is interned)
};

class TraceWriter {
 public:
  // Bytes of a name kept before the digest when it is stored in bounded form.
  static constexpr size_t kBoundedPrefix = 64;

  // Writes the trace for `path` through an OutputFile (base/output_file.h: a private temporary
  // renamed over the name by Finish, never through a planted symlink) and writes the file header
  // holding `meta` (a JSON object: host facts, command line, layers; see docs/trace-format.md).
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                     const nlohmann::json& meta,
                                                     TraceWriterOptions options = {});
  // The same into an output already opened.
  static Result<std::unique_ptr<TraceWriter>> Create(OutputFile out, const nlohmann::json& meta,
                                                     TraceWriterOptions options = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one record: `rec` starts with iot_rec_hdr whose size is `rec->size`.
  Status Append(const iot_rec_hdr* rec);
  template <typename T>
    requires(!std::is_pointer_v<T>)
  Status Append(const T& rec) {
    return Append(&rec.hdr);
  }

  // Returns the id of `s`, writing a STRING record the first time it is seen. Ids start at 1.
  // Past the string budget the record holds a bounded form of `s` (TraceWriterOptions).
  Result<uint32_t> InternString(std::string_view s, bool truncated = false);
  const StringsOverBudget& strings_over_budget() const { return over_budget_; }

  // Removes what was written: nothing is left at the name (an export or a filter that failed).
  void Discard();

  // Compresses and writes the current chunk (no-op when empty).
  Status FlushChunk();

  // Flushes, then writes the index and the footer holding `summary` (a JSON object: stop
  // reason, exit status, event and loss counts; the writer adds "strings_over_budget" when names
  // went over it), and renames the file to its name. The file is complete after this returns ok.
  Status Finish(const nlohmann::json& summary);

  uint64_t records_written() const { return records_; }
  uint64_t bytes_written() const { return file_offset_; }
  const std::string& path() const { return path_; }

 private:
  struct NameKey {
    uint64_t low = 0, high = 0;  // XXH3-128 of the name
    bool operator==(const NameKey&) const = default;
  };
  struct NameKeyHash {
    size_t operator()(const NameKey& k) const noexcept { return static_cast<size_t>(k.low); }
  };

  TraceWriter(OutputFile out, TraceWriterOptions options);
  Status WriteAll(const void* data, size_t size);
  Result<uint32_t> WriteString(std::string_view s, bool truncated);

  std::string path_;
  OutputFile out_;
  TraceWriterOptions options_;
  std::vector<uint8_t> chunk_;
  std::vector<uint8_t> packed_;
  std::vector<uint8_t> compressed_;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  uint64_t file_offset_ = 0;
  uint64_t records_ = 0;
  uint32_t chunk_records_ = 0;
  uint32_t chunk_seq_ = 0;
  uint16_t chunk_flags_ = 0;
  uint64_t chunk_min_ts_ = UINT64_MAX;
  uint64_t chunk_max_ts_ = 0;
  std::vector<ChunkIndexEntry> index_;
  std::unordered_map<NameKey, uint32_t, NameKeyHash> strings_;  // by digest: bounded memory
  uint32_t next_string_id_ = 1;
  uint64_t full_string_bytes_ = 0;  // bytes of the names stored in full
  uint32_t shared_string_id_ = 0;   // the id names past max_strings share (0: none yet)
  StringsOverBudget over_budget_;
  bool finished_ = false;
  Status failed_;  // the write error that stopped the writer (ok while it works)
};

// Timestamp of a record for indexing (0 for records without time, e.g. STRING).
uint64_t RecordTimestamp(const iot_rec_hdr* rec);

}  // namespace iotwin
