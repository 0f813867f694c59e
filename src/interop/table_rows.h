// The row writer of the CSV/JSONL export: a table's rows are written straight into one large
// buffer with a hand-rolled integer writer (no per-row strings, no iostreams) and flushed with
// write(2) a megabyte at a time. The row functions (table_schema.h) write every row through a
// RowWriter; a ColumnRowWriter (table_columns.h) has the same interface.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes_text.h"
#include "base/status.h"
#include "interop/exporters.h"
#include "interop/flag_names.h"
#include "interop/table_files.h"

namespace iotwin::interop::table_export {

// A row that concerns no known file.
constexpr uint32_t kNoFile = UINT32_MAX;

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
[[gnu::noinline]] char* WriteU64Long(char* p, uint64_t v);

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

}  // namespace iotwin::interop::table_export
