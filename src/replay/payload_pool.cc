#include "replay/payload_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace iotwin::replay {

namespace {
constexpr size_t kPage = 4096;
}  // namespace

Result<std::shared_ptr<const PayloadPool>> PayloadPool::Create(const FillSpec* fill) {
  std::shared_ptr<PayloadPool> pool(new PayloadPool());
  pool->fd_ = memfd_create("iotwin-replay-payload", MFD_CLOEXEC);
  if (pool->fd_ < 0) return Status::FromErrno(errno, "memfd_create for the replay buffers");
  if (ftruncate(pool->fd_, static_cast<off_t>(kPayloadPoolBytes)) != 0) {
    return Status::FromErrno(errno, "sizing the replay buffers");
  }
  if (fill) {
    void* p = mmap(nullptr, kPayloadPoolBytes, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd_, 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mapping the replay buffers");
    FillPattern(p, kPayloadPoolBytes, *fill, 7);
    munmap(p, kPayloadPoolBytes);
  }
  return std::shared_ptr<const PayloadPool>(std::move(pool));
}

PayloadPool::~PayloadPool() {
  if (fd_ >= 0) close(fd_);
}

AlignedBuffer PayloadPool::View(uint64_t size, uint32_t stagger) const {
  size = std::clamp<uint64_t>(size, kPage, kMaxIoBytes);
  size = (size + kPage - 1) / kPage * kPage;
  const off_t start =
      static_cast<off_t>((uint64_t{stagger} * 37 % (kPayloadStaggerBytes / kPage)) * kPage);
  const size_t span = static_cast<size_t>(std::min<uint64_t>(size, kPayloadSpanBytes));
  const size_t slots = static_cast<size_t>((size + span - 1) / span);
  const size_t total = slots * span;
  void* va = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) return {};
  AlignedBuffer b(static_cast<uint8_t*>(va), total, span);
  for (size_t k = 0; k < slots; k++) {
    void* p = mmap(b.data() + k * span, span, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   fd_, start);
    if (p == MAP_FAILED) return {};
  }
  return b;
}

Result<PayloadPools> PayloadPools::Create(const FillSpec& fill) {
  PayloadPools p;
  IOTWIN_ASSIGN_OR_RETURN(p.read, PayloadPool::Create(nullptr));
  IOTWIN_ASSIGN_OR_RETURN(p.write, PayloadPool::Create(&fill));
  return p;
}

}  // namespace iotwin::replay
