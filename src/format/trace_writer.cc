#include "format/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "format/layout.h"
#include "format/record_packing.h"
#include "format/records.h"

namespace iotwin {

uint64_t RecordTimestamp(const iot_rec_hdr* rec) {
  switch (rec->type) {
    case IOT_REC_STRING:
      return 0;
    case IOT_REC_IOVEC:
      return rec->size >= offsetof(iot_iovec, ts) + 8
                 ? reinterpret_cast<const iot_iovec*>(rec)->ts
                 : 0;
    case IOT_REC_FDLIST:
      return rec->size >= offsetof(iot_fdlist, ts) + 8
                 ? reinterpret_cast<const iot_fdlist*>(rec)->ts
                 : 0;
    default:
      // Every other v1 record keeps its u64 timestamp at offset 8 (CLOCK: monotonic_ns).
      if (rec->size < 16) return 0;
      uint64_t ts;
      std::memcpy(&ts, reinterpret_cast<const uint8_t*>(rec) + 8, sizeof ts);
      return ts;
  }
}

namespace {

// IOTWIN_MAX_STRING_BYTES and IOTWIN_MAX_STRINGS lower the string budget (tests reach it with a
// few names); they never raise it, so every trace stays within what readers accept.
void LowerBudgetFromEnvironment(TraceWriterOptions* options) {
  auto lower = [](const char* name, uint64_t* value) {
    const char* text = std::getenv(name);
    if (!text || !*text) return;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno == 0 && *end == '\0' && v < *value) *value = v;
  };
  lower("IOTWIN_MAX_STRING_BYTES", &options->max_string_bytes);
  uint64_t count = options->max_strings;
  lower("IOTWIN_MAX_STRINGS", &count);
  options->max_strings = static_cast<uint32_t>(count);
}

}  // namespace

TraceWriter::TraceWriter(OutputFile out, TraceWriterOptions options)
    : path_(out.name()), out_(std::move(out)), options_(options) {
  chunk_.reserve(options_.chunk_bytes + 65536);
}

TraceWriter::~TraceWriter() {
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  // Unfinished: the records so far go to the name, without footer (readers report the trace
  // as truncated), unless the options or Discard said otherwise.
  if (!finished_ && options_.keep_unfinished && out_.is_open()) (void)out_.Commit();
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                         const nlohmann::json& meta,
                                                         TraceWriterOptions options) {
  auto out = OutputFile::Create(path);
  if (!out.ok()) return out.status().WithContext("cannot create trace " + path);
  return Create(std::move(*out), meta, options);
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(OutputFile out,
                                                         const nlohmann::json& meta,
                                                         TraceWriterOptions options) {
  const std::string path = out.name();
  if (!meta.is_object()) return Status::Invalid("{}: trace metadata must be a JSON object", path);
  if (options.chunk_bytes < 4096 || options.chunk_bytes > (32u << 20)) {
    return Status::Invalid("{}: chunk size {} out of range [4 KiB, 32 MiB]", path,
                           options.chunk_bytes);
  }
  LowerBudgetFromEnvironment(&options);
  const bool keep = options.keep_unfinished;
  options.keep_unfinished = false;  // a header that fails leaves nothing
  std::unique_ptr<TraceWriter> w(new TraceWriter(std::move(out), options));
  w->cctx_ = ZSTD_createCCtx();
  if (!w->cctx_) return Status::Internal("{}: cannot allocate a zstd context", path);
  ZSTD_CCtx_setParameter(static_cast<ZSTD_CCtx*>(w->cctx_), ZSTD_c_compressionLevel,
                         options.zstd_level);

  std::string meta_text = meta.dump();
  layout::FileHeader h{};
  std::memcpy(h.magic, layout::kFileMagic, sizeof h.magic);
  h.major = layout::kMajor;
  h.minor = layout::kMinor;
  h.meta_len = static_cast<uint32_t>(meta_text.size());
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, &h, offsetof(layout::FileHeader, hash));
  XXH3_64bits_update(st, meta_text.data(), meta_text.size());
  h.hash = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  IOTWIN_RETURN_IF_ERROR(w->WriteAll(&h, sizeof h));
  IOTWIN_RETURN_IF_ERROR(w->WriteAll(meta_text.data(), meta_text.size()));
  if (options.publish_at_start) IOTWIN_RETURN_IF_ERROR(w->out_.Publish());
  w->options_.keep_unfinished = keep;
  return w;
}

Status TraceWriter::WriteAll(const void* data, size_t size) {
  Status st = out_.Write(data, size);
  if (!st.ok()) return st.WithContext(fmt::format("{}: write at byte {}", path_, file_offset_));
  file_offset_ += size;
  return Status::Ok();
}

Status TraceWriter::Append(const iot_rec_hdr* rec) {
  if (finished_) return Status::Internal("{}: append after Finish", path_);
  if (!failed_.ok()) return failed_;
  if (rec->size < sizeof(iot_rec_hdr)) {
    return Status::Invalid("{}: record of type {} has size {} < 4", path_, rec->type, rec->size);
  }
  // Records are padded to a multiple of 8 bytes so that every record in a chunk is 8-aligned.
  const uint8_t* p = reinterpret_cast<const uint8_t*>(rec);
  size_t start = chunk_.size();
  size_t padded = (static_cast<size_t>(rec->size) + 7) & ~size_t{7};
  if (padded > UINT16_MAX) return Status::Invalid("{}: record of {} bytes is too large", path_, padded);
  chunk_.insert(chunk_.end(), p, p + rec->size);
  chunk_.resize(start + padded, 0);
  uint16_t padded16 = static_cast<uint16_t>(padded);
  std::memcpy(chunk_.data() + start + offsetof(iot_rec_hdr, size), &padded16, sizeof padded16);
  chunk_records_++;
  records_++;
  if (rec->type == IOT_REC_STRING) chunk_flags_ |= layout::kChunkHasStrings;
  uint64_t ts = RecordTimestamp(rec);
  if (ts != 0) {
    if (ts < chunk_min_ts_) chunk_min_ts_ = ts;
    if (ts > chunk_max_ts_) chunk_max_ts_ = ts;
  }
  if (chunk_.size() >= options_.chunk_bytes) return FlushChunk();
  return Status::Ok();
}

Result<uint32_t> TraceWriter::InternString(std::string_view s, bool truncated) {
  if (s.size() > IOT_STRING_MAX) {
    s = s.substr(0, IOT_STRING_MAX);
    truncated = true;
  }
  const XXH128_hash_t digest = XXH3_128bits(s.data(), s.size());
  const NameKey key{digest.low64, digest.high64};
  auto it = strings_.find(key);
  if (it != strings_.end()) return it->second;
  if (strings_.size() >= options_.max_strings) {
    // The table is full: every further name shares one id, written once.
    over_budget_.shared++;
    if (shared_string_id_ == 0) {
      IOTWIN_ASSIGN_OR_RETURN(shared_string_id_,
                              WriteString("(names past the trace's string budget)", true));
    }
    return shared_string_id_;
  }
  uint32_t id = 0;
  if (full_string_bytes_ + s.size() <= options_.max_string_bytes) {
    full_string_bytes_ += s.size();
    IOTWIN_ASSIGN_OR_RETURN(id, WriteString(s, truncated));
  } else {
    over_budget_.digested++;
    const std::string bounded =
        fmt::format("{}#xxh128:{:016x}{:016x}", s.substr(0, kBoundedPrefix), digest.high64,
                    digest.low64);
    IOTWIN_ASSIGN_OR_RETURN(id, WriteString(bounded, true));
  }
  strings_.emplace(key, id);
  return id;
}

Result<uint32_t> TraceWriter::WriteString(std::string_view s, bool truncated) {
  const uint32_t id = next_string_id_++;
  uint8_t buf[sizeof(iot_string) + IOT_STRING_MAX];
  auto* rec = reinterpret_cast<iot_string*>(buf);
  InitRecord(rec, IOT_REC_STRING);
  rec->hdr.size = static_cast<uint16_t>(sizeof(iot_string) + s.size());
  rec->id = id;
  rec->len = static_cast<uint16_t>(s.size());
  rec->flags = truncated ? IOT_STRF_TRUNCATED : 0;
  if (!s.empty()) std::memcpy(buf + sizeof(iot_string), s.data(), s.size());  // data() may be null
  IOTWIN_RETURN_IF_ERROR(Append(&rec->hdr));
  return id;
}

void TraceWriter::Discard() {
  options_.keep_unfinished = false;
  out_.Discard();
}

Status TraceWriter::FlushChunk() {
  if (chunk_records_ == 0) return Status::Ok();
  const uint8_t* payload = chunk_.data();
  size_t payload_len = chunk_.size();
  if (options_.pack_records) {
    payload_len = PackRecords(chunk_.data(), chunk_.size(), chunk_records_, &packed_,
                              options_.packed_layout);
    payload = packed_.data();
  }
  size_t bound = ZSTD_compressBound(payload_len);
  if (compressed_.size() < bound) compressed_.resize(bound);
  size_t n = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), compressed_.data(), compressed_.size(),
                            payload, payload_len);
  if (ZSTD_isError(n)) {
    return Status::Internal("{}: zstd compression of chunk {} failed: {}", path_, chunk_seq_,
                            ZSTD_getErrorName(n));
  }
  layout::ChunkHeader h{};
  h.magic = layout::kChunkMagic;
  h.seq = chunk_seq_;
  h.records = chunk_records_;
  h.raw_len = static_cast<uint32_t>(payload_len);
  h.comp_len = static_cast<uint32_t>(n);
  // A packed layout is numbered as its codec (record_packing.h).
  h.codec = options_.pack_records ? static_cast<uint16_t>(options_.packed_layout)
                                  : layout::kCodecZstd;
  h.flags = chunk_flags_;
  h.min_ts = chunk_max_ts_ == 0 ? 0 : chunk_min_ts_;
  h.max_ts = chunk_max_ts_;
  h.payload_hash = XXH3_64bits(compressed_.data(), n);
  h.header_hash = layout::HashChunkHeader(h);
  index_.push_back({file_offset_, h.min_ts, h.max_ts, h.records, h.flags});
  // One write per chunk keeps a torn chunk the only possible damage of a killed writer.
  std::vector<uint8_t>& out = chunk_;  // reuse: the raw chunk is no longer needed
  out.resize(sizeof h + n);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, compressed_.data(), n);
  Status written = WriteAll(out.data(), out.size());
  // chunk_ now holds file bytes, not records, written or not.
  chunk_.clear();
  chunk_records_ = 0;
  if (!written.ok()) {
    failed_ = written;  // the writer takes no more records
    return written;
  }
  chunk_flags_ = 0;
  chunk_seq_++;
  chunk_min_ts_ = UINT64_MAX;
  chunk_max_ts_ = 0;
  return Status::Ok();
}

Status TraceWriter::Finish(const nlohmann::json& summary) {
  if (finished_) return Status::Internal("{}: Finish called twice", path_);
  if (!failed_.ok()) return failed_;
  IOTWIN_RETURN_IF_ERROR(FlushChunk());
  nlohmann::json footer = summary.is_null() ? nlohmann::json::object() : summary;
  if (footer.is_object() && (over_budget_.digested > 0 || over_budget_.shared > 0)) {
    footer["strings_over_budget"] = {{"digested", over_budget_.digested},
                                     {"shared", over_budget_.shared},
                                     {"max_string_bytes", options_.max_string_bytes},
                                     {"max_strings", options_.max_strings}};
  }
  std::string summary_text = footer.dump();
  std::vector<uint8_t> trailer(sizeof(layout::TrailerHeader) +
                               index_.size() * sizeof(layout::IndexEntry) + summary_text.size());
  layout::TrailerHeader th{layout::kTrailerMagic, static_cast<uint32_t>(index_.size()),
                           static_cast<uint32_t>(summary_text.size()), 0};
  std::memcpy(trailer.data(), &th, sizeof th);
  size_t pos = sizeof th;
  for (const auto& e : index_) {
    layout::IndexEntry ie{e.offset, e.min_ts, e.max_ts, e.records, e.flags};
    std::memcpy(trailer.data() + pos, &ie, sizeof ie);
    pos += sizeof ie;
  }
  std::memcpy(trailer.data() + pos, summary_text.data(), summary_text.size());

  layout::Footer f{};
  std::memcpy(f.magic, layout::kFooterMagic, sizeof f.magic);
  f.trailer_offset = file_offset_;
  f.trailer_len = trailer.size();
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, trailer.data(), trailer.size());
  XXH3_64bits_update(st, &f, offsetof(layout::Footer, hash));
  f.hash = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  IOTWIN_RETURN_IF_ERROR(WriteAll(trailer.data(), trailer.size()));
  IOTWIN_RETURN_IF_ERROR(WriteAll(&f, sizeof f));
  finished_ = true;
  return out_.Commit();
}

}  // namespace iotwin
