#include "interop/table_rows.h"

namespace iotwin::interop::table_export {

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

}  // namespace iotwin::interop::table_export
