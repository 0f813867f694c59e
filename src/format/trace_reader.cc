#include "format/trace_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/json_parse.h"
#include "base/mutex.h"
#include "format/layout.h"
#include "format/record_packing.h"
#include "format/records.h"

namespace iotwin {

TraceReader::TraceReader(std::string path, UniqueFd fd, TraceReaderOptions options)
    : path_(std::move(path)), fd_(std::move(fd)), options_(options) {}

TraceReader::~TraceReader() {
  if (dctx_) ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

std::string TraceReader::Where(uint64_t offset) const {
  return fmt::format("{}: byte {}", path_, offset);
}

namespace {

constexpr const char* kStdinName = "<stdin>";

// Standard input as a regular file: itself when it is one (`< trace`), else its bytes copied
// into an O_TMPFILE under $TMPDIR (or /tmp). Memory does not grow with the trace.
Result<UniqueFd> CopyStdin() {
  struct stat st;
  if (::fstat(STDIN_FILENO, &st) != 0) return Status::FromErrno(errno, "cannot stat <stdin>");
  if (S_ISREG(st.st_mode)) {
    UniqueFd same(::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
    if (!same.valid()) return Status::FromErrno(errno, "cannot duplicate <stdin>");
    return same;
  }
  if (::isatty(STDIN_FILENO)) {
    return Status::Invalid("<stdin> is a terminal: pipe a trace into it, or name a trace file");
  }
  const char* dir = std::getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  UniqueFd copy(::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!copy.valid()) {
    return Status::FromErrno(errno, fmt::format("cannot create a temporary file in {} for <stdin>",
                                                dir));
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "cannot read <stdin>");
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(copy.get(), buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Status::FromErrno(w < 0 ? errno : EIO, "cannot copy <stdin> to " +
                                                                   std::string(dir));
      done += w;
    }
  }
  return copy;
}

// The copy of standard input, made at the first open of "-" and kept for the process.
Result<UniqueFd> OpenStdin() {
  static Mutex mu;
  static UniqueFd copy GUARDED_BY(mu);
  static Status failed GUARDED_BY(mu) = Status::Ok();
  MutexLock lock(&mu);
  if (!copy.valid() && failed.ok()) {
    auto made = CopyStdin();
    if (made.ok()) {
      copy = std::move(*made);
    } else {
      failed = made.status();
    }
  }
  if (!failed.ok()) return failed;
  UniqueFd fd(::fcntl(copy.get(), F_DUPFD_CLOEXEC, 3));
  if (!fd.valid()) return Status::FromErrno(errno, "cannot duplicate the copy of <stdin>");
  return fd;
}

}  // namespace

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path_arg,
                                                       TraceReaderOptions options) {
  UniqueFd fd;
  std::string path = path_arg;
  if (path == "-") {
    IOTWIN_ASSIGN_OR_RETURN(fd, OpenStdin());
    path = kStdinName;
  } else {
    fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(errno, "cannot open trace " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "cannot stat trace " + path);
  if (!S_ISREG(st.st_mode)) return Status::Invalid("{}: not a regular file", path);
  std::unique_ptr<TraceReader> r(new TraceReader(path, std::move(fd), options));
  r->file_size_ = static_cast<uint64_t>(st.st_size);
  r->dctx_ = ZSTD_createDCtx();
  if (!r->dctx_) return Status::Internal("{}: cannot allocate a zstd context", path);
  for (uint16_t type = 0; type < kFastTypes; type++) {
    if (type == IOT_REC_STRING || type == IOT_REC_IOVEC || type == IOT_REC_FDLIST) {
      continue;  // validated in NextSlow()
    }
    r->fast_size_[type] = static_cast<uint16_t>(RecordFixedSize(type));
  }
  IOTWIN_RETURN_IF_ERROR(r->ReadHeader());
  IOTWIN_RETURN_IF_ERROR(r->LoadFooter());
  r->offset_ = r->data_start_;
  return r;
}

Status TraceReader::ReadAt(uint64_t offset, void* buf, size_t size, size_t* got) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_.get(), static_cast<uint8_t*>(buf) + done, size - done,
                        static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, fmt::format("{}: read", Where(offset + done)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (got) {
    *got = done;
  } else if (done != size) {
    return Status::Error(Status::Code::kTruncated,
                         fmt::format("{}: expected {} bytes, file ends after {}", Where(offset),
                                     size, done));
  }
  return Status::Ok();
}

Status TraceReader::ReadHeader() {
  layout::FileHeader h;
  if (file_size_ < sizeof h) {
    return Status::Error(Status::Code::kTruncated,
                         fmt::format("{}: not an iotwin trace: {} bytes, expected a {}-byte header",
                                     Where(0), file_size_, sizeof h));
  }
  IOTWIN_RETURN_IF_ERROR(ReadAt(0, &h, sizeof h, nullptr));
  if (std::memcmp(h.magic, layout::kFileMagic, sizeof h.magic) != 0) {
    return Status::Corrupt("{}: not an iotwin trace (expected magic 89 49 4f 54 57 0d 0a 1a)",
                           Where(0));
  }
  if (h.major != layout::kMajor) {
    return Status::Unsupported("{}: trace format version {}.{}, this build reads {}.x", Where(8),
                               h.major, h.minor, layout::kMajor);
  }
  major_ = h.major;
  minor_ = h.minor;
  if (h.meta_len > options_.max_header_bytes) {
    return Status::Corrupt("{}: metadata length {} exceeds the limit of {} bytes", Where(16),
                           h.meta_len, options_.max_header_bytes);
  }
  if (sizeof h + h.meta_len > file_size_) {
    return Status::Error(Status::Code::kTruncated,
                         fmt::format("{}: metadata of {} bytes runs past the end of the file ({})",
                                     Where(32), h.meta_len, file_size_));
  }
  std::string meta_text(h.meta_len, '\0');
  IOTWIN_RETURN_IF_ERROR(ReadAt(sizeof h, meta_text.data(), meta_text.size(), nullptr));
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, &h, offsetof(layout::FileHeader, hash));
  XXH3_64bits_update(st, meta_text.data(), meta_text.size());
  uint64_t hash = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (hash != h.hash) {
    return Status::Corrupt("{}: header checksum mismatch (stored {:016x}, computed {:016x})",
                           Where(24), h.hash, hash);
  }
  Result<nlohmann::json> meta = ParseUntrustedJson(meta_text, sizeof h);
  if (!meta.ok()) return Status::Corrupt("{}: metadata: {}", path_, meta.status().message());
  if (!meta->is_object()) return Status::Corrupt("{}: metadata is not a JSON object", Where(32));
  meta_ = std::move(*meta);
  data_start_ = sizeof h + h.meta_len;
  data_end_ = file_size_;
  return Status::Ok();
}

Status TraceReader::LoadFooter() {
  layout::Footer f;
  if (file_size_ < data_start_ + sizeof f + sizeof(layout::TrailerHeader)) return Status::Ok();
  uint64_t foot_at = file_size_ - sizeof f;
  IOTWIN_RETURN_IF_ERROR(ReadAt(foot_at, &f, sizeof f, nullptr));
  if (std::memcmp(f.magic, layout::kFooterMagic, sizeof f.magic) != 0) return Status::Ok();

  auto bad = [&](std::string what) -> Status {
    if (options_.salvage) {
      damage_.skipped_chunks.push_back(fmt::format("{}: footer ignored: {}", Where(foot_at), what));
      return Status::Ok();
    }
    return Status::Corrupt("{}: footer: {}", Where(foot_at), what);
  };
  if (f.trailer_offset < data_start_ || f.trailer_len < sizeof(layout::TrailerHeader) ||
      f.trailer_len > options_.max_chunk_bytes || f.trailer_offset + f.trailer_len != foot_at) {
    return bad(fmt::format("trailer at {} of {} bytes does not end where the footer begins",
                           f.trailer_offset, f.trailer_len));
  }
  std::vector<uint8_t> trailer(f.trailer_len);
  IOTWIN_RETURN_IF_ERROR(ReadAt(f.trailer_offset, trailer.data(), trailer.size(), nullptr));
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, trailer.data(), trailer.size());
  XXH3_64bits_update(st, &f, offsetof(layout::Footer, hash));
  uint64_t hash = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  if (hash != f.hash) {
    return bad(fmt::format("checksum mismatch (stored {:016x}, computed {:016x})", f.hash, hash));
  }
  layout::TrailerHeader th;
  std::memcpy(&th, trailer.data(), sizeof th);
  uint64_t need = sizeof th + uint64_t{th.entries} * sizeof(layout::IndexEntry) + th.summary_len;
  if (th.magic != layout::kTrailerMagic || need != trailer.size()) {
    return bad(fmt::format("trailer at {} is malformed (magic {:08x}, {} entries, summary {} bytes)",
                           f.trailer_offset, th.magic, th.entries, th.summary_len));
  }
  std::vector<ChunkIndexEntry> index;
  index.reserve(th.entries);
  size_t pos = sizeof th;
  for (uint32_t i = 0; i < th.entries; i++, pos += sizeof(layout::IndexEntry)) {
    layout::IndexEntry e;
    std::memcpy(&e, trailer.data() + pos, sizeof e);
    if (e.offset < data_start_ || e.offset >= f.trailer_offset) {
      return bad(fmt::format("index entry {} points at byte {}, outside the chunk area", i, e.offset));
    }
    index.push_back({e.offset, e.min_ts, e.max_ts, e.records, e.flags});
  }
  Result<nlohmann::json> summary = ParseUntrustedJson(
      std::string_view(reinterpret_cast<const char*>(trailer.data()) + pos, trailer.size() - pos),
      f.trailer_offset + pos);
  if (!summary.ok()) return bad("summary: " + summary.status().message());
  if (!summary->is_object()) return bad("summary is not a JSON object");
  index_ = std::move(index);
  summary_ = std::move(*summary);
  data_end_ = f.trailer_offset;
  return Status::Ok();
}

void TraceReader::ResizeChunk(size_t len) {
  if (len > chunk_cap_) {
    chunk_buf_.reset(new uint8_t[len]);  // default-initialised: no zero-fill
    chunk_cap_ = len;
  }
  chunk_data_ = chunk_buf_.get();
  chunk_len_ = len;
}

// The chunk's zstd payload (in compressed_) into `dst`, `h.raw_len` bytes; the problem, or "".
std::string TraceReader::Decompress(const layout::ChunkHeader& h, uint8_t* dst) {
  size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), dst, h.raw_len,
                                 compressed_.data(), h.comp_len);
  if (ZSTD_isError(n) || n != h.raw_len) {
    return fmt::format("chunk {} does not decompress to its {} bytes: {}", h.seq, h.raw_len,
                       ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short");
  }
  return {};
}

// Codecs 2 and 3: decompress the packed records into packed_, then unpack them into the chunk
// buffer.
std::string TraceReader::UnpackChunk(const layout::ChunkHeader& h) {
  if (packed_cap_ < h.raw_len) {
    packed_.reset(new uint8_t[h.raw_len]);  // no zero-fill: every byte used is decompressed
    packed_cap_ = h.raw_len;
  }
  if (std::string problem = Decompress(h, packed_.get()); !problem.empty()) return problem;
  std::string what = fmt::format("chunk {}", h.seq);
  auto len = PackedRecordsLength(packed_.get(), h.raw_len, what);
  if (!len.ok()) return len.status().message();
  if (*len > options_.max_chunk_bytes) {
    return fmt::format("chunk {} unpacks to {} bytes, over the limit of {} bytes", h.seq, *len,
                       options_.max_chunk_bytes);
  }
  ResizeChunk(*len);
  const auto layout = static_cast<PackedLayout>(h.codec);  // 2 or 3, checked by LoadChunk
  auto unpacked = UnpackRecords(packed_.get(), h.raw_len, layout, chunk_data_, chunk_len_, what);
  if (!unpacked.ok()) {
    ClearChunk();
    return unpacked.status().message();
  }
  return {};  // the record count is checked as for every codec, when the chunk is read
}

Status TraceReader::LoadChunk(bool* end) {
  *end = false;
  ClearChunk();
  for (;;) {
    if (offset_ >= data_end_) {
      *end = true;
      if (!summary_ && !damage_.truncated) {
        damage_.truncated = true;
        damage_.truncated_at = offset_;
        damage_.truncated_detail = fmt::format(
            "{}: the trace has no footer: the capture did not finish cleanly; "
            "{} complete chunks were read",
            Where(offset_), chunks_read_);
      }
      return Status::Ok();
    }
    uint64_t at = offset_;
    uint64_t remaining = data_end_ - at;
    std::string problem;
    layout::ChunkHeader h{};
    bool torn = false;
    if (remaining < sizeof h) {
      torn = true;
      problem = fmt::format("torn chunk header ({} of {} bytes)", remaining, sizeof h);
    } else {
      IOTWIN_RETURN_IF_ERROR(ReadAt(at, &h, sizeof h, nullptr));
      if (h.magic != layout::kChunkMagic || layout::HashChunkHeader(h) != h.header_hash) {
        problem = h.magic != layout::kChunkMagic
                      ? fmt::format("expected chunk magic 'CHNK', found {:08x}", h.magic)
                      : "chunk header checksum mismatch";
        // Without a footer, a trailer whose footer is missing or a zero-filled tail (left by a
        // crash) both mean the writer stopped here.
        if (!summary_) torn = h.magic == layout::kTrailerMagic || RestIsZero(at);
        if (h.magic == layout::kTrailerMagic && torn) problem = "the trailer has no valid footer";
      } else if (h.codec != layout::kCodecZstd && h.codec != layout::kCodecNone &&
                 h.codec != layout::kCodecZstdPacked && h.codec != layout::kCodecZstdShaped) {
        problem = fmt::format("chunk {} uses unknown codec {}", h.seq, h.codec);
      } else if (h.raw_len > options_.max_chunk_bytes || h.comp_len > options_.max_chunk_bytes) {
        problem = fmt::format("chunk {} sizes {}/{} exceed the limit of {} bytes", h.seq,
                              h.comp_len, h.raw_len, options_.max_chunk_bytes);
      } else if (h.comp_len > remaining - sizeof h) {
        torn = !summary_;
        problem = fmt::format("chunk {} promises {} payload bytes, only {} present", h.seq,
                              h.comp_len, remaining - sizeof h);
      } else if (h.seq != next_seq_ && !options_.salvage) {
        problem = fmt::format("expected chunk {}, found chunk {}", next_seq_, h.seq);
      }
    }
    if (torn) {
      *end = true;
      damage_.truncated = true;
      damage_.truncated_at = at;
      damage_.truncated_detail =
          fmt::format("{}: trace truncated: {}; {} complete chunks before it were read",
                      Where(at), problem, chunks_read_);
      return Status::Ok();
    }
    if (problem.empty()) {
      compressed_.resize(h.comp_len);
      IOTWIN_RETURN_IF_ERROR(ReadAt(at + sizeof h, compressed_.data(), h.comp_len, nullptr));
      uint64_t hash = XXH3_64bits(compressed_.data(), h.comp_len);
      if (hash != h.payload_hash) {
        problem = fmt::format("chunk {} payload checksum mismatch (stored {:016x}, computed {:016x})",
                              h.seq, h.payload_hash, hash);
      } else if (h.codec == layout::kCodecNone) {
        if (h.raw_len != h.comp_len) {
          problem = fmt::format("chunk {} is stored raw but its lengths differ", h.seq);
        } else {
          // Stored raw: read the records where they are (compressed_ is not touched again
          // before the next chunk).
          chunk_data_ = compressed_.data();
          chunk_len_ = h.comp_len;
        }
      } else if (h.codec == layout::kCodecZstd) {
        ResizeChunk(h.raw_len);
        problem = Decompress(h, chunk_data_);
        if (!problem.empty()) ClearChunk();
      } else {
        problem = UnpackChunk(h);
      }
    }
    if (problem.empty()) {
      chunk_offset_ = at;
      chunk_seq_ = h.seq;
      chunk_records_expected_ = h.records;
      chunk_records_seen_ = 0;
      chunk_max_ts_ = h.max_ts;
      offset_ = at + sizeof h + h.comp_len;
      next_seq_ = h.seq + 1;
      chunks_read_++;
      return Status::Ok();
    }
    if (!options_.salvage) return Status::Corrupt("{}: {}", Where(at), problem);
    damage_.skipped_chunks.push_back(fmt::format("{}: {}; skipped", Where(at), problem));
    offset_ = Resync(at + 1);
  }
}

bool TraceReader::RestIsZero(uint64_t from) {
  uint8_t buf[65536];
  for (uint64_t at = from; at < data_end_;) {
    size_t got = 0;
    size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, data_end_ - at));
    if (!ReadAt(at, buf, want, &got).ok() || got == 0) return false;
    for (size_t i = 0; i < got; i++) {
      if (buf[i] != 0) return false;
    }
    at += got;
  }
  return true;
}

uint64_t TraceReader::Resync(uint64_t from) {
  // Scan for the next chunk header whose magic and header checksum both hold.
  std::vector<uint8_t> buf(1 << 20);
  for (uint64_t at = from; at + sizeof(layout::ChunkHeader) <= data_end_;) {
    size_t got = 0;
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), data_end_ - at));
    if (!ReadAt(at, buf.data(), want, &got).ok() || got < sizeof(layout::ChunkHeader)) break;
    for (size_t i = 0; i + sizeof(layout::ChunkHeader) <= got; i++) {
      uint32_t magic;
      std::memcpy(&magic, buf.data() + i, sizeof magic);
      if (magic != layout::kChunkMagic) continue;
      layout::ChunkHeader h;
      std::memcpy(&h, buf.data() + i, sizeof h);
      if (layout::HashChunkHeader(h) == h.header_hash) return at + i;
    }
    at += got - sizeof(layout::ChunkHeader) + 1;
  }
  return data_end_;
}

Status TraceReader::ChunkError(std::string problem) {
  std::string where = fmt::format("{}: chunk {} (byte {} of its payload): {}", Where(chunk_offset_),
                                  chunk_seq_, pos_, problem);
  if (!options_.salvage) return Status::Corrupt("{}", where);
  damage_.skipped_chunks.push_back(where + "; rest of chunk skipped");
  pos_ = chunk_len_;
  return Status::Ok();
}

Result<const iot_rec_hdr*> TraceReader::NextSlow() {
  for (;;) {
    if (done_) return static_cast<const iot_rec_hdr*>(nullptr);
    if (pos_ >= chunk_len_) {
      if (chunk_len_ != 0 && chunk_records_seen_ != chunk_records_expected_) {
        uint32_t seen = chunk_records_seen_;
        chunk_records_seen_ = chunk_records_expected_;  // report once
        IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format(
            "header says {} records, payload holds {}", chunk_records_expected_, seen)));
      }
      bool end = false;
      IOTWIN_RETURN_IF_ERROR(LoadChunk(&end));
      if (end) {
        done_ = true;
        return static_cast<const iot_rec_hdr*>(nullptr);
      }
      continue;
    }
    size_t left = chunk_len_ - pos_;
    if (left < sizeof(iot_rec_hdr)) {
      IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format("{} stray bytes after the last record", left)));
      continue;
    }
    iot_rec_hdr hdr;
    std::memcpy(&hdr, chunk_data_ + pos_, sizeof hdr);
    if (hdr.size < sizeof(iot_rec_hdr) || hdr.size % 8 != 0 || hdr.size > left) {
      IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format(
          "record of type {} has size {} (expected a multiple of 8 between 8 and {})", hdr.type,
          hdr.size, left)));
      continue;
    }
    const uint8_t* rec = chunk_data_ + pos_;
    size_t fixed = RecordFixedSize(hdr.type);
    if (fixed == 0) {
      damage_.unknown_records++;
      pos_ += hdr.size;
      chunk_records_seen_++;
      continue;
    }
    const iot_rec_hdr* out = reinterpret_cast<const iot_rec_hdr*>(rec);
    if (hdr.size < fixed) {
      record_.assign(fixed, 0);
      std::memcpy(record_.data(), rec, hdr.size);
      out = reinterpret_cast<const iot_rec_hdr*>(record_.data());
    }
    if (hdr.type == IOT_REC_STRING) {
      const auto& s = As<iot_string>(out);
      if (hdr.size < sizeof(iot_string) + s.len || s.len > IOT_STRING_MAX) {
        IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format(
            "string {} of {} bytes does not fit its {}-byte record", s.id, s.len, hdr.size)));
        continue;
      }
      if (s.id == 0) {
        IOTWIN_RETURN_IF_ERROR(ChunkError("string record with reserved id 0"));
        continue;
      }
      IOTWIN_RETURN_IF_ERROR(
          KeepString(s.id, reinterpret_cast<const char*>(rec) + sizeof(iot_string), s.len));
    } else if (hdr.type == IOT_REC_IOVEC) {
      const auto& v = As<iot_iovec>(out);
      if (v.captured > IOT_IOVEC_MAX || hdr.size < sizeof(iot_iovec) + v.captured * 8u) {
        IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format(
            "iovec record claims {} lengths in {} bytes", v.captured, hdr.size)));
        continue;
      }
    } else if (hdr.type == IOT_REC_FDLIST) {
      const auto& l = As<iot_fdlist>(out);
      if (l.captured > IOT_FDLIST_MAX || l.captured > l.count ||
          hdr.size < sizeof(iot_fdlist) + l.captured * sizeof(iot_fdlist_entry)) {
        IOTWIN_RETURN_IF_ERROR(ChunkError(fmt::format(
            "fdlist record claims {} of {} descriptors in {} bytes", l.captured, l.count,
            hdr.size)));
        continue;
      }
    }
    pos_ += hdr.size;
    chunk_records_seen_++;
    return out;
  }
}

Status TraceReader::KeepString(uint32_t id, const char* data, uint32_t len) {
  std::string& slot = strings_[id];
  const uint64_t total = string_bytes_ - slot.size() + len;
  if (total > options_.max_string_bytes) {
    return Status::Unsupported(
        "{}: the trace's names take more than {} MiB (string {} in the chunk at byte {}); "
        "iotwin keeps every name in memory while reading, and stops here",
        path_, options_.max_string_bytes >> 20, id, chunk_offset_);
  }
  slot.assign(data, len);
  string_bytes_ = total;
  return Status::Ok();
}

Status TraceReader::HarvestStrings() {
  for (size_t pos = 0; pos + sizeof(iot_string) <= chunk_len_;) {
    iot_string s;
    std::memcpy(&s, chunk_data_ + pos, sizeof s);
    if (s.hdr.size < sizeof(iot_rec_hdr) || s.hdr.size % 8 != 0 || s.hdr.size > chunk_len_ - pos) {
      break;  // framing errors are reported when the chunk is read for its records
    }
    if (s.hdr.type == IOT_REC_STRING && s.id != 0 && s.len <= IOT_STRING_MAX &&
        sizeof(iot_string) + s.len <= s.hdr.size) {
      Status st = KeepString(s.id, reinterpret_cast<const char*>(chunk_data_) + pos + sizeof s, s.len);
      if (!st.ok()) {
        ClearChunk();
        return st;
      }
    }
    pos += s.hdr.size;
  }
  ClearChunk();
  return Status::Ok();
}

std::string_view TraceReader::String(uint32_t id) const {
  auto it = strings_.find(id);
  return it == strings_.end() ? std::string_view() : std::string_view(it->second);
}

Status TraceReader::SeekTime(uint64_t ts) {
  done_ = false;
  ClearChunk();
  strings_.clear();
  string_bytes_ = 0;
  // Strings are defined once, in file order: collect them from every chunk skipped over.
  if (!index_.empty()) {
    size_t target = index_.size();
    for (size_t i = 0; i < index_.size(); i++) {
      if (index_[i].max_ts >= ts && index_[i].records > 0) {
        target = i;
        break;
      }
    }
    for (size_t i = 0; i < target; i++) {
      if (!(index_[i].flags & layout::kChunkHasStrings)) continue;
      offset_ = index_[i].offset;
      next_seq_ = static_cast<uint32_t>(i);
      bool end = false;
      IOTWIN_RETURN_IF_ERROR(LoadChunk(&end));
      if (end) break;
      IOTWIN_RETURN_IF_ERROR(HarvestStrings());
    }
    ClearChunk();
    offset_ = target < index_.size() ? index_[target].offset : data_end_;
    next_seq_ = static_cast<uint32_t>(target);
    return Status::Ok();
  }
  // No index (truncated file): scan chunk headers in order.
  offset_ = data_start_;
  next_seq_ = 0;
  for (;;) {
    bool end = false;
    IOTWIN_RETURN_IF_ERROR(LoadChunk(&end));
    if (end) {
      done_ = true;
      return Status::Ok();
    }
    if (chunk_max_ts_ >= ts) return Status::Ok();  // records of this chunk come next
    IOTWIN_RETURN_IF_ERROR(HarvestStrings());
  }
}

}  // namespace iotwin
