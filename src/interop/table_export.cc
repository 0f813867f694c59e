// `iotwin export --csv DIR` / `--jsonl DIR`: one table per record type plus a `files` table,
// streamed in one pass. Rows that concern a file carry a `file_id` into `files`; the meaning of
// descriptors and paths comes from model::TraceState, fed every record in order. Schema and the
// directory rules: docs/tables.md.
//
// Speed: rows are written straight into one large buffer per table with a hand-rolled integer
// writer (no per-row strings, no iostreams), and flushed with write(2) a megabyte at a time; a
// second thread formats the rows while the first reads the trace and keeps the model.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "base/json_fields.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/block_text.h"
#include "interop/exporters.h"
#include "interop/flag_names.h"
#include "interop/table_columns.h"
#include "interop/table_export.h"
#include "interop/table_files.h"
#include "model/op_fields.h"
#include "model/path.h"
#include "model/trace_state.h"

namespace iotwin::interop {
namespace {

constexpr uint32_t kNoFile = UINT32_MAX;

// The table of each record type; other types are left out.
struct RecordTable {
  uint16_t type;
  std::string_view stem;
};
constexpr RecordTable kRecordTables[] = {
    {IOT_REC_SYSCALL, "syscalls"},     {IOT_REC_PROC, "proc"},
    {IOT_REC_FD_SNAPSHOT, "fd_snapshots"}, {IOT_REC_MAP_SNAPSHOT, "map_snapshots"},
    {IOT_REC_PAGE_FAULT, "page_faults"}, {IOT_REC_PAGE_CACHE, "page_cache"},
    {IOT_REC_WRITEBACK, "writeback"},  {IOT_REC_BLOCK, "block"},
    {IOT_REC_NVME, "nvme"},            {IOT_REC_ASYNC_IO, "async_io"},
    {IOT_REC_INTENT, "intents"},       {IOT_REC_LOST, "lost"},
    {IOT_REC_CLOCK, "clocks"},         {IOT_REC_CACHE_STATE, "cache_state"},
    {IOT_REC_SUBPAGE, "subpage"},      {IOT_REC_SCHED, "sched"},
    {IOT_REC_IOVEC, "iovecs"},
};
constexpr std::string_view kFilesTable = "files";

std::string_view StemOf(uint16_t type) {
  for (const RecordTable& t : kRecordTables) {
    if (t.type == type) return t.stem;
  }
  return "unknown";
}

// ---- decimal integers ------------------------------------------------------------------------

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

inline char* Write2(char* p, uint32_t v) {  // v < 100, two digits
  std::memcpy(p, kDigitPairs + v * 2, 2);
  return p + 2;
}

// Eight digits of v < 10^8, leading zeros included: v / 10^6 in fixed point with a 32-bit
// fraction, then two digits per multiplication of the fraction by 100. The constants give the
// exact digits of every v < 10^8 (checked exhaustively); no division on the way.
inline char* Write8(char* p, uint32_t v) {
  constexpr uint64_t kFraction = 0xffffffff;
  uint64_t t = ((uint64_t{v} * 281474977) >> 16) + 1;
  p = Write2(p, static_cast<uint32_t>(t >> 32));
  t = (t & kFraction) * 100;
  p = Write2(p, static_cast<uint32_t>(t >> 32));
  t = (t & kFraction) * 100;
  p = Write2(p, static_cast<uint32_t>(t >> 32));
  t = (t & kFraction) * 100;
  return Write2(p, static_cast<uint32_t>(t >> 32));
}

inline char* Write4(char* p, uint32_t v) {  // v < 10^4, four digits
  return Write2(Write2(p, v / 100), v % 100);
}

inline char* WriteUpTo4(char* p, uint32_t v) {  // v < 10^4, no leading zeros
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) return Write2(p, v);
  if (v < 1000) {
    *p = static_cast<char>('0' + v / 100);
    return Write2(p + 1, v % 100);
  }
  return Write4(p, v);
}

inline char* WriteUpTo8(char* p, uint32_t v) {  // v < 10^8, no leading zeros
  if (v < 10000) return WriteUpTo4(p, v);
  return Write4(WriteUpTo4(p, v / 10000), v % 10000);
}

// Decimal digits in chunks of eight, in 32-bit arithmetic.
[[gnu::noinline]] char* WriteU64Long(char* p, uint64_t v) {
  constexpr uint64_t k1e8 = 100000000, k1e16 = k1e8 * k1e8;
  if (v < k1e8) return WriteUpTo8(p, static_cast<uint32_t>(v));
  if (v < k1e16) {
    p = WriteUpTo8(p, static_cast<uint32_t>(v / k1e8));
  } else {
    p = WriteUpTo4(p, static_cast<uint32_t>(v / k1e16));  // at most 1844
    p = Write8(p, static_cast<uint32_t>(v / k1e8 % k1e8));
  }
  return Write8(p, static_cast<uint32_t>(v % k1e8));
}

// Most fields are small (descriptors, flags, counts): those take the inline path.
[[gnu::always_inline]] inline char* WriteU64(char* p, uint64_t v) {
  if (v < 10) {
    *p = static_cast<char>('0' + v);
    return p + 1;
  }
  if (v < 100) return Write2(p, static_cast<uint32_t>(v));
  return WriteU64Long(p, v);
}

[[gnu::always_inline]] inline char* WriteI64(char* p, int64_t v) {
  if (v >= 0) return WriteU64(p, static_cast<uint64_t>(v));
  *p++ = '-';
  return WriteU64(p, 0 - static_cast<uint64_t>(v));
}

// ---- one output table ------------------------------------------------------------------------

class Table;

// Writes one row at a cursor of its own, so that the cursor stays in a register: the row's
// fields are written through char pointers, which may alias any object whose address has
// escaped (a Table's members would be reloaded after every byte). Every field is followed by a
// ',' that End turns into the end of the row. On the first row of a table it also records the
// column names.
class RowWriter {
 public:
  RowWriter(char* p, char* end, bool json, std::vector<std::string>* names, Table* table)
      : p_(p), end_(end), json_(json), names_(names), table_(table) {
    if (json_) *p_++ = '{';
  }

  template <size_t N>
  [[gnu::always_inline]] void U(const char (&name)[N], uint64_t v) {
    Key(name);
    p_ = WriteU64(p_, v);
    *p_++ = ',';
  }
  template <size_t N>
  [[gnu::always_inline]] void I(const char (&name)[N], int64_t v) {
    Key(name);
    p_ = WriteI64(p_, v);
    *p_++ = ',';
  }
  // A file id: empty (CSV) or null (JSON) when the row concerns no known file.
  template <size_t N>
  [[gnu::always_inline]] void File(const char (&name)[N], uint32_t id) {
    Key(name);
    if (id != kNoFile) {
      p_ = WriteU64(p_, id);
    } else if (json_) {
      p_ = Put(p_, "null");
    }
    *p_++ = ',';
  }
  // Text of this program (op and kind names): no comma, quote, backslash or control byte.
  template <size_t N>
  [[gnu::always_inline]] void Word(const char (&name)[N], std::string_view text) {
    Key(name);
    if (json_) *p_++ = '"';
    p_ = Put(p_, text);
    if (json_) *p_++ = '"';
    *p_++ = ',';
  }
  template <size_t N>
  [[gnu::always_inline]] void Names(const char (&name)[N], const FlagNames& names, FlagSet set,
                                    uint64_t value) {
    Key(name);
    if (json_) *p_++ = '"';
    if (set != FlagSet::kNone) {
      Room(FlagNames::kMaxLength);
      p_ = names.Write(set, value, p_);
    }
    if (json_) *p_++ = '"';
    *p_++ = ',';
  }
  // Bytes from the trace (names): escaped (base/bytes_text.h) through `scratch`.
  template <size_t N>
  [[gnu::always_inline]] inline void S(const char (&name)[N], std::string_view bytes,
                                       std::string* scratch);
  // Free-form text written by `write(char*) -> char*` into at most `max` bytes.
  template <size_t N, typename F>
  void Text(const char (&name)[N], size_t max, F&& write) {
    Key(name);
    Room(max);
    if (json_) *p_++ = '"';
    p_ = write(p_);
    if (json_) *p_++ = '"';
    *p_++ = ',';
  }

  // The row's end; the cursor after it.
  char* Finish() {
    if (json_) {
      p_[-1] = '}';
      *p_++ = '\n';
    } else {
      p_[-1] = '\n';
    }
    return p_;
  }

 private:
  static char* Put(char* p, std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
  }
  // The key's length is known at compile time, so its copy is a few moves.
  template <size_t N>
  [[gnu::always_inline]] void Key(const char (&name)[N]) {
    const std::string_view key(name, N - 1);
    if (names_) names_->emplace_back(key);
    if (json_) {
      *p_++ = '"';
      p_ = Put(p_, key);
      *p_++ = '"';
      *p_++ = ':';
    }
  }
  // Room for `n` more bytes and the row's remaining fixed fields. Inline, as every use of the
  // writer: the writer's address must not escape, or its cursor leaves the register.
  [[gnu::always_inline]] inline void Room(size_t n);

  char* p_;
  char* end_;
  bool json_;
  std::vector<std::string>* names_;  // first row only
  Table* table_;
};

// One output table: rows go into a large buffer written out a megabyte at a time. Write errors
// are kept and returned by Finish().
class Table {
 public:
  // Room every row start guarantees: the fixed-size fields of the widest table, keys included.
  static constexpr size_t kRowRoom = 4096;

  Table(std::string stem, TableFormat format)
      : stem_(std::move(stem)), json_(format == TableFormat::kJsonl) {
    cap_ = kFlushAt + kRowRoom;
    buf_ = std::make_unique<char[]>(cap_);
    p_ = buf_.get();
  }

  [[gnu::always_inline]] RowWriter Begin() {
    if (static_cast<size_t>(end() - p_) < kRowRoom) p_ = MakeRoom(p_, kRowRoom);
    return RowWriter(p_, end(), json_, header_done_ ? nullptr : &names_, this);
  }
  void End(RowWriter& row) {
    p_ = row.Finish();
    header_done_ = true;
    rows_++;
  }
  // Flushes (or, within the first row, grows) until `n` bytes fit after `p`; the new cursor.
  char* MakeRoom(char* p, size_t n);
  char* end() const { return buf_.get() + cap_; }

  Status OpenFile(const std::string& dir) {
    return file_.Open(dir, stem_, Extension(json_ ? TableFormat::kJsonl : TableFormat::kCsv));
  }
  // Writes out what is buffered; the file stays open.
  Status Finish() {
    Flush(p_);
    p_ = buf_.get();
    return status_;
  }
  TableFile& file() { return file_; }
  const std::string& stem() const { return stem_; }
  uint64_t rows() const { return rows_; }
  std::string& scratch() { return scratch_; }

 private:
  static constexpr size_t kFlushAt = size_t{1} << 20;

  void Flush(char* p) {
    if (status_.ok() && !header_written_ && !json_) {
      std::string header;
      for (size_t i = 0; i < names_.size(); i++) {
        if (i) header += ',';
        header += names_[i];
      }
      header += '\n';
      status_ = file_.Write(header.data(), header.size());
    }
    header_written_ = true;
    if (status_.ok()) status_ = file_.Write(buf_.get(), static_cast<size_t>(p - buf_.get()));
  }

  std::string stem_;
  bool json_;
  TableFile file_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  char* p_ = nullptr;
  bool header_done_ = false, header_written_ = false;
  std::vector<std::string> names_;
  std::string scratch_;
  uint64_t rows_ = 0;
  Status status_;
};

char* Table::MakeRoom(char* p, size_t n) {
  if (static_cast<size_t>(end() - p) >= n) return p;
  // The CSV header is written before the first flush, so the first row stays in the buffer.
  if (header_done_) {
    Flush(p);
    p = buf_.get();
    if (static_cast<size_t>(end() - p) >= n) return p;
  }
  const size_t used = static_cast<size_t>(p - buf_.get());
  const size_t cap = used + n + kFlushAt;
  auto grown = std::make_unique<char[]>(cap);
  std::memcpy(grown.get(), buf_.get(), used);
  buf_ = std::move(grown);
  cap_ = cap;
  return buf_.get() + used;
}

inline void RowWriter::Room(size_t n) {
  if (static_cast<size_t>(end_ - p_) >= n + Table::kRowRoom) return;
  p_ = table_->MakeRoom(p_, n + Table::kRowRoom);
  end_ = table_->end();
}

template <size_t N>
inline void RowWriter::S(const char (&name)[N], std::string_view bytes, std::string* scratch) {
  Key(name);
  if (bytes.empty()) {
    if (json_) p_ = Put(p_, "\"\"");
  } else {
    scratch->clear();
    if (json_) {
      AppendBytesAsJsonString(scratch, bytes);
    } else {
      AppendBytesAsCsvField(scratch, bytes);
    }
    Room(scratch->size());
    p_ = Put(p_, *scratch);
  }
  *p_++ = ',';
}

// ---- the files table ---------------------------------------------------------------------------

// Files by identity (dev, ino) or, for rows without one, by resolved path. A file's path is the
// first resolved path the trace gives it.
class FileIds {
 public:
  static constexpr uint32_t kNoType = UINT32_MAX;  // the record carries no file type

  struct Entry {
    uint32_t dev = 0;
    uint64_t ino = 0;
    std::string path;
    uint16_t ftype = 0;
    bool untyped = false;  // a record showed the identity with type 0
  };

  uint32_t ByIdentity(uint32_t dev, uint64_t ino, std::string_view path, uint32_t ftype) {
    Slot& slot = cache_[((ino * 0x9E3779B97F4A7C15ull) ^ dev) >> (64 - kCacheBits)];
    uint32_t id;
    if (slot.id != 0 && slot.ino == ino && slot.dev == dev) {
      id = slot.id - 1;
    } else {
      auto [it, inserted] = by_identity_.try_emplace(Identity{ino, dev}, Size());
      if (inserted) entries_.push_back(Entry{dev, ino, {}, 0, false});
      id = it->second;
      slot = Slot{ino, dev, id + 1};
    }
    Note(entries_[id], path, ftype);
    return id;
  }
  uint32_t ByPath(std::string_view path, uint32_t ftype) {
    auto [it, inserted] = by_path_.try_emplace(std::string(path), Size());
    if (inserted) entries_.push_back(Entry{0, 0, std::string(path), 0, false});
    Note(entries_[it->second], {}, ftype);
    return it->second;
  }
  // The file behind an open file description.
  uint32_t OfDescription(const model::OpenFileDescription& d) {
    if (d.ino != 0) return ByIdentity(d.dev, d.ino, d.path, d.ftype ? d.ftype : kNoType);
    if (!d.path.empty()) return ByPath(d.path, d.ftype ? d.ftype : kNoType);
    return kNoFile;
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  static constexpr int kCacheBits = 10;
  struct Slot {
    uint64_t ino = 0;
    uint32_t dev = 0;
    uint32_t id = 0;  // id + 1; 0: empty
  };
  struct Identity {
    uint64_t ino;
    uint32_t dev;
    bool operator==(const Identity&) const = default;
  };
  struct IdentityHash {
    size_t operator()(const Identity& k) const { return (k.ino * 0x9E3779B97F4A7C15ull) ^ k.dev; }
  };

  uint32_t Size() const { return static_cast<uint32_t>(entries_.size()); }
  static void Note(Entry& e, std::string_view path, uint32_t ftype) {
    if (e.path.empty() && !path.empty()) e.path = path;
    if (ftype == kNoType) return;
    if (ftype != 0) {
      e.ftype = static_cast<uint16_t>(ftype);
    } else {
      e.untyped = true;
    }
  }

  std::array<Slot, size_t{1} << kCacheBits> cache_{};
  std::unordered_map<Identity, uint32_t, IdentityHash> by_identity_;
  std::unordered_map<std::string, uint32_t> by_path_;
  std::vector<Entry> entries_;
};

// ---- record tables ---------------------------------------------------------------------------

std::string_view Cstr(const char* s, size_t n) {
  size_t len = 0;
  while (len < n && s[len]) len++;
  return {s, len};
}

std::string_view ProcKind(uint16_t k) {
  static const char* kNames[] = {"?", "fork", "thread", "exec", "exit", "attach", "cwd", "start"};
  return k < 8 ? kNames[k] : "?";
}
std::string_view PageCacheKind(uint16_t k) {
  static const char* kNames[] = {"?", "add", "delete", "readahead"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view WritebackKind(uint16_t k) {
  static const char* kNames[] = {"?",           "dirty_folio", "dirty_inode", "inode_start",
                                 "inode_done",  "work_start",  "work_done",   "wait"};
  return k < 8 ? kNames[k] : "?";
}
std::string_view NvmePhase(uint16_t k) {
  static const char* kNames[] = {"?", "setup", "complete", "sq"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view SchedKind(uint16_t k) {
  static const char* kNames[] = {"?", "offcpu", "hardirq", "softirq"};
  return k < 4 ? kNames[k] : "?";
}
std::string_view IntentKind(uint16_t k) {
  static const char* kNames[] = {"instant", "begin", "end"};
  return k < 3 ? kNames[k] : "?";
}

// What a row needs besides its record: the files it concerns and the trace's strings it shows
// (a path, a second path, a label), worked out in record order where the model is kept.
struct RowContext {
  uint32_t file = kNoFile, file2 = kNoFile;
  std::string_view text[2];
};

// The columns of each record table, for any table with Begin() -> a row writer, End(writer) and
// scratch() (the text tables here, or columns in memory). Holds nothing that changes once built,
// so the thread that formats rows shares it with no one who writes.
class RowFormatter {
 public:
  explicit RowFormatter(FlagNames names) : names_(std::move(names)) {
    for (uint16_t op = 0; op <= IOT_OP_MAX; op++) sets_[op] = SyscallFlagSetsOf(op);
  }

  template <typename TableT>
  void Row(TableT& t, const iot_rec_hdr* h, const RowContext& ctx) const {
    switch (h->type) {
      case IOT_REC_SYSCALL: return Put(t, As<iot_syscall>(h), ctx);
      case IOT_REC_PROC: return Put(t, As<iot_proc>(h), ctx);
      case IOT_REC_FD_SNAPSHOT: return Put(t, As<iot_fd_snapshot>(h), ctx);
      case IOT_REC_MAP_SNAPSHOT: return Put(t, As<iot_map_snapshot>(h), ctx);
      case IOT_REC_PAGE_FAULT: return Put(t, As<iot_page_fault>(h), ctx);
      case IOT_REC_PAGE_CACHE: return Put(t, As<iot_page_cache>(h), ctx);
      case IOT_REC_WRITEBACK: return Put(t, As<iot_writeback>(h), ctx);
      case IOT_REC_BLOCK: return Put(t, As<iot_block>(h), ctx);
      case IOT_REC_NVME: return Put(t, As<iot_nvme>(h), ctx);
      case IOT_REC_ASYNC_IO: return Put(t, As<iot_async_io>(h), ctx);
      case IOT_REC_INTENT: return Put(t, As<iot_intent>(h), ctx);
      case IOT_REC_LOST: return Put(t, As<iot_lost>(h), ctx);
      case IOT_REC_CLOCK: return Put(t, As<iot_clock>(h), ctx);
      case IOT_REC_CACHE_STATE: return Put(t, As<iot_cache_state>(h), ctx);
      case IOT_REC_SUBPAGE: return Put(t, As<iot_subpage>(h), ctx);
      case IOT_REC_SCHED: return Put(t, As<iot_sched>(h), ctx);
      case IOT_REC_IOVEC: return Iovec(t, As<iot_iovec>(h), h);
      default: return;
    }
  }

 private:
  template <typename TableT>
  void Put(TableT& t, const iot_syscall& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_proc& p, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_fd_snapshot& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_map_snapshot& m, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_page_fault& f, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_page_cache& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_writeback& w, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_block& b, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_nvme& n, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_async_io& a, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_intent& in, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_lost& l, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_clock& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_cache_state& c, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_subpage& s, const RowContext& ctx) const;
  template <typename TableT>
  void Put(TableT& t, const iot_sched& s, const RowContext& ctx) const;
  template <typename TableT>
  void Iovec(TableT& t, const iot_iovec& v, const iot_rec_hdr* h) const;

  FlagNames names_;
  std::array<SyscallFlagSets, IOT_OP_MAX + 1> sets_{};
};

// Rows are formatted on a second thread while this one reads the trace and keeps the model
// (each half is about half the work). Records go over in batches, copied with the strings their
// rows show (the reader reuses both), and one thread formats them all in order, so each table
// keeps the trace's order. The formatting thread writes the tables; nothing else touches them
// until Finish has joined it.
class RowPipeline {
 public:
  explicit RowPipeline(const RowFormatter& formatter) : formatter_(formatter) {
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
  void Finish() {
    if (!worker_.joinable()) return;
    if (!filling_->jobs.empty()) Submit();
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    full_cv_.notify_one();
    worker_.join();
  }

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
  void Submit() {
    std::unique_lock lock(mu_);
    full_.push_back(filling_);
    full_cv_.notify_one();
    free_cv_.wait(lock, [&] { return !free_.empty(); });
    filling_ = free_.back();
    free_.pop_back();
  }

  void Work() {
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

// What the rows of one trace need besides their records: the descriptor state and the files,
// fed every record in order.
class RowModel {
 public:
  explicit RowModel(const TraceReader& reader) : reader_(reader) {
    if (const nlohmann::json* host = json_fields::Object(reader.meta(), "host")) {
      state_.SetArch(json_fields::GetString(*host, "arch"));
      state_.SetPageSize(json_fields::GetUint(*host, "page_size", 4096));
    }
    types_recorded_ = json_fields::Object(reader.meta(), "capture") != nullptr;
  }

  // The flag names of the trace's machine.
  FlagNames flag_names() const {
    return FlagNames(state_.o_direct_flag(), state_.o_directory_flag());
  }

  // Updates the model with record `h` and sets the context of its row; false for a record that
  // has no table.
  bool Context(const iot_rec_hdr* h, RowContext* ctx) {
    switch (h->type) {
      case IOT_REC_SYSCALL: *ctx = Prepare(As<iot_syscall>(h)); break;
      case IOT_REC_PROC: *ctx = Prepare(As<iot_proc>(h)); break;
      case IOT_REC_FD_SNAPSHOT: *ctx = Prepare(As<iot_fd_snapshot>(h)); break;
      case IOT_REC_MAP_SNAPSHOT: *ctx = Prepare(As<iot_map_snapshot>(h)); break;
      case IOT_REC_PAGE_FAULT: ctx->file = ByIdentity(As<iot_page_fault>(h)); break;
      case IOT_REC_PAGE_CACHE: ctx->file = ByIdentity(As<iot_page_cache>(h)); break;
      case IOT_REC_WRITEBACK: ctx->file = ByIdentity(As<iot_writeback>(h)); break;
      case IOT_REC_BLOCK: {
        const iot_block& b = As<iot_block>(h);
        ctx->file = ByIdentity(b.ino_dev, b.ino);
        break;
      }
      case IOT_REC_ASYNC_IO: *ctx = Prepare(As<iot_async_io>(h)); break;
      case IOT_REC_INTENT: ctx->text[0] = TextOrEmpty(As<iot_intent>(h).label_id); break;
      case IOT_REC_CACHE_STATE: *ctx = Prepare(As<iot_cache_state>(h)); break;
      case IOT_REC_SUBPAGE: ctx->file = ByIdentity(As<iot_subpage>(h)); break;
      case IOT_REC_NVME:
      case IOT_REC_LOST:
      case IOT_REC_CLOCK:
      case IOT_REC_SCHED:
      case IOT_REC_IOVEC: break;
      default: return false;
    }
    return true;
  }

  // The files table, and the files named so far (ids 0..n-1) with their paths.
  template <class T>
  void FilesTable(T& t) const;
  size_t FileCount() const { return files_.entries().size(); }
  std::string_view FilePath(uint32_t id) const { return files_.entries()[id].path; }

 private:
  std::optional<std::string_view> Text(uint32_t id) const {
    if (id == 0) return std::nullopt;
    return reader_.String(id);
  }
  std::string_view TextOrEmpty(uint32_t id) const { return id ? reader_.String(id) : ""; }
  uint32_t ByIdentity(uint32_t dev, uint64_t ino) {
    return ino != 0 ? files_.ByIdentity(dev, ino, {}, FileIds::kNoType) : kNoFile;
  }
  template <typename R>
  uint32_t ByIdentity(const R& r) {
    return ByIdentity(r.dev, r.ino);
  }

  RowContext Prepare(const iot_syscall& s);
  RowContext Prepare(const iot_proc& p);
  RowContext Prepare(const iot_fd_snapshot& s);
  RowContext Prepare(const iot_map_snapshot& m);
  RowContext Prepare(const iot_async_io& a);
  RowContext Prepare(const iot_cache_state& c);

  const TraceReader& reader_;
  model::TraceState state_;
  bool types_recorded_ = false;
  FileIds files_;
};

// Streams the records of one trace into the tables.
class Exporter {
 public:
  Exporter(const TraceReader& reader, TableFormat format, std::string dir)
      : format_(format), dir_(std::move(dir)), model_(reader),
        formatter_(model_.flag_names()), pipeline_(formatter_) {}

  // Writes table `table` alone, to descriptor `fd`, instead of every table into the directory.
  // Every record still feeds the model, so file ids are those of the whole export.
  void WriteOnly(std::string_view table, int fd) {
    only_ = table;
    fd_ = fd;
  }

  Status Row(const iot_rec_hdr* h) {
    RowContext ctx;
    if (!model_.Context(h, &ctx)) return Status::Ok();
    IOTWIN_ASSIGN_OR_RETURN(Table * t, Get(h->type));
    if (t) pipeline_.Push(t, h, ctx);
    return Status::Ok();
  }

  // The record tables (in order of first appearance) and the files table, all written to their
  // files, not yet committed.
  Result<std::vector<std::unique_ptr<Table>>> Finish() {
    pipeline_.Finish();
    std::vector<std::unique_ptr<Table>> tables;
    for (auto& t : order_) tables.push_back(std::move(t));
    if (model_.FileCount() != 0 && (only_.empty() || only_ == kFilesTable)) {
      auto t = std::make_unique<Table>(std::string(kFilesTable), format_);
      IOTWIN_RETURN_IF_ERROR(Open(*t));
      model_.FilesTable(*t);
      tables.push_back(std::move(t));
    }
    for (auto& t : tables) IOTWIN_RETURN_IF_ERROR(t->Finish());
    return tables;
  }

 private:
  // The table of record type `type`, created and opened as its first record arrives (before
  // the formatting thread sees it); an open failure ends the export. nullptr: not written.
  Result<Table*> Get(uint16_t type) {
    if (Table* t = by_type_[type]) return t;
    if (skipped_[type]) return nullptr;
    if (!only_.empty() && StemOf(type) != only_) {
      skipped_[type] = true;
      return nullptr;
    }
    order_.push_back(std::make_unique<Table>(std::string(StemOf(type)), format_));
    IOTWIN_RETURN_IF_ERROR(Open(*order_.back()));
    return by_type_[type] = order_.back().get();
  }
  Status Open(Table& t) {
    return fd_ >= 0 ? t.file().OpenDescriptor(fd_, "standard output") : t.OpenFile(dir_);
  }

  TableFormat format_;
  std::string dir_;
  RowModel model_;
  std::string_view only_;  // WriteOnly
  int fd_ = -1;
  std::array<Table*, 256> by_type_{};
  std::array<bool, 256> skipped_{};
  std::vector<std::unique_ptr<Table>> order_;
  RowFormatter formatter_;  // after model_: built from it
  RowPipeline pipeline_;    // last: its thread writes into order_'s tables until it ends
};

// The file a call concerns: the identity it recorded, else the open file behind its data
// descriptor (or the one it opened), else its first path as resolved; and the second file
// (a copy's destination, a rename's or link's new path).
RowContext RowModel::Prepare(const iot_syscall& s) {
  const bool path_readable = !(s.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT));
  // Paths resolve against the cwd and descriptors as they were before the call.
  std::optional<std::string> resolved;
  if (s.path_id && path_readable && model::OpTakesPath(s.op)) {
    resolved = state_.Resolve(s.tgid, model::PathDirFd(s), reader_.String(s.path_id));
  }
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(s.path_id);
  ctx.text[1] = TextOrEmpty(s.path2_id);
  const int second_fd = model::SecondFd(s);
  if (second_fd >= 0) {
    if (const auto* d2 = state_.FdDescription(s.tgid, second_fd)) {
      ctx.file2 = files_.OfDescription(*d2);
    }
  } else if (s.path2_id && path_readable && model::OpTakesPath2(s.op)) {
    auto resolved2 = state_.Resolve(s.tgid, model::Path2DirFd(s), reader_.String(s.path2_id));
    if (resolved2) ctx.file2 = files_.ByPath(*resolved2, FileIds::kNoType);
  }
  const model::SyscallEffect e = state_.OnSyscall(s, Text(s.path_id), Text(s.path2_id));
  const model::OpenFileDescription* d =
      state_.Description(e.created != model::kNoDescription ? e.created : e.desc);
  std::string_view path = d && !d->path.empty() ? std::string_view(d->path)
                          : resolved            ? std::string_view(*resolved)
                                                : std::string_view();
  if (s.ino != 0 && !(s.sflags & IOT_SCF_NO_FILE)) {
    ctx.file = files_.ByIdentity(s.dev, s.ino, path, s.ftype);
  } else if (d && (d->ino != 0 || !d->path.empty())) {
    ctx.file = files_.OfDescription(*d);
  } else if (!path.empty()) {
    ctx.file = files_.ByPath(path, FileIds::kNoType);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_proc& p) {
  state_.OnProc(p, Text(p.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(p.path_id);
  return ctx;
}

RowContext RowModel::Prepare(const iot_fd_snapshot& s) {
  const model::DescriptionId id = state_.OnFdSnapshot(s, Text(s.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(s.path_id);
  if (const model::OpenFileDescription* d = state_.Description(id)) {
    ctx.file = s.ino != 0 ? files_.ByIdentity(s.dev, s.ino, d->path, s.ftype)
                          : files_.OfDescription(*d);
  } else if (s.ino != 0) {
    ctx.file = files_.ByIdentity(s.dev, s.ino, {}, s.ftype);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_map_snapshot& m) {
  state_.OnMapSnapshot(m, Text(m.path_id));
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(m.path_id);
  const model::FileMapping* map = m.end > m.start ? state_.MappingAt(m.tgid, m.start) : nullptr;
  const model::OpenFileDescription* d = map ? state_.Description(map->desc) : nullptr;
  if (m.ino != 0) {
    ctx.file = files_.ByIdentity(m.dev, m.ino, d ? std::string_view(d->path) : "",
                                 FileIds::kNoType);
  } else if (d) {
    ctx.file = files_.OfDescription(*d);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_async_io& a) {
  RowContext ctx;
  if (a.fd >= 0) {
    if (const auto* d = state_.FdDescription(a.tgid, a.fd)) ctx.file = files_.OfDescription(*d);
  }
  return ctx;
}

RowContext RowModel::Prepare(const iot_cache_state& c) {
  RowContext ctx;
  ctx.text[0] = TextOrEmpty(c.path_id);
  std::string path;
  if (c.path_id) {
    const std::string_view text = reader_.String(c.path_id);
    if (!text.empty() && text[0] == '/') path = model::NormalizePath(text);
  }
  if (c.ino != 0) {
    ctx.file = files_.ByIdentity(c.dev, c.ino, path, FileIds::kNoType);
  } else if (!path.empty()) {
    ctx.file = files_.ByPath(path, FileIds::kNoType);
  }
  return ctx;
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_syscall& s, const RowContext& ctx) const {
  const SyscallFlagSets& sets = sets_[s.op <= IOT_OP_MAX ? s.op : 0];
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("dur_ns", s.dur);
  w.U("tgid", s.tgid);
  w.U("tid", s.tid);
  w.U("cpu", s.cpu);
  w.Word("op", OpName(s.op));
  w.I("ret", s.ret);
  w.I("fd", s.fd);
  w.I("fd2", s.fd2);
  w.U("offset", s.offset);
  w.U("length", s.length);
  w.U("aux", s.aux);
  w.Names("aux_names", names_, sets.aux, s.aux);
  w.U("flags", s.flags);
  w.Names("flags_names", names_, sets.flags, s.flags);
  w.U("mode", s.mode);
  w.Names("mode_names", names_, sets.mode, s.mode);
  w.U("ino", s.ino);
  w.U("fsize", s.fsize);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.S("path", ctx.text[0], &t.scratch());
  w.File("file2_id", ctx.file2);
  w.S("path2", ctx.text[1], &t.scratch());
  w.U("ftype", s.ftype);
  w.U("sflags", s.sflags);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_proc& p, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", p.ts);
  w.Word("kind", ProcKind(p.kind));
  w.U("flags", p.flags);
  w.U("tgid", p.tgid);
  w.U("tid", p.tid);
  w.U("child_tgid", p.child_tgid);
  w.U("child_tid", p.child_tid);
  w.U("clone_flags", p.clone_flags);
  w.I("exit_code", p.exit_code);
  w.S("path", ctx.text[0], &t.scratch());
  w.S("comm", Cstr(p.comm, sizeof p.comm), &t.scratch());
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_fd_snapshot& s, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("tgid", s.tgid);
  w.I("fd", s.fd);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("ino", s.ino);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.U("pos", s.pos);
  w.U("fsize", s.fsize);
  w.U("flags", s.flags);
  w.Names("flags_names", names_, FlagSet::kOpen, s.flags);
  w.U("ftype", s.ftype);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_map_snapshot& m, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", m.ts);
  w.U("tgid", m.tgid);
  w.U("start", m.start);
  w.U("end", m.end);
  w.U("pgoff", m.pgoff);
  w.U("ino", m.ino);
  w.U("dev", m.dev);
  w.File("file_id", ctx.file);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("prot", m.prot);
  w.Names("prot_names", names_, FlagSet::kProt, m.prot);
  w.U("flags", m.flags);
  w.Names("flags_names", names_, FlagSet::kMap, m.flags);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_page_fault& f, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", f.ts);
  w.U("tgid", f.tgid);
  w.U("tid", f.tid);
  w.U("cpu", f.cpu);
  w.U("addr", f.addr);
  w.U("ino", f.ino);
  w.U("dev", f.dev);
  w.File("file_id", ctx.file);
  w.U("pgoff", f.pgoff);
  w.U("nr_pages", f.nr_pages);
  w.U("write", (f.flags & IOT_PFF_WRITE) ? 1 : 0);
  w.U("major", (f.flags & IOT_PFF_MAJOR) ? 1 : 0);
  w.U("shared", (f.flags & IOT_PFF_SHARED) ? 1 : 0);
  w.U("exec", (f.flags & IOT_PFF_EXEC) ? 1 : 0);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_page_cache& c, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", c.ts);
  w.Word("kind", PageCacheKind(c.kind));
  w.U("cpu", c.cpu);
  w.U("ino", c.ino);
  w.U("dev", c.dev);
  w.File("file_id", ctx.file);
  w.U("index", c.index);
  w.U("nr_pages", c.nr_pages);
  w.U("tgid", c.tgid);
  w.U("tid", c.tid);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_writeback& wb, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", wb.ts);
  w.Word("kind", WritebackKind(wb.kind));
  w.I("reason", static_cast<int64_t>(wb.reason) - 1);
  w.U("ino", wb.ino);
  w.U("dev", wb.dev);
  w.File("file_id", ctx.file);
  w.U("index", wb.index);
  w.U("nr", wb.nr);
  w.U("tgid", wb.tgid);
  w.U("tid", wb.tid);
  w.U("sync_mode", wb.sync_mode);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_block& b, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", b.ts);
  w.Word("phase", BlockPhaseName(b.phase));
  w.U("dev", b.dev);
  w.U("sector", b.sector);
  w.U("nr_sector", b.nr_sector);
  w.U("bytes", b.bytes);
  w.Text("rwbs", 32, [&](char* p) {
    const std::string rwbs = RwbsText(b.flags);
    std::memcpy(p, rwbs.data(), std::min<size_t>(rwbs.size(), 32));
    return p + std::min<size_t>(rwbs.size(), 32);
  });
  w.U("flags", b.flags);
  w.U("rq_id", b.rq_id);
  w.U("bio_id", b.bio_id);
  w.U("tgid", b.tgid);
  w.U("tid", b.tid);
  w.S("comm", Cstr(b.comm, sizeof b.comm), &t.scratch());
  w.I("error", b.error);
  w.U("cpu", b.cpu);
  w.U("ino", b.ino);
  w.U("ino_dev", b.ino_dev);
  w.File("file_id", ctx.file);
  w.U("aux", b.aux);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_nvme& n, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", n.ts);
  w.Word("phase", NvmePhase(n.phase));
  w.U("ctrl_id", n.ctrl_id);
  w.U("dev", n.dev);
  w.U("nsid", n.nsid);
  w.U("qid", n.qid);
  w.U("cid", n.cid);
  w.U("opcode", n.opcode);
  w.U("slba", n.slba);
  w.U("nlb", n.nlb);
  w.U("lba_size", n.lba_size);
  w.U("status", n.status);
  w.U("result", n.result);
  w.U("rq_id", n.rq_id);
  w.U("cdw10", n.cdw10);
  w.U("cdw11", n.cdw11);
  w.U("cdw12", n.cdw12);
  w.U("fctype", n.fctype);
  w.U("flags", n.flags);
  w.U("retries", n.retries);
  w.U("cpu", n.cpu);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_async_io& a, const RowContext& ctx) const {
  const AsyncOpInfo op = AsyncOp(a.engine, a.opcode);
  auto w = t.Begin();
  w.U("ts_ns", a.ts);
  w.Word("engine", AsyncEngineName(a.engine));
  w.Word("phase", a.phase == IOT_AIO_SUBMIT ? "submit" : a.phase == IOT_AIO_COMPLETE ? "complete" : "?");
  w.U("opcode", a.opcode);
  w.Word("opcode_name", op.name);
  w.U("ctx", a.ctx);
  w.U("req_id", a.req_id);
  w.U("user_data", a.user_data);
  w.I("fd", a.fd);
  w.File("file_id", ctx.file);
  w.U("offset", a.offset);
  w.U("length", a.length);
  w.I("res", a.res);
  w.U("tgid", a.tgid);
  w.U("tid", a.tid);
  w.U("flags", a.flags);
  w.U("rw_flags", a.rw_flags);
  w.Names("rw_flags_names", names_, FlagSet::kRwf, a.rw_flags);
  w.U("cpu", a.cpu);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_intent& in, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", in.ts);
  w.Word("kind", IntentKind(in.kind));
  w.U("source", in.source);
  w.U("tgid", in.tgid);
  w.U("tid", in.tid);
  w.S("label", ctx.text[0], &t.scratch());
  w.U("value", in.value);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_lost& l, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", l.ts);
  w.Word("source", SourceName(l.source));
  w.U("cpu", l.cpu);
  w.U("count", l.count);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_clock& c, const RowContext&) const {
  auto w = t.Begin();
  w.U("monotonic_ns", c.monotonic_ns);
  w.U("realtime_ns", c.realtime_ns);
  w.U("boottime_ns", c.boottime_ns);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_cache_state& c, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", c.ts);
  w.S("path", ctx.text[0], &t.scratch());
  w.U("ino", c.ino);
  w.U("dev", c.dev);
  w.File("file_id", ctx.file);
  w.U("fsize", c.fsize);
  w.U("resident_pages", c.resident_pages);
  w.U("total_pages", c.total_pages);
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_subpage& s, const RowContext& ctx) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("tgid", s.tgid);
  w.U("ino", s.ino);
  w.U("dev", s.dev);
  w.File("file_id", ctx.file);
  w.U("pgoff", s.pgoff);
  w.U("changed_words", s.changed_words);
  w.Text("bitmap_hex", sizeof s.bitmap * 2, [&](char* p) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (uint64_t w : s.bitmap) {
      for (int shift = 60; shift >= 0; shift -= 4) *p++ = kHex[(w >> shift) & 0xf];
    }
    return p;
  });
  t.End(w);
}

template <typename TableT>
void RowFormatter::Put(TableT& t, const iot_sched& s, const RowContext&) const {
  auto w = t.Begin();
  w.U("ts_ns", s.ts);
  w.U("dur_ns", s.dur);
  w.Word("kind", SchedKind(s.kind));
  w.U("cpu", s.cpu);
  w.U("tgid", s.tgid);
  w.U("tid", s.tid);
  w.U("vec", s.vec);
  t.End(w);
}

// An iovec record carries the lengths of its buffers after its fixed part.
template <typename TableT>
void RowFormatter::Iovec(TableT& t, const iot_iovec& v, const iot_rec_hdr* h) const {
  const size_t have = (h->size - sizeof(iot_iovec)) / 8;
  const size_t n = std::min<size_t>(v.captured, have);
  const auto* lengths = reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec);
  auto w = t.Begin();
  w.U("ts_ns", v.ts);
  w.U("tid", v.tid);
  w.U("count", v.count);
  w.Text("lengths", n * 21, [&](char* p) {
    for (size_t i = 0; i < n; i++) {
      uint64_t len;
      std::memcpy(&len, lengths + i * 8, 8);
      if (i) *p++ = ';';
      p = WriteU64(p, len);
    }
    return p;
  });
  t.End(w);
}

template <class T>
void RowModel::FilesTable(T& t) const {
  const auto& entries = files_.entries();
  for (size_t id = 0; id < entries.size(); id++) {
    const FileIds::Entry& f = entries[id];
    const model::FileKind kind =
        model::ClassifyFile(f.ftype, f.path, types_recorded_ && f.untyped && f.ftype == 0);
    auto w = t.Begin();
    w.U("file_id", id);
    w.U("dev", f.dev);
    w.U("ino", f.ino);
    w.U("ftype", f.ftype);
    w.Word("kind", model::FileKindKey(kind));
    w.S("path", f.path, &t.scratch());
    t.End(w);
  }
}

}  // namespace

Result<TableExportResult> ExportTables(const std::string& trace, const std::string& dir,
                                       TableFormat format) {
  IOTWIN_RETURN_IF_ERROR(PrepareTableDir(dir));
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  Exporter exporter(*reader, format, dir);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    IOTWIN_RETURN_IF_ERROR(exporter.Row(h));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto tables, exporter.Finish());
  TableExportResult result;
  std::vector<TableFile*> files;
  for (auto& t : tables) {
    result.rows[t->stem()] = t->rows();
    files.push_back(&t->file());
  }
  // The header metadata and footer summary, for the context the tables leave out.
  nlohmann::json info;
  info["source"] = BytesToText(trace);
  info["meta"] = reader->meta();
  if (reader->summary()) info["summary"] = *reader->summary();
  info["tables"] = result.rows;
  const std::string text =
      info.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::vector<std::string_view> known{kFilesTable};
  for (const RecordTable& t : kRecordTables) known.push_back(t.stem);
  IOTWIN_ASSIGN_OR_RETURN(result.removed, CommitTables(dir, format, files, known, text));
  return result;
}

std::vector<std::string_view> TableNames() {
  std::vector<std::string_view> names;
  for (const RecordTable& t : kRecordTables) names.push_back(t.stem);
  names.push_back(kFilesTable);
  return names;
}

Result<uint64_t> ExportTable(const std::string& trace, std::string_view table, TableFormat format,
                             int fd) {
  const auto names = TableNames();
  if (std::find(names.begin(), names.end(), table) == names.end()) {
    return Status::Invalid("no table '{}'", BytesToText(table));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  Exporter exporter(*reader, format, "");
  exporter.WriteOnly(table, fd);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, reader->Next());
    if (!h) break;
    IOTWIN_RETURN_IF_ERROR(exporter.Row(h));
  }
  IOTWIN_ASSIGN_OR_RETURN(auto tables, exporter.Finish());
  uint64_t rows = 0;
  for (auto& t : tables) {
    rows += t->rows();
    IOTWIN_RETURN_IF_ERROR(t->file().Commit());
  }
  return rows;
}

std::string_view TableOf(uint16_t type) {
  const std::string_view stem = StemOf(type);
  return stem == "unknown" ? std::string_view() : stem;
}

// ---- tables as columns (table_columns.h) -----------------------------------------------------

struct ColumnReader::Impl {
  Impl(std::unique_ptr<TraceReader> r, ColumnQuery q, bool salvage_)
      : reader(std::move(r)), query(std::move(q)), salvage(salvage_), model(*reader),
        formatter(model.flag_names()) {}
  std::unique_ptr<TraceReader> reader;
  ColumnQuery query;
  bool salvage;
  RowModel model;
  RowFormatter formatter;
  std::array<ColumnTable*, 256> by_type{};
  std::vector<std::unique_ptr<ColumnTable>> order;
  std::vector<int8_t> matches;  // per file id: -1 not yet known, 0 no, 1 yes
  ColumnQuery all_columns;      // the files table's
  std::unique_ptr<ColumnTable> files;
};

ColumnReader::ColumnReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ColumnReader::~ColumnReader() = default;

Result<std::unique_ptr<ColumnReader>> ColumnReader::Open(const std::string& trace,
                                                         ColumnQuery query, bool salvage) {
  TraceReaderOptions options;
  options.salvage = salvage;
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace, options));
  auto impl = std::make_unique<Impl>(std::move(reader), std::move(query), salvage);
  Impl* p = impl.get();
  p->query.file_matches = [p](uint32_t id) {
    if (id >= p->matches.size()) p->matches.resize(size_t{id} + 1, -1);
    if (p->matches[id] < 0) {
      p->matches[id] = model::GlobMatch(p->query.path_glob, p->model.FilePath(id)) ? 1 : 0;
    }
    return p->matches[id] == 1;
  };
  return std::unique_ptr<ColumnReader>(new ColumnReader(std::move(impl)));
}

Result<bool> ColumnReader::Read(size_t max_rows) {
  Impl& p = *impl_;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, p.reader->Next());
    if (!h) break;
    RowContext ctx;
    if (!p.model.Context(h, &ctx)) continue;
    ColumnTable*& t = p.by_type[h->type];
    if (!t) {
      p.order.push_back(std::make_unique<ColumnTable>(std::string(StemOf(h->type)), &p.query));
      t = p.order.back().get();
    }
    if (!t->wanted()) continue;
    p.formatter.Row(*t, h, ctx);
    if (t->mismatched()) return Status::Internal("table {}: a row unlike the first", t->stem());
    if (t->rows() >= max_rows) return true;
  }
  const TraceDamage& damage = p.reader->damage();
  if (damage.truncated && !p.salvage) return Status::Corrupt("{}", damage.truncated_detail);
  return false;
}

std::vector<ColumnTable*> ColumnReader::Tables() const {
  std::vector<ColumnTable*> tables;
  for (const auto& t : impl_->order) {
    if (t->wanted()) tables.push_back(t.get());
  }
  return tables;
}

ColumnTable& ColumnReader::Files() {
  impl_->files = std::make_unique<ColumnTable>(std::string(kFilesTable), &impl_->all_columns);
  impl_->model.FilesTable(*impl_->files);
  return *impl_->files;
}

size_t ColumnReader::FileCount() const { return impl_->model.FileCount(); }
std::string_view ColumnReader::FilePath(uint32_t id) const { return impl_->model.FilePath(id); }
const TraceReader& ColumnReader::trace() const { return *impl_->reader; }

}  // namespace iotwin::interop
