#include "replay/block_replay.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "base/checked_math.h"
#include "base/fd.h"
#include "replay/fill.h"
#include "replay/histogram.h"
#include "replay/interrupt.h"
#include "replay/pacer.h"
#include "replay/recorder.h"
#include "replay/stats.h"

namespace iotwin::replay {

namespace {

enum class BlockOp { kRead, kWrite, kFlush, kDiscard, kWriteZeroes };

BlockOp Classify(const model::BlockRequest& r) {
  if (r.flags & IOT_BLKF_DISCARD || r.flags & IOT_BLKF_SECURE_ERASE) return BlockOp::kDiscard;
  if (r.flags & IOT_BLKF_WRITE_ZEROES) return BlockOp::kWriteZeroes;
  if (r.flags & IOT_BLKF_WRITE) return r.bytes ? BlockOp::kWrite : BlockOp::kFlush;
  if (r.flags & IOT_BLKF_READ) return BlockOp::kRead;
  return BlockOp::kFlush;  // a bare flush request
}

const char* BlockOpName(BlockOp op) {
  switch (op) {
    case BlockOp::kRead: return "block_read";
    case BlockOp::kWrite: return "block_write";
    case BlockOp::kFlush: return "block_flush";
    case BlockOp::kDiscard: return "block_discard";
    case BlockOp::kWriteZeroes: return "block_write_zeroes";
  }
  return "?";
}

std::set<dev_t> DeviceAndPartitions(dev_t dev) {
  std::set<dev_t> out{dev};
  std::string dir = fmt::format("/sys/dev/block/{}:{}", major(dev), minor(dev));
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::ifstream f(dir + "/" + name + "/dev");
    unsigned maj, min;
    char colon;
    if (f >> maj >> colon >> min) out.insert(makedev(maj, min));
  }
  closedir(d);
  return out;
}

// Live instant `recorded_ns` of trace time after `base`, at `speed`; saturated, so that a trace
// whose times span more than the clock can hold waits "forever" instead of wrapping to now.
// What the replay measured, per op name.
struct BlockTally {
  std::map<std::string, Histogram> lat;
  std::map<std::string, uint64_t> count, errors, bytes;
  Histogram sched;  // issue - target, paced modes only
  // Why requests are late: `held` is the part of a request's lateness spent waiting, past its due
  // time, for the recorded queue depth (for completions: the device's doing); `free_sched` the
  // schedule error of the requests that were not held (waking, batching, submitting: the
  // replayer's and the CPU's doing); `submit` the time one io_uring_enter took.
  Histogram held, free_sched, submit;
  uint64_t mismatches = 0;
  uint64_t deeper = 0;  // requests issued with more in flight than recorded (original pacing)
};

}  // namespace

const char* BlockRefusalName(BlockRefusal r) {
  switch (r) {
    case BlockRefusal::kNone: return "none";
    case BlockRefusal::kRangeOverflow: return "range_overflow";
    case BlockRefusal::kOutsideDevice: return "outside_device";
    case BlockRefusal::kTooLarge: return "too_large";
    case BlockRefusal::kCount: break;
  }
  return "?";
}

uint64_t BlockLayout::refused_total() const {
  uint64_t n = 0;
  for (uint64_t c : refused) n += c;
  return n;
}

Result<BlockLayout> PlaceBlockRequests(const std::vector<const model::BlockRequest*>& reqs,
                                       uint64_t dev_size, uint64_t device_offset, bool wrap) {
  if (device_offset >= dev_size) {
    return Status::Invalid("--device-offset {} is beyond the end of the device ({} bytes)",
                           device_offset, dev_size);
  }
  const uint64_t room = dev_size - device_offset;
  BlockLayout layout;
  layout.placements.resize(reqs.size());
  auto refuse = [&](BlockLayout::Placement& p, BlockRefusal why) {
    p = {};
    p.refused = why;
    layout.refused[static_cast<size_t>(why)]++;
  };
  // First the recorded ranges, relative to the offset: their extent decides whether to fold.
  for (size_t i = 0; i < reqs.size(); i++) {
    const model::BlockRequest& r = *reqs[i];
    BlockLayout::Placement& p = layout.placements[i];
    const BlockOp op = Classify(r);
    if (op == BlockOp::kFlush) continue;  // no range: its recorded sector means nothing
    std::optional<uint64_t> start = CheckedMul(r.sector, kSectorBytes);
    std::optional<uint64_t> end = start ? CheckedAdd(*start, r.bytes) : std::nullopt;
    if (!end) {
      refuse(p, BlockRefusal::kRangeOverflow);
      continue;
    }
    const bool buffered = op == BlockOp::kRead || op == BlockOp::kWrite;
    if (buffered && r.bytes > kMaxBlockTransferBytes) {
      refuse(p, BlockRefusal::kTooLarge);
      continue;
    }
    if (r.bytes > room) {  // does not fit even folded
      refuse(p, BlockRefusal::kOutsideDevice);
      continue;
    }
    p.offset = *start;
    p.bytes = r.bytes;
    layout.extent = std::max(layout.extent, *end);
    if (buffered) layout.max_transfer = std::max<uint64_t>(layout.max_transfer, r.bytes);
  }
  if (layout.extent > room && !wrap) {
    return Status::Invalid("the recorded requests reach byte {} but the device has {} bytes after "
                           "--device-offset {}: use a larger device or --wrap",
                           layout.extent, room, device_offset);
  }
  layout.wrapped = layout.extent > room;
  // Then the absolute places, each checked to lie inside [device_offset, dev_size).
  for (size_t i = 0; i < reqs.size(); i++) {
    BlockLayout::Placement& p = layout.placements[i];
    if (p.refused != BlockRefusal::kNone) continue;
    uint64_t off = p.offset;
    if (layout.wrapped) {
      const uint64_t last_start = room - p.bytes;  // p.bytes <= room
      if (last_start < UINT64_MAX) off = off % (last_start + 1) / kSectorBytes * kSectorBytes;
    }
    std::optional<uint64_t> at = CheckedAdd(device_offset, off);
    std::optional<uint64_t> end = at ? CheckedAdd(*at, p.bytes) : std::nullopt;
    if (!end || *end > dev_size) {
      refuse(p, BlockRefusal::kOutsideDevice);
      continue;
    }
    p.offset = *at;
  }
  return layout;
}

namespace {

// The most requests original pacing keeps in flight (at least; twice the recorded depth if more):
// enough that a device stalling for milliseconds at tens of thousands of requests per second
// does not hold back the requests due meanwhile, bounded so a stalled device cannot take
// unbounded memory.
constexpr uint32_t kOpenLoopInflight = 256;

// Requests due within this of the first one prepared leave with it in one io_uring_enter:
// one submission costs a few microseconds, so a burst submitted one by one would spread out by
// more than this (and the device would see a shallower queue than recorded).
constexpr uint64_t kBatchWindowNs = 5'000;
// The longest sleep before a request's due time: a stop (SIGINT, SIGTERM, SIGHUP) is honoured
// within it, as the file-level replay's pacing waits are.
constexpr uint64_t kStopSliceNs = 100'000'000;

// One line naming how many requests were refused, why, and the first of them.
std::string RefusalWarning(const std::vector<const model::BlockRequest*>& reqs,
                           const BlockLayout& layout, const ReplayOptions& o, uint64_t dev_size) {
  std::string first;
  for (size_t i = 0; i < reqs.size() && first.empty(); i++) {
    const BlockLayout::Placement& p = layout.placements[i];
    if (p.refused == BlockRefusal::kNone) continue;
    first = fmt::format("request {} (sector {}, {} bytes): {}", i, reqs[i]->sector,
                        reqs[i]->bytes, BlockRefusalName(p.refused));
  }
  return fmt::format(
      "{} recorded requests were not issued: their range overflows 64 bits, falls outside "
      "[--device-offset {}, {}) of {} or is larger than {} bytes; first: {}",
      layout.refused_total(), o.device_offset, dev_size, o.device, kMaxBlockTransferBytes, first);
}

BlockReplayOutcome Summarize(const BlockTally& t, const BlockLayout& layout,
                             const ReplayOptions& o, size_t requests, uint32_t max_qd,
                             const std::vector<std::string>& warnings, double secs) {
  BlockReplayOutcome out;
  uint64_t total = 0, total_bytes = 0;
  nlohmann::json per_op = nlohmann::json::object();
  std::string lines;
  for (const auto& [name, h] : t.lat) {
    const uint64_t count = t.count.at(name);
    const uint64_t errors = t.errors.count(name) ? t.errors.at(name) : 0;
    const uint64_t bytes = t.bytes.count(name) ? t.bytes.at(name) : 0;
    total += count;
    total_bytes += bytes;
    per_op[name] = {{"count", count}, {"errors", errors}, {"bytes", bytes},
                    {"latency_ns", {{"p50", h.Quantile(0.5)}, {"p99", h.Quantile(0.99)},
                                    {"max", h.max()}, {"mean", h.mean()}}}};
    lines += fmt::format("    {:<20} {:>8}  p50 {:.1f} us  p99 {:.1f} us  errors {}\n", name,
                         count, h.Quantile(0.5) / 1e3, h.Quantile(0.99) / 1e3, errors);
  }
  out.summary = {{"layer", "block"}, {"device", o.device}, {"device_offset", o.device_offset},
                 {"pace", PaceName(o.pace)}, {"speed", o.speed}, {"requests", requests},
                 {"ops", total}, {"bytes", total_bytes}, {"duration_s", secs},
                 {"iops", PerSecond(total, secs)}, {"max_queue_depth", max_qd},
                 {"deeper_than_recorded", t.deeper},
                 {"per_op", per_op}, {"mismatches", {{"total", t.mismatches}}},
                 {"warnings", warnings}};
  nlohmann::json refused = {{"total", layout.refused_total()}};
  for (size_t k = 1; k < layout.refused.size(); k++) {
    refused[BlockRefusalName(static_cast<BlockRefusal>(k))] = layout.refused[k];
  }
  out.summary["refused"] = refused;
  const Histogram& sched = t.sched;
  if (o.pace != PaceMode::kFast) {
    auto quantiles = [](const Histogram& h) {
      return nlohmann::json{{"count", h.count()}, {"p50", h.Quantile(0.5)},
                            {"p99", h.Quantile(0.99)}, {"max", h.max()}};
    };
    out.summary["schedule_error_ns"] = quantiles(sched);
    // Where the lateness came from (BlockTally): waiting for completions, or the rest.
    out.summary["schedule_error_ns"]["held_by_queue_depth"] = quantiles(t.held);
    out.summary["schedule_error_ns"]["not_held"] = quantiles(t.free_sched);
    out.summary["submit_ns"] = quantiles(t.submit);
  }
  out.text = fmt::format("replayed {} block requests onto {} ({} pacing) in {:.3f} s: {:.0f} IOPS, "
                         "{} bytes, {} result mismatches\n",
                         requests - layout.refused_total(), o.device, PaceName(o.pace), secs,
                         PerSecond(total, secs), total_bytes, t.mismatches) +
             lines;
  for (const std::string& w : warnings) out.text += "  warning: " + w + "\n";
  if (o.pace != PaceMode::kFast) {
    out.text += fmt::format(
        "  schedule   issue - target: p50 {:.1f} us, p99 {:.1f} us, max {:.1f} us\n",
        sched.Quantile(0.5) / 1e3, sched.Quantile(0.99) / 1e3, sched.max() / 1e3);
    out.text += fmt::format(
        "             {} requests held past their due time for the recorded queue depth (p99 "
        "{:.1f} us held); the others p50 {:.1f} us, p99 {:.1f} us\n",
        t.held.count(), t.held.Quantile(0.99) / 1e3, t.free_sched.Quantile(0.5) / 1e3,
        t.free_sched.Quantile(0.99) / 1e3);
  }
  if (o.strict && t.mismatches) out.exit_code = 1;
  return out;
}

}  // namespace

Result<bool> DeviceIsMounted(dev_t dev) {
  std::set<dev_t> devs = DeviceAndPartitions(dev);
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::Io("cannot read /proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, majmin;
    ls >> id >> parent >> majmin;
    unsigned maj, min;
    if (sscanf(majmin.c_str(), "%u:%u", &maj, &min) == 2 && devs.count(makedev(maj, min))) {
      return true;
    }
  }
  // Swap, device-mapper or md users show up as holders.
  std::string holders = fmt::format("/sys/dev/block/{}:{}/holders", major(dev), minor(dev));
  if (DIR* d = opendir(holders.c_str())) {
    bool any = false;
    while (dirent* e = readdir(d)) any |= e->d_name[0] != '.';
    closedir(d);
    if (any) return true;
  }
  return false;
}

namespace {

// The target must be named, allowed, a block device, and neither mounted nor held.
Status CheckTargetDevice(const ReplayOptions& o) {
  if (o.device.empty()) return Status::Invalid("--layer block needs --device /dev/X");
  if (!o.allow_device) {
    return Status::Permission("replaying onto {} overwrites it: add --allow-device to confirm",
                              o.device);
  }
  struct stat st;
  if (stat(o.device.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + o.device);
  if (!S_ISBLK(st.st_mode)) return Status::Invalid("{} is not a block device", o.device);
  IOTWIN_ASSIGN_OR_RETURN(bool mounted, DeviceIsMounted(st.st_rdev));
  if (mounted) {
    return Status::Permission("{} (or a partition of it) is mounted or in use: refusing to "
                              "replay onto it", o.device);
  }
  return Status::Ok();
}

// The requests of the recorded device with the most of them: the one replayed.
std::vector<const model::BlockRequest*> BusiestDeviceRequests(const model::TraceModel& m,
                                                              std::vector<std::string>* warnings) {
  std::map<uint32_t, uint64_t> per_dev;
  for (const auto& r : m.block_requests()) per_dev[r.dev]++;
  uint32_t src_dev = 0;
  uint64_t best = 0;
  for (auto& [d, n] : per_dev) {
    if (n > best) {
      best = n;
      src_dev = d;
    }
  }
  std::vector<const model::BlockRequest*> reqs;
  for (const auto& r : m.block_requests()) {
    if (r.dev == src_dev) reqs.push_back(&r);
  }
  if (!reqs.empty() && per_dev.size() > 1) {
    warnings->push_back(fmt::format("the trace covers {} devices; replaying the busiest ({}:{}, "
                                    "{} requests)", per_dev.size(), src_dev >> 20,
                                    src_dev & 0xfffff, best));
  }
  return reqs;
}

// How late this machine's timer sleeps wake the replaying thread: on a virtual machine the
// wake-up alone takes tens of microseconds, longer than a fixed spin, and a request whose
// sleep overruns its spin leaves late. SpinNs(): the 95th percentile of the last 128
// wake-ups plus a margin, at most 1 ms (0 until 128 were seen).
class WakeLateness {
 public:
  void Note(uint64_t late_ns);
  uint64_t SpinNs() const { return spin_ns_; }
  const Histogram& all() const { return all_; }

 private:
  static constexpr uint64_t kSpinMarginNs = 5'000;
  static constexpr uint64_t kMaxLearnedSpinNs = 1'000'000;
  std::array<uint64_t, 128> recent_{};
  size_t next_ = 0;
  uint64_t spin_ns_ = 0;
  Histogram all_;
};

// Issues placed requests onto the opened device through one io_uring, at their due times and
// recorded queue depths, and tallies what they did.
class BlockReplayer {
 public:
  BlockReplayer(const std::vector<const model::BlockRequest*>& reqs, const BlockLayout& layout,
                const ReplayOptions& o, int fd, const std::atomic<bool>* stop)
      : reqs_(reqs), layout_(layout), o_(o), fd_(fd), stop_(stop), live_(reqs.size()) {}
  ~BlockReplayer() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }
  BlockReplayer(const BlockReplayer&) = delete;
  BlockReplayer& operator=(const BlockReplayer&) = delete;

  Status Init(uint32_t max_qd);
  // Replays every request that was placed, or those before a stop (a signal); returns the
  // seconds the replay took. Requests in flight at a stop complete first.
  double Run();
  const BlockTally& tally() const { return tally_; }
  const WakeLateness& wake() const { return wake_; }
  bool fixed_buffers() const { return fixed_buffers_; }
  // Why the ring failed ("" when it did not): the replay stopped there.
  const std::string& error() const { return error_; }

 private:
  struct Live {
    uint64_t submitted = 0;
    uint64_t held_late = 0;  // ns past its due time spent waiting for the recorded queue depth
    BlockOp op;
    int32_t recorded_error = 0;
  };

  uint64_t Due(const model::BlockRequest& r);
  // False when a stop came first.
  bool WaitForDue(uint64_t due);
  bool Stopped() const { return stop_->load(std::memory_order_relaxed) || !error_.empty(); }
  void NoteIssued(const model::BlockRequest& r, uint64_t due, uint64_t issued);
  void NoteSubmitted(uint64_t due, uint64_t submitted, uint64_t held_late);
  void IssueIoctl(size_t i, BlockOp op, uint64_t off, uint64_t due);
  void Submit(size_t i, BlockOp op, uint64_t off, uint64_t due);
  void Flush();
  int Reap(bool wait_one);

  const std::vector<const model::BlockRequest*>& reqs_;
  const BlockLayout& layout_;
  const ReplayOptions& o_;
  const int fd_;
  const std::atomic<bool>* stop_;  // set by the InterruptWatcher
  std::string error_;              // the ring failed: nothing more is issued
  io_uring ring_;
  bool ring_ready_ = false;
  bool fixed_buffers_ = false;  // rbuf_ and wbuf_ registered as buffers 0 and 1
  uint32_t open_loop_limit_ = 0;  // most requests in flight in original pacing
  AlignedBuffer rbuf_, wbuf_;
  std::vector<Live> live_;
  BlockTally tally_;
  WakeLateness wake_;
  unsigned inflight_ = 0;  // prepared or submitted, not yet reaped
  // Prepared and not yet submitted (index, due): requests due together leave in one
  // io_uring_enter, as a burst does from an application's io_submit.
  std::vector<std::pair<size_t, uint64_t>> pending_;
  // Pacing.
  uint64_t live_start_ = 0, trace_start_ = 0;
  uint64_t prev_rec_ = 0, prev_issue_ = 0;
  uint64_t carry_ = 0;
  uint64_t first_issue_ = 0;  // the replay's real start: a fast replay does not wait for live_start
};

Status BlockReplayer::Init(uint32_t max_qd) {
  // Original pacing issues each request at its time whatever is in flight, up to
  // kOpenLoopInflight (or twice the recorded depth): the ring has room for them all.
  open_loop_limit_ = std::max(kOpenLoopInflight, std::min(max_qd, 1u << 14) * 2);
  unsigned entries = 1;
  // The recorded depth comes from the trace: kept within io_uring's 32768 entries.
  const uint32_t need =
      o_.pace == PaceMode::kOriginal ? open_loop_limit_ : std::min(max_qd, 1u << 14) * 2;
  while (entries < std::max(need, 8u)) entries <<= 1;
  int rc = io_uring_queue_init(entries, &ring_, 0);
  if (rc < 0) {
    return Status::FromErrno(-rc, "io_uring_queue_init of " + std::to_string(entries) + " entries");
  }
  ring_ready_ = true;
  rbuf_ = AlignedBuffer(layout_.max_transfer);
  wbuf_ = AlignedBuffer(layout_.max_transfer);
  if (!rbuf_.data() || !wbuf_.data()) return Status::Io("cannot allocate the transfer buffers");
  FillPattern(wbuf_.data(), wbuf_.size(), o_.fill, 99);
  // Registered once, the buffers are not pinned and unpinned again by every request; where the
  // kernel refuses (memlock limit), plain reads and writes do the same work a little slower.
  iovec iov[2] = {{rbuf_.data(), rbuf_.size()}, {wbuf_.data(), wbuf_.size()}};
  fixed_buffers_ = io_uring_register_buffers(&ring_, iov, 2) == 0;
  return Status::Ok();
}

double BlockReplayer::Run() {
  live_start_ = NowNs() + 1'000'000;
  trace_start_ = reqs_.front()->ts;
  prev_rec_ = trace_start_;
  prev_issue_ = live_start_;
  for (size_t i = 0; i < reqs_.size() && !Stopped(); i++) {
    const auto& r = *reqs_[i];
    const BlockLayout::Placement& place = layout_.placements[i];
    if (place.refused != BlockRefusal::kNone) continue;
    // Queue depth as recorded: in gaps and fast pacing no more in flight than the device had
    // when this one was issued; in original pacing the request's time decides, and a device
    // slower than the recorded one finds a deeper queue (counted).
    const uint32_t recorded_depth = std::max<uint32_t>(r.inflight, 1);
    const uint32_t limit = o_.pace == PaceMode::kOriginal ? open_loop_limit_ : recorded_depth;
    uint64_t held_until = 0;
    while (inflight_ >= limit) {
      Flush();
      Reap(true);
      held_until = NowNs();
    }
    if (inflight_ >= recorded_depth) tally_.deeper++;
    const uint64_t due = Due(r);
    // What is prepared leaves now, unless this one is overdue too or due within the batching
    // window of the first prepared (so no request waits longer than the window for others).
    if (!pending_.empty() && due > NowNs() && due > pending_.front().second + kBatchWindowNs) {
      Flush();
    }
    if (!WaitForDue(due)) break;
    NoteIssued(r, due, NowNs());

    BlockOp op = Classify(r);
    Live& l = live_[i];
    l.op = op;
    l.recorded_error = r.error;
    l.held_late = held_until > due ? held_until - due : 0;
    if (op == BlockOp::kDiscard || op == BlockOp::kWriteZeroes) {
      Flush();
      IssueIoctl(i, op, place.offset, due);
    } else {
      Submit(i, op, place.offset, due);
    }
  }
  Flush();
  while (inflight_ > 0 && error_.empty()) Reap(true);
  uint64_t end = NowNs();
  return ElapsedSeconds(first_issue_ ? std::min(first_issue_, live_start_) : end, end);
}

uint64_t BlockReplayer::Due(const model::BlockRequest& r) {
  // Requests are in issue-time order (the model sorts them); the guards keep it so regardless.
  if (o_.pace == PaceMode::kOriginal) {
    return ScaledDue(live_start_, r.ts > trace_start_ ? r.ts - trace_start_ : 0, o_.speed);
  }
  if (o_.pace == PaceMode::kGaps) {
    uint64_t gap = ScaledDue(0, r.ts > prev_rec_ ? r.ts - prev_rec_ : 0, o_.speed);
    uint64_t absorbed = std::min(carry_, gap);
    carry_ -= absorbed;
    return SaturatingAdd(prev_issue_, gap - absorbed);
  }
  return NowNs();
}

// Sleeps until `spin` before the due time (reaping while requests are in flight, so latencies
// are measured when they happen), then spins. The spin is --spin-us; a real-time thread spins
// longer when this machine's sleeps overrun by more (WakeLateness), up to 4/5 of the time since
// the previous issue, so it still leaves the CPU between requests to the device's worker (a loop
// device's) and stays under the kernel's real-time throttling. A SCHED_OTHER thread keeps the
// fixed spin: spinning longer, it is preempted more by the fair scheduler and leaves the device's
// worker less CPU (docs/replay.md, "Device-level replay").
// Sleeps are at most kStopSliceNs, so that a stop is seen within that time.
bool BlockReplayer::WaitForDue(uint64_t due) {
  const uint64_t since_prev = due > prev_issue_ ? due - prev_issue_ : 0;
  const uint64_t learned = o_.rt_priority > 0 ? std::min(wake_.SpinNs(), since_prev / 5 * 4) : 0;
  const uint64_t spin = std::max(o_.spin_ns, learned);
  while (true) {
    Reap(false);
    if (Stopped()) return false;
    const uint64_t now = NowNs();
    if (now + spin >= due) break;
    const uint64_t wake = std::min(due - spin, now + kStopSliceNs);
    if (inflight_ > 0) {
      __kernel_timespec ts{0, static_cast<long long>(std::min<uint64_t>(wake - now, 1'000'000))};
      io_uring_cqe* cqe;
      io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
    } else {
      timespec ts{static_cast<time_t>(wake / 1'000'000'000ull),
                  static_cast<long>(wake % 1'000'000'000ull)};
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    }
    const uint64_t woke = NowNs();
    // A wait that ended past its end is a timer's wake-up (a completion ends it earlier).
    if (woke >= wake && wake == due - spin) wake_.Note(woke - wake);
  }
  WaitUntil(due, UINT64_MAX);  // spins the rest
  return true;
}

void WakeLateness::Note(uint64_t late_ns) {
  all_.Add(late_ns);
  recent_[next_++ % recent_.size()] = late_ns;
  if (next_ % 32 != 0 || next_ < recent_.size()) return;
  std::array<uint64_t, 128> sorted = recent_;
  auto at = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() * 95 / 100);
  std::nth_element(sorted.begin(), at, sorted.end());
  spin_ns_ = std::min(*at + kSpinMarginNs, kMaxLearnedSpinNs);
}

// Pacing state, when the request is handed to the ring (or the ioctl is made).
void BlockReplayer::NoteIssued(const model::BlockRequest& r, uint64_t due, uint64_t issued) {
  if (first_issue_ == 0) first_issue_ = issued;
  if (issued > due && o_.pace == PaceMode::kGaps) carry_ += issued - due;
  prev_rec_ = r.ts;
  prev_issue_ = issued;
}

// The schedule error, when the request reaches the kernel.
void BlockReplayer::NoteSubmitted(uint64_t due, uint64_t submitted, uint64_t held_late) {
  if (o_.pace == PaceMode::kFast) return;
  const uint64_t late = submitted > due ? submitted - due : 0;
  tally_.sched.Add(late);
  if (held_late > 0) {
    tally_.held.Add(held_late);
  } else {
    tally_.free_sched.Add(late);
  }
}

void BlockReplayer::Flush() {
  if (pending_.empty()) return;
  const uint64_t before = NowNs();
  int r;
  while ((r = io_uring_submit(&ring_)) == -EINTR) {
  }
  if (r < 0 && error_.empty()) {
    // Never submitted, so never completed: not waited for.
    error_ = fmt::format(
        "io_uring_submit of {} requests (the first: recorded request {}) failed: {}",
        pending_.size(), pending_.front().first, strerror(-r));
    inflight_ -= std::min<unsigned>(inflight_, static_cast<unsigned>(pending_.size()));
    pending_.clear();
    return;
  }
  const uint64_t now = NowNs();
  tally_.submit.Add(now - before);
  for (const auto& [i, due] : pending_) {
    live_[i].submitted = now;
    NoteSubmitted(due, now, live_[i].held_late);
  }
  pending_.clear();
}

// Synchronous ioctls: the block layer has no async discard interface for user space.
void BlockReplayer::IssueIoctl(size_t i, BlockOp op, uint64_t off, uint64_t due) {
  const model::BlockRequest& r = *reqs_[i];
  const uint64_t issued = NowNs();
  NoteSubmitted(due, issued, live_[i].held_late);
  uint64_t range[2] = {off, r.bytes};
  int res = ioctl(fd_, op == BlockOp::kDiscard ? BLKDISCARD : BLKZEROOUT, range);
  const char* name = BlockOpName(op);
  tally_.lat[name].Add(NowNs() - issued);
  tally_.count[name]++;
  if (res != 0) tally_.errors[name]++;
  if ((res != 0) != (r.error != 0)) tally_.mismatches++;
}

void BlockReplayer::Submit(size_t i, BlockOp op, uint64_t off, uint64_t due) {
  const auto& r = *reqs_[i];
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (!sqe) {  // not while fewer than the ring's entries are in flight
    Flush();
    if (!error_.empty()) return;
    Reap(true);
    sqe = io_uring_get_sqe(&ring_);
  }
  switch (op) {
    case BlockOp::kRead:
      if (fixed_buffers_) io_uring_prep_read_fixed(sqe, fd_, rbuf_.data(), r.bytes, off, 0);
      else io_uring_prep_read(sqe, fd_, rbuf_.data(), r.bytes, off);
      break;
    case BlockOp::kWrite:
      if (fixed_buffers_) io_uring_prep_write_fixed(sqe, fd_, wbuf_.data(), r.bytes, off, 1);
      else io_uring_prep_write(sqe, fd_, wbuf_.data(), r.bytes, off);
      if (r.flags & IOT_BLKF_FUA) sqe->rw_flags = RWF_DSYNC;
      break;
    default: io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC); break;
  }
  io_uring_sqe_set_data64(sqe, i);
  inflight_++;
  pending_.emplace_back(i, due);
}

// Collects completions: all that are ready, waiting for the first when `wait_one`.
int BlockReplayer::Reap(bool wait_one) {
  io_uring_cqe* cqe;
  int n = 0;
  while (true) {
    int r = (wait_one && n == 0) ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
    if (r == -EINTR) continue;
    if (r < 0 && r != -EAGAIN && wait_one && n == 0 && error_.empty()) {
      // A wait the ring refuses would be made again for ever by the callers.
      error_ = fmt::format("waiting for {} requests in flight failed: {}", inflight_, strerror(-r));
    }
    if (r < 0 || !cqe) break;
    size_t i = io_uring_cqe_get_data64(cqe);
    Live& l = live_[i];
    const char* name = BlockOpName(l.op);
    tally_.lat[name].Add(NowNs() - l.submitted);
    tally_.count[name]++;
    if (cqe->res < 0) tally_.errors[name]++;
    else if (l.op == BlockOp::kRead || l.op == BlockOp::kWrite) tally_.bytes[name] += cqe->res;
    bool live_err = cqe->res < 0, rec_err = l.recorded_error != 0;
    if (live_err != rec_err) tally_.mismatches++;
    io_uring_cqe_seen(&ring_, cqe);
    inflight_--;
    n++;
  }
  return n;
}

// The replaying thread's timing for the run: timer slack of 1 ns (the default 50 us would make
// every sleep until a due time up to 50 us late), and SCHED_FIFO with --rt-priority (not passed
// on to the --record tracer it forks). Restored when it goes out of scope.
class ReplayThreadTiming {
 public:
  ReplayThreadTiming() : slack_(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    pthread_getschedparam(pthread_self(), &policy_, &param_);
  }
  ~ReplayThreadTiming() {
    if (slack_ > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack_), 0, 0, 0);
    if (fifo_) pthread_setschedparam(pthread_self(), policy_, &param_);
  }
  ReplayThreadTiming(const ReplayThreadTiming&) = delete;
  ReplayThreadTiming& operator=(const ReplayThreadTiming&) = delete;

  Status RealTime(int priority) {
    if (priority <= 0) return Status::Ok();
    sched_param p{};
    p.sched_priority = priority;
    if (int err = pthread_setschedparam(pthread_self(), SCHED_FIFO | SCHED_RESET_ON_FORK, &p)) {
      return Status::Io("--rt-priority {}: cannot make the replaying thread SCHED_FIFO: {} (needs "
                        "root or CAP_SYS_NICE)", priority, strerror(err));
    }
    fifo_ = true;
    return Status::Ok();
  }
  // 1 when the replaying thread runs SCHED_FIFO (the syscall replay's "fifo_threads").
  int fifo_threads() const { return (sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO; }

 private:
  int slack_;
  int policy_ = SCHED_OTHER;
  sched_param param_{};
  bool fifo_ = false;
};

// --record: the replay's own block (and NVMe) layers, captured by `iotwin record --pid <self>`
// around the run; the replaying thread's calls (its io_uring submissions) are kept with them.
struct BlockRecording {
  std::string path;  // absolute
  std::unique_ptr<ReplayRecorder> recorder;
};

nlohmann::json RecordingMeta(const ReplayOptions& o, const BlockLayout& layout, uint32_t src_dev) {
  return {{"source", o.trace},
          {"layer", "block"},
          {"pace", PaceName(o.pace)},
          {"speed", o.speed},
          {"device", o.device},
          {"device_offset", o.device_offset},
          {"wrapped", layout.wrapped},
          {"source_dev", fmt::format("{}:{}", src_dev >> 20, src_dev & 0xfffff)}};
}

// Stops the tracer and writes the recording; a recording asked for and missing fails the replay.
void FinishRecording(BlockRecording& rec, const nlohmann::json& meta, BlockReplayOutcome* out) {
  const std::vector<pid_t> tids = {gettid()};
  Status st = rec.recorder->Finish(tids, meta);
  if (!st.ok()) {
    out->summary["record"] = {{"ok", false}, {"error", st.ToString()}};
    out->summary["warnings"].push_back("--record: " + st.ToString());
    out->text += "  --record failed: " + st.ToString() + "\n";
    out->exit_code = 1;
    return;
  }
  out->summary["record"] = {{"ok", true}, {"path", rec.path}};
  out->text += fmt::format("  recorded into {}\n", rec.path);
}

}  // namespace

Result<BlockReplayOutcome> RunBlockReplay(const model::TraceModel& m, const ReplayOptions& o) {
  if (o.dry_run || o.prepare_only) {
    // Both promise to write nothing; this replay has no plan to print and no files to prepare.
    return Status::Invalid("--dry-run and --prepare-only are for file-level replays, not --layer "
                           "block");
  }
  if (Status st = CheckTargetDevice(o); !st.ok()) return st;
  BlockRecording rec;
  if (!o.record_out.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(rec.path, ResolveRecordPath(o.record_out));
  }
  std::vector<std::string> warnings;
  std::vector<const model::BlockRequest*> reqs = BusiestDeviceRequests(m, &warnings);
  if (reqs.empty()) return Status::Invalid("the trace holds no issued block requests");

  UniqueFd fd(open(o.device.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC | O_EXCL));
  if (!fd.valid()) return Status::FromErrno(errno, "open " + o.device + " (O_DIRECT, O_EXCL)");
  uint64_t dev_size = 0;
  if (ioctl(fd.get(), BLKGETSIZE64, &dev_size) != 0) return Status::FromErrno(errno, "BLKGETSIZE64");
  if (o.device_offset >= dev_size) {
    return Status::Invalid("--device-offset {} is beyond the end of {} ({} bytes)",
                           o.device_offset, o.device, dev_size);
  }
  IOTWIN_ASSIGN_OR_RETURN(BlockLayout layout,
                          PlaceBlockRequests(reqs, dev_size, o.device_offset, o.wrap));
  uint32_t max_qd = 1;
  for (const auto* r : reqs) max_qd = std::max(max_qd, r->inflight);
  if (layout.refused_total() > 0) warnings.push_back(RefusalWarning(reqs, layout, o, dev_size));

  // A signal stops the replay at its next request (or within a sleep's slice): the summary,
  // --json and --record are written for what ran. Before the recorder starts, which unblocks the
  // signals in its child.
  std::atomic<bool> stop{false};
  std::atomic<const char*> stopped_by{nullptr};
  InterruptWatcher interrupts([&](const char* why) {
    stopped_by.store(why);
    stop.store(true);
  });
  BlockReplayer replayer(reqs, layout, o, fd.get(), &stop);
  if (Status st = replayer.Init(max_qd); !st.ok()) return st;
  if (!rec.path.empty()) {
    // The memory layer has nothing to say about O_DIRECT requests on a raw device.
    rec.recorder = MakeSubprocessRecorder(o.iotwin_bin, rec.path, {"--no-memory"});
    if (Status st = rec.recorder->Start(); !st.ok()) return st.WithContext("--record");
  }
  ReplayThreadTiming timing;
  if (Status st = timing.RealTime(o.rt_priority); !st.ok()) return st;
  const int fifo_threads = timing.fifo_threads();
  const double secs = replayer.Run();
  BlockReplayOutcome out = Summarize(replayer.tally(), layout, o, reqs.size(), max_qd, warnings, secs);
  out.summary["rt_priority"] = o.rt_priority;
  out.summary["registered_buffers"] = replayer.fixed_buffers();
  if (o.pace != PaceMode::kFast) {
    const Histogram& w = replayer.wake().all();
    out.summary["wake_late_ns"] = {{"count", w.count()}, {"p50", w.Quantile(0.5)},
                                   {"p99", w.Quantile(0.99)}, {"max", w.max()}};
    out.summary["learned_spin_ns"] = o.rt_priority > 0 ? replayer.wake().SpinNs() : 0;
  }
  out.summary["fifo_threads"] = fifo_threads;
  if (rec.recorder) FinishRecording(rec, RecordingMeta(o, layout, reqs.front()->dev), &out);
  if (const char* why = stopped_by.load()) {
    out.summary["aborted"] = why;
    out.text += fmt::format("  stopped: {}\n", why);
    out.exit_code = 1;
  } else if (!replayer.error().empty()) {
    out.summary["aborted"] = "failed: " + replayer.error();
    out.text += fmt::format("  stopped: failed: {}\n", replayer.error());
    out.exit_code = 1;
  }
  return out;
}

}  // namespace iotwin::replay
