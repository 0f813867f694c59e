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
};

struct ChunkIndexEntry {
  uint64_t offset = 0;  // byte offset of the chunk header in the file
  uint64_t min_ts = 0;  // smallest / largest record timestamp in the chunk (0,0: none)
  uint64_t max_ts = 0;
  uint32_t records = 0;
  uint32_t flags = 0;  // chunk flags (layout::kChunkHasStrings)
};

class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the file header holding `meta` (a JSON object: host
  // facts, command line, layers; see docs/trace-format.md).
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                     const nlohmann::json& meta,
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
  Result<uint32_t> InternString(std::string_view s, bool truncated = false);

  // Compresses and writes the current chunk (no-op when empty).
  Status FlushChunk();

  // Flushes, then writes the index and the footer holding `summary` (a JSON object: stop
  // reason, exit status, event and loss counts). The file is complete after this returns ok.
  Status Finish(const nlohmann::json& summary);

  uint64_t records_written() const { return records_; }
  uint64_t bytes_written() const { return file_offset_; }
  const std::string& path() const { return path_; }

 private:
  TraceWriter(std::string path, UniqueFd fd, TraceWriterOptions options);
  Status WriteAll(const void* data, size_t size);

  std::string path_;
  UniqueFd fd_;
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
  std::unordered_map<std::string, uint32_t> strings_;
  bool finished_ = false;
  Status failed_;  // the write error that stopped the writer (ok while it works)
};

// Timestamp of a record for indexing (0 for records without time, e.g. STRING).
uint64_t RecordTimestamp(const iot_rec_hdr* rec);

}  // namespace iotwin
