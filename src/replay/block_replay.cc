#include "replay/block_replay.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <liburing.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/checked_math.h"
#include "base/fd.h"
#include "replay/fill.h"
#include "replay/histogram.h"
#include "replay/pacer.h"
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
  uint64_t mismatches = 0;
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
                 {"per_op", per_op}, {"mismatches", {{"total", t.mismatches}}},
                 {"warnings", warnings}};
  nlohmann::json refused = {{"total", layout.refused_total()}};
  for (size_t k = 1; k < layout.refused.size(); k++) {
    refused[BlockRefusalName(static_cast<BlockRefusal>(k))] = layout.refused[k];
  }
  out.summary["refused"] = refused;
  const Histogram& sched = t.sched;
  if (o.pace != PaceMode::kFast) {
    out.summary["schedule_error_ns"] = {{"count", sched.count()}, {"p50", sched.Quantile(0.5)},
                                        {"p99", sched.Quantile(0.99)}, {"max", sched.max()}};
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

Result<BlockReplayOutcome> RunBlockReplay(const model::TraceModel& m, const ReplayOptions& o) {
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

  // The recorded device with the most requests is the one replayed.
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
  if (reqs.empty()) return Status::Invalid("the trace holds no issued block requests");
  std::vector<std::string> warnings;
  if (per_dev.size() > 1) {
    warnings.push_back(fmt::format("the trace covers {} devices; replaying the busiest ({}:{}, "
                                   "{} requests)", per_dev.size(), src_dev >> 20,
                                   src_dev & 0xfffff, best));
  }

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
  const uint64_t max_bytes = layout.max_transfer;

  unsigned entries = 1;
  while (entries < std::max(max_qd * 2, 8u)) entries <<= 1;
  io_uring ring;
  int rc = io_uring_queue_init(entries, &ring, 0);
  if (rc < 0) return Status::FromErrno(-rc, "io_uring_queue_init");
  AlignedBuffer rbuf(max_bytes), wbuf(max_bytes);
  FillPattern(wbuf.data(), wbuf.size(), o.fill, 99);

  struct Live {
    uint64_t submitted = 0;
    BlockOp op;
    int32_t recorded_error = 0;
    uint64_t range[2] = {0, 0};
  };
  std::vector<Live> live(reqs.size());
  BlockTally tally;
  // Named references, not a structured binding: lambdas below capture them (clang before 16
  // cannot capture structured bindings).
  auto& lat = tally.lat;
  auto& count = tally.count;
  auto& errors = tally.errors;
  auto& bytes = tally.bytes;
  auto& sched = tally.sched;
  auto& mismatches = tally.mismatches;
  unsigned inflight = 0;

  auto reap = [&](bool wait_one) {
    io_uring_cqe* cqe;
    int n = 0;
    while (true) {
      int r = (wait_one && n == 0) ? io_uring_wait_cqe(&ring, &cqe) : io_uring_peek_cqe(&ring, &cqe);
      if (r == -EINTR) continue;
      if (r < 0 || !cqe) break;
      size_t i = io_uring_cqe_get_data64(cqe);
      Live& l = live[i];
      const char* name = BlockOpName(l.op);
      lat[name].Add(NowNs() - l.submitted);
      count[name]++;
      if (cqe->res < 0) errors[name]++;
      else if (l.op == BlockOp::kRead || l.op == BlockOp::kWrite) bytes[name] += cqe->res;
      bool live_err = cqe->res < 0, rec_err = l.recorded_error != 0;
      if (live_err != rec_err) mismatches++;
      io_uring_cqe_seen(&ring, cqe);
      inflight--;
      n++;
    }
    return n;
  };

  uint64_t live_start = NowNs() + 1'000'000;
  uint64_t trace_start = reqs.front()->ts;
  uint64_t prev_rec = trace_start, prev_issue = live_start;
  uint64_t carry = 0;
  uint64_t first_issue = 0;  // the replay's real start: a fast replay does not wait for live_start
  for (size_t i = 0; i < reqs.size(); i++) {
    const auto& r = *reqs[i];
    const BlockLayout::Placement& place = layout.placements[i];
    if (place.refused != BlockRefusal::kNone) continue;
    // Queue depth as recorded: no more in flight than the device had when this one was issued.
    while (inflight >= std::max<uint32_t>(r.inflight, 1)) reap(true);
    uint64_t due = live_start;
    // Requests are in issue-time order (the model sorts them); the guards keep it so regardless.
    if (o.pace == PaceMode::kOriginal) {
      due = ScaledDue(live_start, r.ts > trace_start ? r.ts - trace_start : 0, o.speed);
    } else if (o.pace == PaceMode::kGaps) {
      uint64_t gap = ScaledDue(0, r.ts > prev_rec ? r.ts - prev_rec : 0, o.speed);
      uint64_t absorbed = std::min(carry, gap);
      carry -= absorbed;
      due = SaturatingAdd(prev_issue, gap - absorbed);
    } else {
      due = NowNs();
    }
    // Reap while waiting so latencies are measured when they happen.
    while (true) {
      reap(false);
      uint64_t now = NowNs();
      if (now + o.spin_ns >= due || inflight == 0) break;
      __kernel_timespec ts{0, static_cast<long long>(std::min<uint64_t>(due - now - o.spin_ns, 1'000'000))};
      io_uring_cqe* cqe;
      io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
    }
    WaitUntil(due, o.spin_ns);
    uint64_t issued = NowNs();
    if (first_issue == 0) first_issue = issued;
    if (issued > due) {
      if (o.pace == PaceMode::kGaps) carry += issued - due;
      if (o.pace != PaceMode::kFast) sched.Add(issued - due);
    } else if (o.pace != PaceMode::kFast) {
      sched.Add(0);
    }
    prev_rec = r.ts;
    prev_issue = issued;

    BlockOp op = Classify(r);
    Live& l = live[i];
    l.op = op;
    l.recorded_error = r.error;
    l.submitted = issued;
    const uint64_t off = place.offset;
    if (op == BlockOp::kDiscard || op == BlockOp::kWriteZeroes) {
      // Synchronous ioctls: the block layer has no async discard interface for user space.
      uint64_t range[2] = {off, r.bytes};
      int res = ioctl(fd.get(), op == BlockOp::kDiscard ? BLKDISCARD : BLKZEROOUT, range);
      const char* name = BlockOpName(op);
      lat[name].Add(NowNs() - issued);
      count[name]++;
      if (res != 0) errors[name]++;
      if ((res != 0) != (r.error != 0)) mismatches++;
      continue;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    while (!sqe) {
      io_uring_submit(&ring);
      reap(true);
      sqe = io_uring_get_sqe(&ring);
    }
    switch (op) {
      case BlockOp::kRead: io_uring_prep_read(sqe, fd.get(), rbuf.data(), r.bytes, off); break;
      case BlockOp::kWrite:
        io_uring_prep_write(sqe, fd.get(), wbuf.data(), r.bytes, off);
        if (r.flags & IOT_BLKF_FUA) sqe->rw_flags = RWF_DSYNC;
        break;
      default: io_uring_prep_fsync(sqe, fd.get(), IORING_FSYNC_DATASYNC); break;
    }
    io_uring_sqe_set_data64(sqe, i);
    inflight++;
    io_uring_submit(&ring);
  }
  while (inflight > 0) reap(true);
  uint64_t end = NowNs();
  io_uring_queue_exit(&ring);

  const double secs = ElapsedSeconds(first_issue ? std::min(first_issue, live_start) : end, end);
  return Summarize(tally, layout, o, reqs.size(), max_qd, warnings, secs);
}

}  // namespace iotwin::replay
