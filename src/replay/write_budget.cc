#include "replay/write_budget.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "base/checked_math.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/op_fields.h"
#include "replay/fill.h"

namespace iotwin::replay {

using model::Op;
using model::OpKind;

namespace {
constexpr uint64_t kLookEveryNs = 100'000'000;

uint64_t CoarseNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

uint64_t IssuedWriteLength(const Op& op, uint64_t length) {
  length = std::min(length, kMaxIoBytes);
  const bool known = !op.interrupted && op.end != UINT64_MAX && op.result >= 0;
  return known ? std::min(length, static_cast<uint64_t>(op.result)) : length;
}

PlannedWrite PlanWrite(const model::TraceModel& m, const Op& op) {
  PlannedWrite w;
  if (op.kind == OpKind::kAsyncSubmit) {
    // The back end runs every engine but libaio as io_uring (worker.cc RequestKind).
    const uint8_t engine = op.aio.engine == IOT_AIO_ENGINE_LIBAIO ? IOT_AIO_ENGINE_LIBAIO
                                                                  : IOT_AIO_ENGINE_URING;
    const AsyncOpInfo i = AsyncOp(engine, op.aio.opcode);
    if (i.kind != iotwin::AsyncKind::kWrite) return w;
    w.bytes = IssuedWriteLength(op, op.aio.length);
    w.file = op.file;
    w.end = SaturatingAdd(op.aio.offset, w.bytes);
    return w;
  }
  if (op.kind != OpKind::kSyscall) return w;
  const iot_syscall& sc = op.sc;
  if (OpIsWrite(sc.op)) {
    uint64_t len = sc.length;
    if (op.extra_count) {
      len = 0;
      for (uint32_t k = 0; k < op.extra_count; k++) len = SaturatingAdd(len, m.ExtraBegin(op)[k]);
    }
    w.bytes = IssuedWriteLength(op, len);
    w.file = op.file;
    w.end = SaturatingAdd(op.pos, w.bytes);
  } else if (sc.op == IOT_OP_COPY_FILE_RANGE || sc.op == IOT_OP_SENDFILE) {
    w.bytes = IssuedWriteLength(op, sc.length);  // into the second descriptor's file
  } else if (sc.op == IOT_OP_FALLOCATE &&
             (model::FallocateMode(sc) & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE)) == 0) {
    w.bytes = sc.length;
    w.file = op.file;
    w.end = SaturatingAdd(sc.offset, sc.length);
  }
  return w;
}

WriteBudget::WriteBudget(uint64_t max_bytes, std::vector<std::string> dirs)
    : max_bytes_(max_bytes), dirs_(std::move(dirs)) {
  for (const auto& dir : dirs_) fds_.push_back(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

WriteBudget::~WriteBudget() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

bool WriteBudget::Admit(uint64_t bytes) {
  if (stopped_.load(std::memory_order_acquire)) return false;
  const uint64_t total = SaturatingAdd(admitted_.fetch_add(bytes, std::memory_order_relaxed), bytes);
  if (max_bytes_ && total > max_bytes_) {
    Stop(fmt::format("--max-write {}: the replay's writes reached {} bytes, and the next call "
                     "writes {} more", max_bytes_, total - bytes, bytes));
    return false;
  }
  if (dirs_.empty()) return true;
  const uint64_t now = CoarseNowNs();
  auto due = [&] {
    return total >= next_look_.load(std::memory_order_relaxed) ||
           now >= next_look_ns_.load(std::memory_order_relaxed);
  };
  if (!due()) return true;
  MutexLock l(&mu_);
  if (!due()) return true;
  next_look_ns_.store(now + kLookEveryNs, std::memory_order_relaxed);
  return Look(total, bytes);
}

bool WriteBudget::Look(uint64_t total, uint64_t bytes) {
  uint64_t headroom = UINT64_MAX;
  for (size_t i = 0; i < dirs_.size(); i++) {
    const std::string& dir = dirs_[i];
    struct statvfs v;
    if (fds_[i] < 0 || fstatvfs(fds_[i], &v) != 0) continue;
    const uint64_t avail = SaturatingMul(v.f_bavail, v.f_frsize);
    const uint64_t reserve = std::max<uint64_t>(uint64_t{1} << 20, SaturatingMul(v.f_blocks, v.f_frsize) / 100);
    if (avail < SaturatingAdd(reserve, bytes)) {
      why_ = fmt::format("the file system of {} has {} bytes free for this replay (root's reserve "
                         "excluded); the next call writes up to {}, which would leave less than "
                         "its reserve of {} bytes ({} bytes written so far)",
                         dir, avail, bytes, reserve, total - bytes);
      stopped_.store(true, std::memory_order_release);
      return false;
    }
    headroom = std::min(headroom, avail - reserve - bytes);
  }
  next_look_.store(SaturatingAdd(total, std::max<uint64_t>(headroom / 2, 1)),
                   std::memory_order_relaxed);
  return true;
}

void WriteBudget::Stop(std::string why) {
  MutexLock l(&mu_);
  if (why_.empty()) why_ = std::move(why);
  stopped_.store(true, std::memory_order_release);
}

std::string WriteBudget::why() const {
  MutexLock l(&mu_);
  return why_;
}

}  // namespace iotwin::replay
