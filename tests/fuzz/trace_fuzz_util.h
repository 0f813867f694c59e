// Shared driver of the trace-consumer fuzz targets (model, report, layers, compare, replay plan).
//
// A mutated trace file almost never survives the reader's checksums, so these targets do not
// mutate files: they decode the fuzzer's bytes into records and write them with the real
// TraceWriter, which produces a valid file whatever the records say. Only what the writer and
// the reader's framing require is kept consistent (record sizes, string lengths, iovec counts);
// every field of every record, the header metadata and the footer summary are the fuzzer's.
//
// Input layout (Encoder below writes it, for seeds):
//
//   input   := options:u8 writer:u8 item*
//   options    the target's own switches (see each *_fuzz.cc)
//   writer     bits 0-1: chunk codec (0, 3: packed shaped; 1: packed previous; 2: unpacked);
//              bit 2: 4 KiB chunks (many chunks, strings spread over them);
//              bit 3: no footer (the trace reads as truncated: summary absent)
//   item    := kind:u8 body            type = kind & 0x1f; bit 5 (kRaw) = raw variant
//     type 0   control: sub:u8; sub % 4 = 0 flush the chunk; 1 meta edit; 2 summary edit;
//              3 end of this trace (the next items build the next trace, for compare)
//              edit := key:u8 (index into kMetaKeys / kSummaryKeys) value:json
//     type 1   string: len:u8 bytes[len], interned by the writer (ids 1, 2, ... in first-use
//              order); kind bit 7 marks it truncated; kRaw: id:u32 flags:u16 len:u16 bytes[len]
//              written as a record (any id but 0: redefinitions, gaps, huge ids)
//     2..18    a record of that type: its fixed size from the ABI, the bytes after the header
//              from the input (zero past the end); IOVEC then takes captured % 65 lengths (u64)
//              kRaw: size:u8 first, the record is 4 + size bytes (short or longer than the ABI)
//     19..31   a record of an unknown type: size:u8, 4 + size bytes
//   json    := tag:u8 ...  tag % 9: 0 null, 1 bool u8, 2 u64, 3 i64, 4 f64 (bits), 5 string
//              (len:u8 bytes, each byte a code point: always valid UTF-8), 6 array (n:u8 % 4
//              values), 7 object (n:u8 % 4 of string key + value), 8 (edits only) remove the key;
//              tag 0xff as the edit's value: levels:u16 % (kMaxNestedLevels + 1) arrays nested
//              inside one another, past the readers' depth bound (base/json_parse.h)
//
// With TRACE_FUZZ_FIXED_HEADER set in the environment, meta and summary edits are decoded but not
// applied: the records alone are fuzzed (while a header-handling defect is still open, say).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/records.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::fuzz {

inline constexpr uint8_t kRaw = 0x20;
inline constexpr uint8_t kStringTruncated = 0x80;
inline constexpr size_t kMaxJsonDepth = 4;
inline constexpr uint8_t kNestedTag = 0xff;
// Deep enough to pass the readers' bound many times over, shallow enough for the writer's
// recursive dump.
inline constexpr uint16_t kMaxNestedLevels = 1024;

// Header keys the consumers read ("a/b" is a path of nested objects).
inline constexpr const char* kMetaKeys[] = {
    "host", "host/page_size", "host/arch", "host/cpus", "host/clock", "host/anchor",
    "host/anchor/monotonic_ns", "host/anchor/realtime_ns", "host/hostname", "layers",
    "layers/syscall", "layers/syscall/enabled", "layers/memory", "layers/memory/enabled",
    "layers/block", "layers/block/enabled", "layers/nvme", "layers/nvme/enabled", "layers/sched",
    "layers/sched/enabled", "layers/pmu", "layers/pmu/reason", "block_devices",
    "block_devices/nvme0n1", "block_devices/nvme0n1/dev", "block_devices/nvme0n1/max_sectors_kb",
    "block_devices/nvme0n1/max_segments", "block_devices/nvme0n1/max_segment_size",
    "block_devices/nvme0n1/logical_block_size", "replay", "replay/source", "replay/pace", "tool",
    "command", "source", "layers/async", "layers/intent", "",  // "": the whole object
};
inline constexpr const char* kSummaryKeys[] = {
    "stop_reason", "exit_status", "events", "duration_ns", "lost", "lost/block", "lost/nvme",
    "lost/sched", "lost/syscall", "lost/memory", "replay_filter", "",
};

// The input, read front to back; zeros past its end.
class ByteStream {
 public:
  ByteStream(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  void Fill(void* dst, size_t n) {
    size_t take = n < left_ ? n : left_;
    if (take) std::memcpy(dst, p_, take);
    if (n > take) std::memset(static_cast<uint8_t*>(dst) + take, 0, n - take);
    p_ += take;
    left_ -= take;
  }
  template <typename T>
  T Get() {
    T v;
    Fill(&v, sizeof v);
    return v;
  }
  uint8_t U8() { return Get<uint8_t>(); }
  std::string Bytes(size_t n) {
    std::string s(n < left_ ? n : left_, '\0');
    Fill(s.data(), s.size());
    return s;
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

// One step of writing a trace.
struct Action {
  enum Kind { kRecord, kIntern, kFlush } kind = kRecord;
  std::vector<uint8_t> bytes;  // kRecord: the record; kIntern: the string
  bool truncated = false;      // kIntern
};

struct TraceSpec {
  nlohmann::json meta;
  nlohmann::json summary;
  TraceWriterOptions writer;
  bool footer = true;
  std::vector<Action> actions;
};

inline nlohmann::json BaseMeta() {
  auto on = nlohmann::json{{"enabled", true}};
  return {{"tool", "fuzz"},
          {"host",
           {{"hostname", "fuzz"}, {"arch", "x86_64"}, {"page_size", 4096}, {"cpus", 2},
            {"clock", "monotonic"}}},
          {"layers",
           {{"syscall", on}, {"memory", on}, {"block", on}, {"nvme", on}, {"sched", on}}}};
}

inline std::string LatinToUtf8(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

// A JSON value; `removed` set (and null returned) for tag 8 where `allow_remove`.
inline nlohmann::json DecodeJson(ByteStream& in, size_t depth, bool allow_remove = false,
                                 bool* removed = nullptr) {
  const uint8_t byte = in.U8();
  if (byte == kNestedTag && depth == 0) {
    const uint16_t levels = in.Get<uint16_t>() % (kMaxNestedLevels + 1);
    nlohmann::json nested = nlohmann::json::array();
    nlohmann::json* at = &nested;
    for (uint16_t i = 1; i < levels; i++) {  // built in place: no deep copies
      at->push_back(nlohmann::json::array());
      at = &at->back();
    }
    return nested;
  }
  uint8_t tag = byte % 9;
  if (depth >= kMaxJsonDepth && tag >= 6) tag = 0;
  switch (tag) {
    case 1: return (in.U8() & 1) != 0;
    case 2: return in.Get<uint64_t>();
    case 3: return in.Get<int64_t>();
    case 4: return in.Get<double>();
    case 5: return LatinToUtf8(in.Bytes(in.U8()));
    case 6: {
      auto a = nlohmann::json::array();
      for (int n = in.U8() % 4; n > 0; n--) a.push_back(DecodeJson(in, depth + 1));
      return a;
    }
    case 7: {
      auto o = nlohmann::json::object();
      for (int n = in.U8() % 4; n > 0; n--) {
        std::string key = LatinToUtf8(in.Bytes(in.U8()));
        o[key] = DecodeJson(in, depth + 1);
      }
      return o;
    }
    case 8:
      if (allow_remove && removed) *removed = true;
      return nullptr;
    default: return nullptr;
  }
}

// Sets (or removes) the value at "a/b/c" below `root`; non-objects on the way become objects.
inline void EditJson(nlohmann::json* root, std::string_view key_path, nlohmann::json value,
                     bool remove) {
  if (key_path.empty()) {
    if (value.is_object()) *root = std::move(value);  // the header must stay an object
    return;
  }
  nlohmann::json* at = root;
  for (;;) {
    size_t slash = key_path.find('/');
    std::string key(key_path.substr(0, slash));
    if (!at->is_object()) *at = nlohmann::json::object();
    if (slash == std::string_view::npos) {
      if (remove) at->erase(key);
      else (*at)[key] = std::move(value);
      return;
    }
    at = &(*at)[key];
    key_path.remove_prefix(slash + 1);
  }
}

inline void DecodeRecord(ByteStream& in, uint8_t kind, TraceSpec* t) {
  const uint16_t type = kind & 0x1f;
  const bool raw = kind & kRaw;
  if (type == IOT_REC_STRING && !raw) {
    Action a{Action::kIntern, {}, (kind & kStringTruncated) != 0};
    std::string s = in.Bytes(in.U8());
    a.bytes.assign(s.begin(), s.end());
    t->actions.push_back(std::move(a));
    return;
  }
  std::vector<uint8_t> rec;
  if (type == IOT_REC_STRING) {
    iot_string h{};
    h.hdr.type = IOT_REC_STRING;
    h.id = in.Get<uint32_t>();
    if (h.id == 0) h.id = 1;  // 0 is reserved: the reader refuses it
    h.flags = in.Get<uint16_t>();
    h.len = in.Get<uint16_t>() % (IOT_STRING_MAX + 1);
    std::string s = in.Bytes(h.len);
    h.len = static_cast<uint16_t>(s.size());
    h.hdr.size = static_cast<uint16_t>(sizeof h + s.size());
    rec.resize(h.hdr.size);
    std::memcpy(rec.data(), &h, sizeof h);
    std::memcpy(rec.data() + sizeof h, s.data(), s.size());
  } else {
    size_t size = RecordFixedSize(type);
    if (raw || size == 0) size = sizeof(iot_rec_hdr) + in.U8();
    rec.resize(size);
    in.Fill(rec.data() + sizeof(iot_rec_hdr), size - sizeof(iot_rec_hdr));
    if (type == IOT_REC_IOVEC && !raw) {
      iot_iovec v;
      std::memcpy(&v, rec.data(), sizeof v);
      v.captured %= IOT_IOVEC_MAX + 1;
      std::memcpy(rec.data(), &v, sizeof v);
      rec.resize(sizeof v + 8u * v.captured);
      in.Fill(rec.data() + sizeof v, 8u * v.captured);
    }
    iot_rec_hdr h{type, static_cast<uint16_t>(rec.size())};
    std::memcpy(rec.data(), &h, sizeof h);
  }
  t->actions.push_back({Action::kRecord, std::move(rec), false});
}

// Decodes up to `max_traces` traces (later "end of trace" items are ignored).
inline std::vector<TraceSpec> DecodeTraces(ByteStream& in, size_t max_traces) {
  std::vector<TraceSpec> traces;
  auto start = [&](uint8_t writer) {
    TraceSpec t;
    t.meta = BaseMeta();
    t.summary = {{"stop_reason", "exit"}};
    t.writer.pack_records = (writer & 3) != 2;
    t.writer.packed_layout = (writer & 3) == 1 ? PackedLayout::kPrevious : PackedLayout::kShaped;
    if (writer & 4) t.writer.chunk_bytes = 4096;
    t.footer = !(writer & 8);
    traces.push_back(std::move(t));
  };
  start(in.U8());
  while (!in.empty()) {
    uint8_t kind = in.U8();
    if ((kind & 0x1f) != 0) {
      DecodeRecord(in, kind, &traces.back());
      continue;
    }
    uint8_t sub = in.U8() % 4;
    if (sub == 0) {
      traces.back().actions.push_back({Action::kFlush, {}, false});
    } else if (sub == 1 || sub == 2) {
      static const bool fixed_header = std::getenv("TRACE_FUZZ_FIXED_HEADER") != nullptr;
      const bool meta = sub == 1;
      uint8_t key = in.U8();
      std::string_view path = meta ? kMetaKeys[key % std::size(kMetaKeys)]
                                   : kSummaryKeys[key % std::size(kSummaryKeys)];
      bool removed = false;
      nlohmann::json value = DecodeJson(in, 0, true, &removed);
      if (!fixed_header) {
        EditJson(meta ? &traces.back().meta : &traces.back().summary, path, std::move(value),
                 removed);
      }
    } else if (traces.size() < max_traces) {
      start(in.U8());
    }
  }
  return traces;
}

// A trace written into an anonymous memory file; path() names it for TraceReader::Open.
class MemTrace {
 public:
  MemTrace() : fd_(memfd_create("fuzz-trace", MFD_CLOEXEC)) {
    if (fd_ >= 0) path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemTrace() {
    if (fd_ >= 0) close(fd_);
  }
  MemTrace(const MemTrace&) = delete;
  MemTrace& operator=(const MemTrace&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// Writes `t` with TraceWriter; false when the writer refused something (not a finding: the
// writer is not the target, but it must never refuse what DecodeTraces produces).
inline bool WriteTrace(const TraceSpec& t, const MemTrace& out) {
  if (!out.ok()) return false;
  auto w = TraceWriter::Create(out.path(), t.meta, t.writer);
  if (!w.ok()) return false;
  for (const Action& a : t.actions) {
    Status st;
    if (a.kind == Action::kRecord) {
      st = (*w)->Append(reinterpret_cast<const iot_rec_hdr*>(a.bytes.data()));
    } else if (a.kind == Action::kIntern) {
      // A std::string: an empty one still has a non-null data() (the writer memcpy's it).
      std::string s(a.bytes.begin(), a.bytes.end());
      st = (*w)->InternString(s, a.truncated).status();
    } else {
      st = (*w)->FlushChunk();
    }
    if (!st.ok()) return false;
  }
  return t.footer ? (*w)->Finish(t.summary).ok() : (*w)->FlushChunk().ok();
}

// Builds fuzz inputs from records (seeds): the inverse of DecodeTraces.
class Encoder {
 public:
  Encoder(uint8_t options, uint8_t writer) {
    out_.push_back(static_cast<char>(options));
    out_.push_back(static_cast<char>(writer));
  }
  const std::string& bytes() const { return out_; }

  // A record as TraceBuilder made it. STRING records become interned strings: the builder and
  // the writer number strings alike (1, 2, ... in first-use order).
  void Record(const iot_rec_hdr* rec) {
    const auto* p = reinterpret_cast<const char*>(rec);
    if (rec->type == IOT_REC_STRING) {
      const auto* s = reinterpret_cast<const iot_string*>(rec);
      uint8_t kind = IOT_REC_STRING | ((s->flags & IOT_STRF_TRUNCATED) ? kStringTruncated : 0);
      out_.push_back(static_cast<char>(kind));
      size_t len = s->len < 255 ? s->len : 255;
      out_.push_back(static_cast<char>(len));
      out_.append(p + sizeof(iot_string), len);
      return;
    }
    size_t fixed = RecordFixedSize(rec->type);
    if (fixed == 0 || rec->size < fixed || (rec->size != fixed && rec->type != IOT_REC_IOVEC)) {
      out_.push_back(static_cast<char>((rec->type & 0x1f) | kRaw));
      size_t n = rec->size - sizeof(iot_rec_hdr);
      out_.push_back(static_cast<char>(n < 255 ? n : 255));
      out_.append(p + sizeof(iot_rec_hdr), n < 255 ? n : 255);
      return;
    }
    out_.push_back(static_cast<char>(rec->type));
    out_.append(p + sizeof(iot_rec_hdr), rec->size - sizeof(iot_rec_hdr));
  }
  void Flush() { Control(0); }
  void Meta(std::string_view key, const nlohmann::json& value) { Edit(1, kMetaKeys, key, value); }
  void Summary(std::string_view key, const nlohmann::json& value) {
    Edit(2, kSummaryKeys, key, value);
  }
  // Arrays nested `levels` deep as the value of a header or footer key (kNestedTag).
  void MetaNested(std::string_view key, uint16_t levels) { Nested(1, kMetaKeys, key, levels); }
  void SummaryNested(std::string_view key, uint16_t levels) {
    Nested(2, kSummaryKeys, key, levels);
  }
  void NextTrace(uint8_t writer) {
    Control(3);
    out_.push_back(static_cast<char>(writer));
  }

 private:
  void Control(uint8_t sub) {
    out_.push_back(0);
    out_.push_back(static_cast<char>(sub));
  }
  template <size_t N>
  void Edit(uint8_t sub, const char* const (&keys)[N], std::string_view key,
            const nlohmann::json& value) {
    for (size_t i = 0; i < N; i++) {
      if (key != keys[i]) continue;
      Control(sub);
      out_.push_back(static_cast<char>(i));
      Json(value);
      return;
    }
  }
  template <size_t N>
  void Nested(uint8_t sub, const char* const (&keys)[N], std::string_view key, uint16_t levels) {
    for (size_t i = 0; i < N; i++) {
      if (key != keys[i]) continue;
      Control(sub);
      out_.push_back(static_cast<char>(i));
      out_.push_back(static_cast<char>(kNestedTag));
      Put(levels);
      return;
    }
  }
  template <typename T>
  void Put(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void Str(const std::string& s) {  // ASCII only (the decoder reads bytes as code points)
    out_.push_back(static_cast<char>(s.size() < 255 ? s.size() : 255));
    out_.append(s, 0, s.size() < 255 ? s.size() : 255);
  }
  void Json(const nlohmann::json& v) {
    if (v.is_boolean()) {
      out_ += '\1';
      out_.push_back(v.get<bool>() ? 1 : 0);
    } else if (v.is_number_unsigned()) {
      out_ += '\2';
      Put(v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      out_ += '\3';
      Put(v.get<int64_t>());
    } else if (v.is_number_float()) {
      out_ += '\4';
      Put(v.get<double>());
    } else if (v.is_string()) {
      out_ += '\5';
      Str(v.get<std::string>());
    } else if (v.is_array()) {
      out_ += '\6';
      out_.push_back(static_cast<char>(v.size() < 3 ? v.size() : 3));
      for (size_t i = 0; i < v.size() && i < 3; i++) Json(v[i]);
    } else if (v.is_object()) {
      out_ += '\7';
      out_.push_back(static_cast<char>(v.size() < 3 ? v.size() : 3));
      size_t i = 0;
      for (const auto& [k, x] : v.items()) {
        if (i++ == 3) break;
        Str(k);
        Json(x);
      }
    } else {
      out_ += '\0';
    }
  }

  std::string out_;
};

}  // namespace iotwin::fuzz
