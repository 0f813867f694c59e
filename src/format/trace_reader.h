// TraceReader: streaming, constant-memory reader of iotwin trace files (format v1).
//
// Every problem is reported with the file name, the byte offset and what was expected. A file
// whose writer was killed (no footer, a torn last chunk) reads up to its last complete chunk and
// then reports itself as truncated; a damaged chunk is an error unless the caller asked to
// salvage, in which case it is skipped, counted and described in damage().
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/fd.h"
#include "base/status.h"
#include "format/layout.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin {

struct TraceReaderOptions {
  // Skip damaged chunks (checksum, decompression or record-framing errors) instead of failing;
  // each is recorded in damage().
  bool salvage = false;
  // Upper bounds that keep a hostile file from causing giant allocations.
  uint32_t max_chunk_bytes = 64u << 20;
  uint32_t max_header_bytes = 1u << 20;
  // Every name of the trace stays in memory while it is read (records refer to names by id).
  // zstd lets a small file hold far more than its size, so the total is bounded: past this the
  // read fails with an error naming the offset, never an allocation the host cannot make.
  uint64_t max_string_bytes = 1ull << 30;
};

struct TraceDamage {
  // The file ended before its footer: the capture did not finish cleanly.
  bool truncated = false;
  uint64_t truncated_at = 0;  // offset of the first byte that could not be used
  std::string truncated_detail;
  // Chunks skipped in salvage mode, each with offset and reason.
  std::vector<std::string> skipped_chunks;
  uint64_t unknown_records = 0;  // records of types this build does not know (skipped)

  // The truncation and the skipped chunks in words; empty for a whole trace.
  std::string Description() const {
    std::string s = truncated ? truncated_detail : std::string();
    for (const std::string& c : skipped_chunks) s += (s.empty() ? "" : "; ") + c;
    return s;
  }
};

class TraceReader {
 public:
  // `path` "-" reads standard input: copied once per process into an unnamed temporary file
  // (the reader needs random access, the index being in the footer), so a command that reads
  // the trace twice reads the same copy. Messages name it "<stdin>".
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& path,
                                                   TraceReaderOptions options = {});
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // The header's JSON object.
  const nlohmann::json& meta() const { return meta_; }
  uint32_t format_major() const { return major_; }
  uint32_t format_minor() const { return minor_; }

  // Next record of a known type, zero-extended to at least RecordFixedSize(type) (so As<T>() is
  // safe); nullptr at the end of the trace. STRING records are consumed into the string table
  // and also returned. The pointer stays valid until the next call.
  //
  // Inline fast path (this runs once per record, tens of millions of times a report): a record
  // of a fixed-size type that is already full size and well framed is returned in place, as a
  // pointer into the decompressed chunk, with no copy. Everything else (chunk boundaries, short
  // records, STRING/IOVEC validation, framing errors, unknown types) takes NextSlow(), which
  // applies the same checks as before.
  Result<const iot_rec_hdr*> Next() {
    const size_t left = chunk_len_ - pos_;  // pos_ <= chunk_len_ always
    if (left >= sizeof(iot_rec_hdr)) {
      const uint8_t* rec = chunk_data_ + pos_;
      iot_rec_hdr hdr;
      std::memcpy(&hdr, rec, sizeof hdr);
      if (hdr.type < kFastTypes) {
        const uint16_t need = fast_size_[hdr.type];
        if (need != 0 && hdr.size >= need && hdr.size % 8 == 0 && hdr.size <= left) {
          pos_ += hdr.size;
          chunk_records_seen_++;
          return reinterpret_cast<const iot_rec_hdr*>(rec);
        }
      }
    }
    return NextSlow();
  }

  // String by id ("" for 0 or unknown ids: check HasString).
  std::string_view String(uint32_t id) const;
  bool HasString(uint32_t id) const { return strings_.count(id) != 0; }

  // The footer's summary, once the reader has reached the end of a complete file; also loaded
  // eagerly by Open() when the file has a valid footer.
  const std::optional<nlohmann::json>& summary() const { return summary_; }
  // The chunk index from the footer (empty for truncated files).
  const std::vector<ChunkIndexEntry>& index() const { return index_; }

  // Positions the reader on the first chunk that may hold records with ts >= `ts` (needs the
  // index; otherwise scans). The string table is rebuilt from the chunks skipped over.
  Status SeekTime(uint64_t ts);

  const TraceDamage& damage() const { return damage_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t offset() const { return offset_; }  // offset of the next unread chunk

 private:
  TraceReader(std::string path, UniqueFd fd, TraceReaderOptions options);
  Status ReadHeader();
  Status LoadFooter();
  // Reads and decompresses the chunk at offset_. Sets *end at the end of chunks.
  Status LoadChunk(bool* end);
  std::string Decompress(const layout::ChunkHeader& h, uint8_t* dst);
  // Decompresses and unpacks a codec-2 or codec-3 chunk into the chunk buffer; the problem, or
  // "".
  std::string UnpackChunk(const layout::ChunkHeader& h);
  Result<const iot_rec_hdr*> NextSlow();
  // Decompressed chunk buffer: grown without zero-filling (every byte used is decompressed into
  // first), and kept across chunks.
  void ResizeChunk(size_t len);
  void ClearChunk() {
    chunk_len_ = 0;
    pos_ = 0;
  }
  Status ReadAt(uint64_t offset, void* buf, size_t size, size_t* got);
  // Reports a framing error inside the current chunk (or records it and skips the chunk's rest).
  Status ChunkError(std::string problem);
  bool RestIsZero(uint64_t from);
  uint64_t Resync(uint64_t from);  // offset of the next valid chunk header, or data_end_
  Status HarvestStrings();         // load the current chunk's strings, then drop the chunk
  // Stores string `id`, within options_.max_string_bytes in all.
  Status KeepString(uint32_t id, const char* data, uint32_t len);
  std::string Where(uint64_t offset) const;

  std::string path_;
  UniqueFd fd_;
  TraceReaderOptions options_;
  nlohmann::json meta_;
  uint32_t major_ = 0, minor_ = 0;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;   // first chunk
  uint64_t data_end_ = 0;     // end of chunk area (footer/index start, or file size)
  uint64_t offset_ = 0;
  std::vector<uint8_t> compressed_;
  std::unique_ptr<uint8_t[]> packed_;  // a packed chunk's records, decompressed
  size_t packed_cap_ = 0;
  std::unique_ptr<uint8_t[]> chunk_buf_;
  size_t chunk_cap_ = 0;
  uint8_t* chunk_data_ = nullptr;  // the current chunk's records: chunk_buf_ (or compressed_ raw)
  size_t chunk_len_ = 0;
  size_t pos_ = 0;             // position in chunk_data_
  uint64_t chunk_offset_ = 0;  // file offset of the current chunk
  uint32_t chunk_seq_ = 0;
  uint32_t next_seq_ = 0;
  uint32_t chunk_records_expected_ = 0;
  uint32_t chunk_records_seen_ = 0;
  uint64_t chunk_max_ts_ = 0;
  uint64_t chunks_read_ = 0;
  std::vector<uint8_t> record_;  // zero-extension buffer
  // Fast-path table: fixed size of each record type that needs no further validation (0 for
  // STRING, IOVEC and unknown types, which take NextSlow()).
  static constexpr size_t kFastTypes = IOT_REC_MAX + 1;
  std::array<uint16_t, kFastTypes> fast_size_{};
  void* dctx_ = nullptr;
  std::unordered_map<uint32_t, std::string> strings_;
  uint64_t string_bytes_ = 0;  // sum of the sizes in strings_
  std::optional<nlohmann::json> summary_;
  std::vector<ChunkIndexEntry> index_;
  TraceDamage damage_;
  bool done_ = false;
};

}  // namespace iotwin
