#include "interop/table_columns.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace iotwin::interop {

bool ColumnQuery::WantsTable(std::string_view stem) const {
  return tables.empty() || std::find(tables.begin(), tables.end(), stem) != tables.end();
}

bool ColumnQuery::WantsColumn(std::string_view name) const {
  return columns.empty() || std::find(columns.begin(), columns.end(), name) != columns.end();
}

namespace {

// Asks for transparent huge pages for a column's buffer (where THP is "madvise", as on Debian):
// the columns of millions of rows grow into fresh memory, and the kernel faulting and zeroing it
// 4 KiB at a time is a large part of a read (docs/python.md, "Speed"). The 2 MiB-aligned part of
// a large malloc'd buffer qualifies (glibc maps such buffers, and realloc moves them with
// mremap, which keeps the advice). Advice only: failure changes nothing.
void AdviseHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

uint32_t Column::CodeSlow(std::string_view text, CacheSlot* slot) {
  uint32_t code;
  if (auto it = codes_.find(text); it != codes_.end()) {
    code = it->second;
  } else {
    code = static_cast<uint32_t>(dictionary.size());
    storage_.push_back(std::make_unique<std::string>(text));
    dictionary.push_back(*storage_.back());
    codes_.emplace(dictionary.back(), code);
  }
  *slot = CacheSlot{text.data(), text.size(), code};
  return code;
}

Column* ColumnRowWriter::AddColumn(std::string_view name, Column::Kind kind, uint8_t width) {
  Column c;
  c.name = std::string(name);
  c.kind = kind;
  c.width = width;
  // The filters' columns are kept whatever the query lists.
  c.stored = t_->query_->WantsColumn(name) || name == "op" || name == "ts_ns" ||
             name == "file_id" || name == "tgid" || name == "tid";
  if (c.stored) {
    const size_t bytes = size_t{width} * t_->FirstCapacity();
    c.data.reset(static_cast<char*>(std::malloc(bytes)));
    if (!c.data) throw std::bad_alloc();
    AdviseHugePages(c.data.get(), bytes);
  }
  t_->columns_.push_back(std::move(c));
  Column& added = t_->columns_.back();
  return added.stored ? &added : nullptr;
}

Column* ColumnRowWriter::Mismatch() {
  t_->mismatched_ = true;
  field_ = count_;  // the row's remaining fields are dropped too
  return nullptr;
}

void ColumnTable::Grow() {
  capacity_ *= 2;
  for (Column& c : columns_) {
    if (!c.stored) continue;
    void* grown = std::realloc(c.data.get(), capacity_ * c.width);
    if (!grown) throw std::bad_alloc();
    c.data.release();
    c.data.reset(static_cast<char*>(grown));
    AdviseHugePages(grown, capacity_ * c.width);
  }
}

void ColumnTable::End(ColumnRowWriter& w) {
  if (!wanted_) return;
  if (!w.columns_) {
    capacity_ = FirstCapacity();
    for (size_t i = 0; i < columns_.size(); i++) {
      if (columns_[i].name == "op" && columns_[i].kind == Column::Kind::kText) op_col_ = i + 1;
      if (columns_[i].name == "ts_ns" && columns_[i].width == 8) ts_col_ = i + 1;
      if (columns_[i].name == "file_id") file_col_ = i + 1;
      const bool number = columns_[i].kind == Column::Kind::kUnsigned;
      if (columns_[i].name == "tgid" && number) tgid_col_ = i + 1;
      if (columns_[i].name == "tid" && number) tid_col_ = i + 1;
    }
  }
  if (w.field_ != w.count_ && w.columns_) mismatched_ = true;
  if (!mismatched_ && Keep(rows_)) rows_++;
}

namespace {

// Whether the unsigned value of column `c` at `row` is one of `wanted`.
bool UnsignedIn(const Column& c, size_t row, const std::vector<uint64_t>& wanted) {
  uint64_t v = 0;
  const char* at = c.data.get() + row * c.width;
  switch (c.width) {
    case 1: v = static_cast<uint8_t>(*at); break;
    case 2: { uint16_t x; std::memcpy(&x, at, 2); v = x; break; }
    case 4: { uint32_t x; std::memcpy(&x, at, 4); v = x; break; }
    case 8: std::memcpy(&v, at, 8); break;
    default: return false;
  }
  return std::find(wanted.begin(), wanted.end(), v) != wanted.end();
}

}  // namespace

// Whether row `row` (written, not yet counted) passes the query's filters.
bool ColumnTable::Keep(size_t row) {
  const ColumnQuery& q = *query_;
  if (tgid_col_ && !q.tgids.empty() && !UnsignedIn(columns_[tgid_col_ - 1], row, q.tgids))
    return false;
  if (tid_col_ && !q.tids.empty() && !UnsignedIn(columns_[tid_col_ - 1], row, q.tids))
    return false;
  if (ts_col_ && (q.ts_from != 0 || q.ts_to != UINT64_MAX)) {
    const Column& c = columns_[ts_col_ - 1];
    uint64_t ts;
    std::memcpy(&ts, c.data.get() + row * sizeof ts, sizeof ts);
    if (ts < q.ts_from || ts >= q.ts_to) return false;
  }
  if (op_col_ && !q.ops.empty()) {
    const Column& c = columns_[op_col_ - 1];
    uint32_t code;
    std::memcpy(&code, c.data.get() + row * sizeof code, sizeof code);
    if (code >= op_passes_.size()) op_passes_.resize(code + 1, -1);
    if (op_passes_[code] < 0) {
      op_passes_[code] = std::find(q.ops.begin(), q.ops.end(), c.dictionary[code]) != q.ops.end();
    }
    if (!op_passes_[code]) return false;
  }
  if (file_col_ && !q.path_glob.empty() && q.file_matches) {
    const Column& c = columns_[file_col_ - 1];
    int64_t id;
    std::memcpy(&id, c.data.get() + row * sizeof id, sizeof id);
    if (id < 0 || !q.file_matches(static_cast<uint32_t>(id))) return false;
  }
  return true;
}

}  // namespace iotwin::interop
