// PayloadPool: the memory behind every replay worker's I/O buffers. A replay never needs the
// payload (traces hold none), so all workers of all copies map the same pages: a worker's buffer
// is a view of one memfd, mapped again and again past the pool's span. Memory stays at the
// pool's size (kPayloadPoolBytes for reads, the same for writes) whatever the thread count and
// whatever length a call claims; only address space grows with them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "replay/fill.h"
#include "replay/options.h"

namespace iotwin::replay {

// The span a view repeats, and the extra span views start in (staggered by thread, so that the
// threads' writes do not all begin with the same bytes).
inline constexpr size_t kPayloadSpanBytes = size_t{64} << 20;
inline constexpr size_t kPayloadStaggerBytes = size_t{1} << 20;
inline constexpr size_t kPayloadPoolBytes = kPayloadSpanBytes + kPayloadStaggerBytes;

class PayloadPool {
 public:
  // A pool filled with `fill` (writes), or left to the kernel's zero pages (reads: nullptr).
  static Result<std::shared_ptr<const PayloadPool>> Create(const FillSpec* fill);
  ~PayloadPool();
  PayloadPool(const PayloadPool&) = delete;
  PayloadPool& operator=(const PayloadPool&) = delete;

  // A buffer of `size` bytes (at least a page, at most kMaxIoBytes, rounded up to pages) over
  // the pool's pages, starting at a page chosen by `stagger`. Empty on failure.
  AlignedBuffer View(uint64_t size, uint32_t stagger) const;

 private:
  PayloadPool() = default;
  int fd_ = -1;
};

// The read and write pools a replay shares among its engines.
struct PayloadPools {
  std::shared_ptr<const PayloadPool> read, write;
  static Result<PayloadPools> Create(const FillSpec& fill);
};

}  // namespace iotwin::replay
