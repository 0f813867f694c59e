#include "format/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
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
    default:
      // Every other v1 record keeps its u64 timestamp at offset 8 (CLOCK: monotonic_ns).
      if (rec->size < 16) return 0;
      uint64_t ts;
      std::memcpy(&ts, reinterpret_cast<const uint8_t*>(rec) + 8, sizeof ts);
      return ts;
  }
}

TraceWriter::TraceWriter(std::string path, UniqueFd fd, TraceWriterOptions options)
    : path_(std::move(path)), fd_(std::move(fd)), options_(options) {
  chunk_.reserve(options_.chunk_bytes + 65536);
}

TraceWriter::~TraceWriter() {
  if (cctx_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                         const nlohmann::json& meta,
                                                         TraceWriterOptions options) {
  if (!meta.is_object()) return Status::Invalid("{}: trace metadata must be a JSON object", path);
  if (options.chunk_bytes < 4096 || options.chunk_bytes > (32u << 20)) {
    return Status::Invalid("{}: chunk size {} out of range [4 KiB, 32 MiB]", path,
                           options.chunk_bytes);
  }
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return Status::FromErrno(errno, "cannot create trace " + path);
  std::unique_ptr<TraceWriter> w(new TraceWriter(path, std::move(fd), options));
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
  return w;
}

Status TraceWriter::WriteAll(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_.get(), p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, fmt::format("{}: write at byte {}", path_, file_offset_));
    }
    p += n;
    size -= static_cast<size_t>(n);
    file_offset_ += static_cast<uint64_t>(n);
  }
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
  auto it = strings_.find(std::string(s));
  if (it != strings_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
  strings_.emplace(std::string(s), id);
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
  std::string summary_text = summary.is_null() ? "{}" : summary.dump();
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
  if (::fsync(fd_.get()) != 0 && errno != EINVAL) {
    return Status::FromErrno(errno, path_ + ": fsync");
  }
  finished_ = true;
  fd_.Reset();
  return Status::Ok();
}

}  // namespace iotwin
