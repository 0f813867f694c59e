// The CSV/JSONL export's tables as typed columns in memory, for the Python module (python/):
// the same row functions of table_export.cc fill them, so the columns, their names and their
// order are those of `iotwin export --csv` (docs/tables.md), typed by the record field each one
// holds. Text columns (op and kind names, flag names, names from the trace) are codes into a
// dictionary of distinct values. A query keeps only the tables and columns asked for and the rows
// that pass its filters, so memory grows with what is returned, not with the trace.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "format/trace_reader.h"
#include "interop/flag_names.h"

namespace iotwin::interop {

// What to read. Empty sets mean all.
struct ColumnQuery {
  std::vector<std::string> tables;   // table names (file stems), `files` included
  std::vector<std::string> columns;  // column names; others are not stored
  // Row filters, each applied to the tables that have the column: `op` one of `ops`; `ts_ns` in
  // [ts_from, ts_to); the file of `file_id` has a path matching `path_glob` (model::GlobMatch);
  // `tgid` one of `tgids`, `tid` one of `tids`.
  std::vector<std::string> ops;
  std::vector<uint64_t> tgids, tids;
  uint64_t ts_from = 0, ts_to = UINT64_MAX;
  std::string path_glob;
  // Rows each stored column makes room for at its first row (at least ColumnTable::kFirstRows):
  // a caller that knows the table's size (the trace's footer counts, capped: they are untrusted)
  // saves the columns' regrowing. Room not filled costs address space only.
  size_t reserve_rows = 0;
  // Set by ColumnReader: whether the file `file_id` passes path_glob.
  std::function<bool(uint32_t)> file_matches;

  bool WantsTable(std::string_view stem) const;
  bool WantsColumn(std::string_view name) const;
};

// One column. Numbers: `width` bytes per row, signed or not. Text: a uint32 code per row into
// `dictionary` (distinct values as bytes; code 0 is the first value seen, not necessarily "").
struct Column {
  enum class Kind : uint8_t { kUnsigned, kSigned, kText };
  std::string name;
  Kind kind = Kind::kUnsigned;
  uint8_t width = 8;
  bool stored = true;  // asked for (or needed by a filter)
  // Rows, `width` bytes each (malloc'd: grown by realloc, which moves no pages; handed to NumPy
  // as is).
  std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
  std::vector<std::string_view> dictionary;  // by code

  // Text: the code of `text`, added when new. A small cache keyed by the text's address comes
  // first (callers mostly pass the same static names); a hit is checked against the content. An
  // empty view may have no address (the reader's text for an undefined string id): it never
  // matches a slot, whose initial address is null too and whose code may not exist yet.
  uint32_t Code(std::string_view text) {
    CacheSlot& slot = cache_[(reinterpret_cast<uintptr_t>(text.data()) >> 3) % kCache];
    if (slot.data != nullptr && slot.data == text.data() && slot.size == text.size() &&
        std::memcmp(dictionary[slot.code].data(), text.data(), text.size()) == 0) {
      return slot.code;
    }
    return slot.code = CodeSlow(text, &slot);
  }
  // Flag names: the code of the names of `value` in `set`, cached by (set, value).
  uint32_t NamesCode(const FlagNames& names, FlagSet set, uint64_t value) {
    NamesSlot& slot = names_cache_[(value * 0x9E3779B97F4A7C15ull >> 58) ^ static_cast<uint8_t>(set)];
    if (slot.used && slot.value == value && slot.set == set) return slot.code;
    char text[FlagNames::kMaxLength];
    const char* end = set == FlagSet::kNone ? text : names.Write(set, value, text);
    slot = NamesSlot{value, set, true, Code(std::string_view(text, static_cast<size_t>(end - text)))};
    return slot.code;
  }

 private:
  static constexpr size_t kCache = 64;
  struct CacheSlot {
    const char* data = nullptr;
    size_t size = 0;
    uint32_t code = 0;
  };
  struct NamesSlot {
    uint64_t value = 0;
    FlagSet set = FlagSet::kNone;
    bool used = false;
    uint32_t code = 0;
  };
  uint32_t CodeSlow(std::string_view text, CacheSlot* slot);
  std::unordered_map<std::string_view, uint32_t> codes_;  // views into storage_
  std::vector<std::unique_ptr<std::string>> storage_;      // the dictionary's bytes
  CacheSlot cache_[kCache];
  NamesSlot names_cache_[64 + 32];
};

class ColumnTable;

// The row writer of a ColumnTable: the interface of the text export's RowWriter (U, I, File,
// Word, Names, S, Text), storing values instead of writing text. The k-th field of a row goes to
// column k; the first row creates the columns.
class ColumnRowWriter {
 public:
  ColumnRowWriter(ColumnTable* table, Column* columns, size_t count, size_t row)
      : t_(table), columns_(columns), count_(count), row_(row) {}

  template <size_t N, typename V>
  void U(const char (&name)[N], V v) {
    Number(name, Column::Kind::kUnsigned, static_cast<std::make_unsigned_t<V>>(v));
  }
  template <size_t N, typename V>
  void I(const char (&name)[N], V v) {
    Number(name, Column::Kind::kSigned, static_cast<std::make_signed_t<V>>(v));
  }
  // A file id: -1 when the row concerns no known file.
  template <size_t N>
  void File(const char (&name)[N], uint32_t id) {
    Number(name, Column::Kind::kSigned, id == UINT32_MAX ? int64_t{-1} : int64_t{id});
  }
  template <size_t N>
  void Word(const char (&name)[N], std::string_view text) {
    if (Column* c = Next(name, Column::Kind::kText, 4)) Put(*c, c->Code(text));
  }
  template <size_t N>
  void Names(const char (&name)[N], const FlagNames& names, FlagSet set, uint64_t value) {
    if (Column* c = Next(name, Column::Kind::kText, 4)) Put(*c, c->NamesCode(names, set, value));
  }
  template <size_t N>
  void S(const char (&name)[N], std::string_view bytes, std::string*) {
    if (Column* c = Next(name, Column::Kind::kText, 4)) Put(*c, c->Code(bytes));
  }
  template <size_t N, typename F>
  void Text(const char (&name)[N], size_t max, F&& write) {
    Column* c = Next(name, Column::Kind::kText, 4);
    if (!c) return;
    scratch_.resize(max);
    char* end = write(scratch_.data());
    Put(*c, c->Code(std::string_view(scratch_.data(), static_cast<size_t>(end - scratch_.data()))));
  }

 private:
  friend class ColumnTable;
  template <typename T>
  void Number(std::string_view name, Column::Kind kind, T v) {
    if (Column* c = Next(name, kind, sizeof v)) Put(*c, v);
  }
  template <typename T>
  [[gnu::always_inline]] void Put(Column& c, T v) {
    std::memcpy(c.data.get() + row_ * sizeof v, &v, sizeof v);
  }
  // The column of the next field, or nullptr when it is not stored; on the first row, a new
  // column.
  [[gnu::always_inline]] Column* Next(std::string_view name, Column::Kind kind, uint8_t width) {
    if (!columns_) return AddColumn(name, kind, width);
    if (field_ == count_) return Mismatch();
    Column& c = columns_[field_++];
    // A row whose fields differ from the first row's would write past a column's values.
    if (c.kind != kind || c.width != width) return Mismatch();
    return c.stored ? &c : nullptr;
  }
  Column* AddColumn(std::string_view name, Column::Kind kind, uint8_t width);
  Column* Mismatch();

  ColumnTable* t_;
  Column* columns_;  // nullptr on the first row
  size_t count_;     // columns
  size_t row_;
  size_t field_ = 0;
  std::string scratch_;
};

// One table: its columns and the rows kept. A table not asked for keeps nothing.
class ColumnTable {
 public:
  using Config = ColumnQuery*;
  static constexpr size_t kFirstRows = 1024;  // room made by the first row; doubled when full

  ColumnTable(std::string stem, ColumnQuery* query)
      : stem_(std::move(stem)), query_(query), wanted_(query->WantsTable(stem_)) {}

  ColumnRowWriter Begin() {
    if (columns_.empty()) return ColumnRowWriter(this, nullptr, 0, rows_);
    if (rows_ == capacity_) Grow();
    return ColumnRowWriter(this, columns_.data(), columns_.size(), rows_);
  }
  void End(ColumnRowWriter& w);
  std::string& scratch() { return scratch_; }

  const std::string& stem() const { return stem_; }
  bool wanted() const { return wanted_; }
  size_t rows() const { return rows_; }
  // A row's fields differed from the first row's (a row function with a field it writes only
  // sometimes): the table cannot be read as columns.
  bool mismatched() const { return mismatched_; }
  std::vector<Column>& columns() { return columns_; }
  // Drops the rows kept (a batch read); columns and dictionaries stay.
  void Clear() { rows_ = 0; }

 private:
  friend class ColumnRowWriter;
  void Grow();
  bool Keep(size_t row);
  // The caller's hint may come from a trace's footer (untrusted): capped.
  static constexpr size_t kMostReservedRows = size_t{1} << 26;
  size_t FirstCapacity() const {
    return std::clamp(query_->reserve_rows, kFirstRows, kMostReservedRows);
  }

  std::string stem_;
  ColumnQuery* query_;
  bool wanted_;
  std::vector<Column> columns_;
  size_t rows_ = 0, capacity_ = 0;
  // Columns the filters read (index + 1; 0: the table has none).
  size_t op_col_ = 0, ts_col_ = 0, file_col_ = 0, tgid_col_ = 0, tid_col_ = 0;
  bool mismatched_ = false;
  std::vector<int8_t> op_passes_;  // per op code: -1 unknown, 0 no, 1 yes
  std::string scratch_;
};

// Reads a trace through the table export's row functions into the tables a query asks for,
// all at once or in batches. A damaged or truncated trace is an error naming the file and the
// byte offset (unless opened to salvage: damaged chunks skipped, a truncated end accepted).
class ColumnReader {
 public:
  static Result<std::unique_ptr<ColumnReader>> Open(const std::string& trace, ColumnQuery query,
                                                    bool salvage);
  ~ColumnReader();

  // Reads records until a table asked for holds `max_rows` rows or the trace ends; false once
  // the trace has ended.
  Result<bool> Read(size_t max_rows);
  // The tables asked for that the trace has shown so far, in order of first appearance.
  std::vector<ColumnTable*> Tables() const;
  // The files table, whole (every column, every file named so far).
  ColumnTable& Files();
  // Files known so far (ids 0..n-1) and the path of one (the files table's `path`).
  size_t FileCount() const;
  std::string_view FilePath(uint32_t id) const;
  const TraceReader& trace() const;

 private:
  struct Impl;
  explicit ColumnReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The table of records of type `type` (IOT_REC_*), "" when the export has none.
std::string_view TableOf(uint16_t type);

}  // namespace iotwin::interop
