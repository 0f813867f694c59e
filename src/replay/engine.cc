#include "replay/engine.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <linux/close_range.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <unordered_map>

#include "format/records.h"
#include "model/op_fields.h"
#include "model/path.h"
#include "replay/fill.h"
#include "replay/pacer.h"
#include "replay/sandbox.h"

namespace iotwin::replay {

using model::FdState;
using model::Op;
using model::OpKind;

namespace {

// Physical memory of all workers' I/O buffers together (each between 1 and 64 MiB; see
// AlignedBuffer::Aliased).
constexpr size_t kBuffersPhysicalBytes = size_t{1} << 30;

// Whether [offset, offset + length) lies inside the live twin of `mp` (its recorded length,
// rounded up to pages as the kernel rounds munmap/madvise/msync). A trace's lengths are not
// trusted: the replay only unmaps, advises, syncs, remaps or touches memory it mapped itself.
bool WithinMapping(const model::Mapping& mp, uint64_t offset, uint64_t length) {
  constexpr uint64_t kPage = 4096;
  if (mp.length > UINT64_MAX - kPage) return false;
  const uint64_t live = (mp.length + kPage - 1) / kPage * kPage;
  return offset <= live && length <= live - offset;
}

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

bool IsAsyncSyscall(uint16_t op) {
  switch (op) {
    case IOT_OP_IO_SETUP: case IOT_OP_IO_SUBMIT: case IOT_OP_IO_GETEVENTS:
    case IOT_OP_IO_DESTROY: case IOT_OP_IO_URING_SETUP: case IOT_OP_IO_URING_ENTER:
    case IOT_OP_IO_URING_REGISTER: case IOT_OP_IO_PGETEVENTS:
      return true;
    default:
      return false;
  }
}

bool IsDataTransfer(uint16_t op) {
  return OpIsRead(op) || OpIsWrite(op) || op == IOT_OP_COPY_FILE_RANGE || op == IOT_OP_SENDFILE;
}

bool AsyncIsWriteOp(const iot_async_io& a) {
  if (a.engine == IOT_AIO_ENGINE_LIBAIO) return a.opcode == 1 || a.opcode == 8;
  return a.opcode == 2 || a.opcode == 5 || a.opcode == 23;
}
bool AsyncMovesData(const iot_async_io& a) {
  if (a.engine == IOT_AIO_ENGINE_LIBAIO) return a.opcode <= 1 || a.opcode == 7 || a.opcode == 8;
  return a.opcode == 1 || a.opcode == 2 || a.opcode == 4 || a.opcode == 5 || a.opcode == 22 ||
         a.opcode == 23;
}

}  // namespace

struct alignas(64) ReplayEngine::Progress {
  std::atomic<uint32_t> done{0};
  std::atomic<uint32_t> waiters{0};
};

// Recorded descriptor number -> live descriptor, per process. Dense for the numbers programs
// use; a locked map for the rare large ones, so that memory follows the numbers a trace uses,
// not the largest number it names (dup2(fd, 2147483000) is one entry).
struct ReplayEngine::LiveTable {
  static constexpr size_t kDense = 4096;
  explicit LiveTable(size_t n) : size(std::min(n, kDense)), slots(new std::atomic<int>[size]) {
    for (size_t i = 0; i < size; i++) slots[i].store(-1, std::memory_order_relaxed);
  }
  int Get(int fd) const {
    if (static_cast<size_t>(fd) < size) return slots[fd].load(std::memory_order_acquire);
    std::lock_guard<std::mutex> l(mu);
    auto it = high.find(fd);
    return it == high.end() ? -1 : it->second;
  }
  // Stores `live` (-1: none) and returns what was there.
  int Exchange(int fd, int live) {
    if (static_cast<size_t>(fd) < size) return slots[fd].exchange(live, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> l(mu);
    auto it = high.find(fd);
    int old = it == high.end() ? -1 : it->second;
    if (live >= 0) high[fd] = live;
    else if (it != high.end()) high.erase(it);
    return old;
  }
  // (recorded, live) of every live entry, at the moment of the call.
  std::vector<std::pair<int, int>> Entries() const {
    std::vector<std::pair<int, int>> out;
    for (size_t i = 0; i < size; i++) {
      int live = slots[i].load(std::memory_order_acquire);
      if (live >= 0) out.emplace_back(static_cast<int>(i), live);
    }
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [fd, live] : high) out.emplace_back(fd, live);
    return out;
  }

  size_t size;
  std::unique_ptr<std::atomic<int>[]> slots;
  mutable std::mutex mu;
  std::unordered_map<int, int> high;
};

// An async request in flight.
struct Outstanding {
  uint32_t index;     // op index in the thread
  uint64_t rec_end;   // recorded completion
  uint64_t submitted; // live submission time
  AsyncEngine* engine;
};

struct ReplayEngine::Worker {
  uint32_t thread = 0;
  std::thread th;
  std::atomic<pid_t> tid{0};
  AlignedBuffer rbuf, wbuf;
  std::vector<iovec> iov;
  std::vector<int> fds;
  std::string scratch;
  bool in_root = false;       // confined to its base (Sandbox::ConfineThread)
  std::string confine_error;  // why not, when the back end is real
  ReplayStats stats;
  std::array<OpStats*, IOT_OP_MAX + 3> fast{};  // syscalls by code, then faults (read, write)
  std::unordered_map<uint32_t, OpStats*> async_stats;
  std::vector<std::unique_ptr<AsyncEngine>> engines;  // per async context
  std::vector<bool> engine_failed;
  std::vector<Outstanding> outstanding;
  alignas(64) std::atomic<uint64_t> done_ops{0};
  std::atomic<int64_t> lateness{0};
  uint64_t finish_ns = 0;
  Status error;
};

ReplayEngine::ReplayEngine(const ReplayPlan& plan, const ReplayOptions& options, Backend* backend)
    : plan_(plan), model_(*plan.model), options_(options), backend_(backend) {}

ReplayEngine::~ReplayEngine() {
  if (!workers_.empty() && !started_.load()) {
    Abort("engine destroyed before start");
    Start(NowNs());
  }
  Release();
  {
    std::lock_guard<std::mutex> l(bk_mu_);
    bk_stop_ = true;
  }
  bk_cv_.notify_all();
  if (bookkeeper_.joinable()) bookkeeper_.join();
  if (sink_fd_ >= 0) close(sink_fd_);
}

int ReplayEngine::LiveFd(uint32_t process, int recorded) const {
  if (recorded < 0 || process >= tables_.size()) return -1;
  return tables_[process]->Get(recorded);
}

void ReplayEngine::SetLiveFd(uint32_t process, int recorded, int live) {
  if (recorded < 0 || process >= tables_.size()) {
    if (live >= 0) backend_->CloseFd(live);
    return;
  }
  tables_[process]->Exchange(recorded, live);
}

void ReplayEngine::Bookkeep(std::function<void()> fn) {
  // Runs `fn` on the bookkeeping thread and waits for it.
  std::atomic<uint32_t> done{0};
  std::function<void()> job = [&] {
    fn();
    done.store(1, std::memory_order_release);
    Futex(&done, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  };
  {
    std::lock_guard<std::mutex> l(bk_mu_);
    bk_queue_.push_back(&job);
  }
  bk_cv_.notify_one();
  while (done.load(std::memory_order_acquire) == 0) Futex(&done, FUTEX_WAIT_PRIVATE, 0, nullptr);
}

void ReplayEngine::BookkeeperLoop() {
  while (true) {
    std::function<void()>* job = nullptr;
    {
      std::unique_lock<std::mutex> l(bk_mu_);
      bk_cv_.wait(l, [&] { return bk_stop_ || !bk_queue_.empty(); });
      if (bk_queue_.empty()) return;
      job = bk_queue_.front();
      bk_queue_.pop_front();
    }
    (*job)();
  }
}

void ReplayEngine::WaitFor(uint32_t thread, uint32_t count) {
  Progress& p = progress_[thread];
  if (p.done.load(std::memory_order_acquire) >= count) return;
  for (int i = 0; i < 2000; i++) {
    if (p.done.load(std::memory_order_acquire) >= count) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  p.waiters.fetch_add(1, std::memory_order_seq_cst);
  timespec timeout{0, 100'000'000};
  while (true) {
    uint32_t v = p.done.load(std::memory_order_seq_cst);
    if (v >= count || abort_.load(std::memory_order_relaxed)) break;
    Futex(&p.done, FUTEX_WAIT_PRIVATE, v, &timeout);
  }
  p.waiters.fetch_sub(1, std::memory_order_seq_cst);
}

void ReplayEngine::MarkDone(uint32_t thread, uint32_t count) {
  if (!awaited_[thread]) return;
  Progress& p = progress_[thread];
  p.done.store(count, std::memory_order_seq_cst);
  if (p.waiters.load(std::memory_order_seq_cst) != 0) {
    Futex(&p.done, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  }
}

void ReplayEngine::CloseProcess(uint32_t process) {
  LiveTable& t = *tables_[process];
  for (const auto& [recorded, live] : t.Entries()) {
    int fd = t.Exchange(recorded, -1);
    if (fd >= 0) backend_->CloseFd(fd);
  }
}

void ReplayEngine::UnmapProcess(uint32_t process) {
  const auto& maps = model_.mappings();
  for (size_t i = 0; i < maps.size(); i++) {
    if (maps[i].process != process) continue;
    uint64_t base = maps_[i].exchange(0);
    if (base) backend_->Unmap(reinterpret_cast<uint8_t*>(base), maps[i].length);
  }
}

Status ReplayEngine::Setup() {
  // Room for dup2/dup3 targets that have no live descriptor yet: numbers far above what the
  // kernel hands out (it always picks the lowest free one).
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  getrlimit(RLIMIT_NOFILE, &rl);
  uint64_t limit = rl.rlim_cur == RLIM_INFINITY ? (1u << 20) : rl.rlim_cur;
  reserved_next_.store(static_cast<int>(std::min<uint64_t>(limit / 2, 1u << 16)));

  const auto& procs = model_.processes();
  for (size_t p = 0; p < procs.size(); p++) {
    int64_t size = std::min<int64_t>(procs[p].max_fd, LiveTable::kDense) + 1;
    if (procs[p].parent != model::kNone) {
      size = std::max<int64_t>(size, std::min<int64_t>(procs[procs[p].parent].max_fd,
                                                       LiveTable::kDense) + 1);
    }
    tables_.push_back(std::make_unique<LiveTable>(static_cast<size_t>(std::max<int64_t>(size, 1))));
  }
  maps_.reset(new std::atomic<uint64_t>[model_.mappings().size() + 1]);
  for (size_t i = 0; i <= model_.mappings().size(); i++) maps_[i].store(0);
  progress_.reset(new Progress[model_.threads().size() + 1]);
  // Only threads someone waits for publish progress op by op.
  awaited_.assign(model_.threads().size(), false);
  for (const auto& d : model_.deps()) {
    if (d.thread < awaited_.size()) awaited_[d.thread] = true;
  }
  sink_fd_ = open("/dev/null", O_WRONLY | O_CLOEXEC);

  // What an attached process already had open or mapped.
  for (size_t p = 0; p < procs.size(); p++) {
    for (const auto& ifd : procs[p].initial_fds) {
      if (ifd.path == model::kNone || plan_.targets[ifd.path].empty()) continue;
      if (options_.backend == BackendKind::kNull) {
        SetLiveFd(static_cast<uint32_t>(p), ifd.fd, ifd.fd);
        continue;
      }
      uint64_t flags = ifd.flags & ~static_cast<uint32_t>(O_CREAT | O_EXCL | O_TRUNC | O_PATH);
      int fd = plan_.sandbox ? plan_.sandbox->OpenFile(plan_.targets[ifd.path], flags | O_CLOEXEC, 0)
                             : -EPERM;
      if (fd < 0) continue;  // ops on it will count as live-fd-missing
      if (ifd.pos) lseek(fd, static_cast<off_t>(ifd.pos), SEEK_SET);
      SetLiveFd(static_cast<uint32_t>(p), ifd.fd, fd);
    }
    for (uint32_t mid : procs[p].initial_mappings) {
      const model::Mapping& mp = model_.mappings()[mid];
      if (mp.path == model::kNone) continue;
      uint8_t* base = backend_->MapFile(plan_.sandbox.get(), plan_.targets[mp.path], mp.length,
                                        mp.prot, mp.flags, mp.file_offset);
      if (base) maps_[mid].store(reinterpret_cast<uint64_t>(base));
    }
  }

  bookkeeper_ = std::thread([this] { BookkeeperLoop(); });
  // Workers wait for the bookkeeper (fork, exec, exit): it must not queue behind them.
  if (Status st = MakeRealtime(bookkeeper_, "the bookkeeping thread"); !st.ok()) return st;

  const auto& threads = model_.threads();
  for (uint32_t t = 0; t < threads.size(); t++) {
    auto w = std::make_unique<Worker>();
    w->thread = t;
    uint64_t rmax = 0, wmax = 0;
    for (const auto& op : threads[t].ops) {
      if (op.kind == OpKind::kSyscall) {
        const auto& sc = op.sc;
        uint64_t len = sc.length;
        if (op.extra_count && (OpIsRead(sc.op) || OpIsWrite(sc.op))) {
          len = 0;
          for (uint32_t k = 0; k < op.extra_count; k++) {
            len = std::min(len + std::min(model_.ExtraBegin(op)[k], kMaxIoBytes), kMaxIoBytes);
          }
        }
        if (OpIsRead(sc.op) || sc.op == IOT_OP_GETDENTS64) rmax = std::max(rmax, len);
        if (OpIsWrite(sc.op)) wmax = std::max(wmax, len);
        ops_total_++;
      } else if (op.kind == OpKind::kAsyncSubmit) {
        if (AsyncIsWriteOp(op.aio)) wmax = std::max(wmax, op.aio.length);
        else rmax = std::max(rmax, op.aio.length);
        ops_total_++;
      } else if (op.kind == OpKind::kPageFault) {
        ops_total_++;
      }
    }
    if (options_.backend != BackendKind::kNull) {
      // Lengths are the trace's word: buffers alias their pages past a physical share, so memory
      // stays bounded whatever a call claims (and the kernel moves at most kMaxIoBytes a call).
      const size_t physical = std::clamp<size_t>(kBuffersPhysicalBytes / (2 * threads.size()),
                                                 size_t{1} << 20, size_t{64} << 20);
      w->rbuf = AlignedBuffer::Aliased(std::max<uint64_t>(rmax, 4096), physical);
      w->wbuf = AlignedBuffer::Aliased(std::max<uint64_t>(wmax, 4096), physical);
      if (!w->rbuf.data() || !w->wbuf.data()) {
        return Status::Io("cannot allocate replay buffers for thread {} ({} / {} bytes)",
                          threads[t].tid, rmax, wmax);
      }
      FillPattern(w->wbuf.data(), w->wbuf.physical_size(), options_.fill, t + 7);
    }
    w->engines.resize(model_.async_contexts().size());
    w->engine_failed.resize(model_.async_contexts().size(), false);
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* wp = w.get();
    wp->th = std::thread([this, wp] { RunWorker(wp); });
    // Before the start gate opens, so no replayed op runs in the normal class.
    if (Status st = MakeRealtime(wp->th, fmt::format("replay thread {}", wp->thread)); !st.ok()) {
      return st;
    }
  }
  // Wait until every worker has published its tid (for --record).
  for (auto& w : workers_) {
    while (w->tid.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    // The kernel's view of each worker, asked from here: a call in the worker itself would
    // appear among the calls of a recorded replay.
    if (sched_getscheduler(w->tid.load()) == SCHED_FIFO) fifo_workers_++;
  }
  return Status::Ok();
}

Status ReplayEngine::MakeRealtime(std::thread& th, const std::string& what) {
  if (options_.rt_priority <= 0) return Status::Ok();
  sched_param param{};
  param.sched_priority = options_.rt_priority;
  if (int err = pthread_setschedparam(th.native_handle(), SCHED_FIFO, &param)) {
    return Status::Io("--rt-priority {}: cannot make {} SCHED_FIFO: {} (needs root or "
                      "CAP_SYS_NICE, and real-time bandwidth in its cgroup)",
                      options_.rt_priority, what, strerror(err));
  }
  return Status::Ok();
}

std::vector<pid_t> ReplayEngine::WorkerTids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w->tid.load());
  return out;
}

void ReplayEngine::Start(uint64_t live_start) {
  live_start_ = live_start;
  started_.store(true);
  gate_.store(1, std::memory_order_seq_cst);
  Futex(&gate_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

void ReplayEngine::Wait() {
  const uint32_t n = static_cast<uint32_t>(workers_.size());
  while (true) {
    uint32_t f = finished_.load(std::memory_order_seq_cst);
    if (f >= n) break;
    Futex(&finished_, FUTEX_WAIT_PRIVATE, f, nullptr);
  }
  live_end_ = live_start_;
  for (auto& w : workers_) live_end_ = std::max(live_end_, w->finish_ns);
  // Whatever is still open or mapped (processes that never exited in the trace).
  Bookkeep([this] {
    for (uint32_t p = 0; p < tables_.size(); p++) {
      CloseProcess(p);
      UnmapProcess(p);
    }
  });
  for (auto& w : workers_) merged_.Merge(w->stats, options_.max_examples);
}

void ReplayEngine::Release() {
  exit_gate_.store(1, std::memory_order_seq_cst);
  Futex(&exit_gate_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  for (auto& w : workers_) {
    if (w->th.joinable()) w->th.join();
  }
}

void ReplayEngine::Abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> l(abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
  }
  abort_.store(true);
}

std::string ReplayEngine::abort_reason() const {
  std::lock_guard<std::mutex> l(abort_mu_);
  return abort_reason_;
}

std::string ReplayEngine::ConfinementNote() const {
  if (options_.backend == BackendKind::kNull) return "";
  size_t open = 0;
  const std::string* why = nullptr;
  for (const auto& w : workers_) {
    if (w->in_root) continue;
    open++;
    if (!why) why = &w->confine_error;
  }
  if (open == 0) return "";
  return fmt::format(
      "{} of {} replay threads could not be confined to the sandbox ({}): their path calls are "
      "resolved with openat2 beneath it, one more call each, some as another system call",
      open, workers_.size(), why->empty() ? "no sandbox" : *why);
}

uint64_t ReplayEngine::ops_done() const {
  uint64_t n = 0;
  for (const auto& w : workers_) n += w->done_ops.load(std::memory_order_relaxed);
  return n;
}

int64_t ReplayEngine::lag_ns() const {
  int64_t m = 0;
  for (const auto& w : workers_) m = std::max(m, w->lateness.load(std::memory_order_relaxed));
  return m;
}

void ReplayEngine::RunWorker(Worker* w) {
  {
    // Everything that allocates is done before the gate: the first malloc of a thread maps an
    // arena, which must not appear among the replayed calls of a recorded replay.
    const model::Thread& t = model_.threads()[w->thread];
    for (const auto& op : t.ops) {
      if (op.kind == OpKind::kSyscall) {
        OpStats*& s = w->fast[op.sc.op <= IOT_OP_MAX ? op.sc.op : 0];
        if (!s) s = &w->stats.Op(OpLabel(op));
      } else if (op.kind == OpKind::kPageFault) {
        OpStats*& s = w->fast[IOT_OP_MAX + 1 + ((op.pf.flags & IOT_PFF_WRITE) ? 1 : 0)];
        if (!s) s = &w->stats.Op(OpLabel(op));
      } else if (op.kind == OpKind::kAsyncSubmit) {
        uint32_t key = (static_cast<uint32_t>(op.aio.engine) << 8) | op.aio.opcode;
        OpStats*& s = w->async_stats[key];
        if (!s) s = &w->stats.Op(OpLabel(op));
      }
      if (op.extra_count > w->iov.size()) w->iov.resize(op.extra_count);
      if (op.kind == OpKind::kSyscall && op.sc.op == IOT_OP_CLOSE_RANGE) {
        w->fds.reserve(std::max<size_t>(w->fds.capacity(), op.extra_count));
      }
    }
    w->scratch.reserve(4096);
    w->outstanding.reserve(1024);
    for (const auto& reason : {"unknown_fd", "unknown_path", "pseudo_fs", "unknown_mapping",
                               "unsupported", "live_fd_missing", "mapping_missing",
                               "outside_mapping", "unrepresentable_path", "async_engine"}) {
      w->stats.AddSkip(reason, "");  // creates the map nodes; the "" entries are dropped later
    }
  }
  // Confined before its tid is published, so before a --record tracer attaches.
  if (options_.backend != BackendKind::kNull && plan_.sandbox) {
    Status st = Sandbox::ConfineThread(plan_.mapper);
    w->in_root = st.ok();
    if (!st.ok()) w->confine_error = st.ToString();
  }
  w->tid.store(gettid(), std::memory_order_release);
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  while (gate_.load(std::memory_order_acquire) == 0) Futex(&gate_, FUTEX_WAIT_PRIVATE, 0, nullptr);
  if (abort_.load()) {
    w->finish_ns = NowNs();
    finished_.fetch_add(1, std::memory_order_seq_cst);
    Futex(&finished_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
    return;
  }

  const model::Thread& th = model_.threads()[w->thread];
  const uint32_t proc = th.process;
  const uint64_t trace_start = model_.start_ts();
  Pacer pacer(options_.pace, options_.speed, trace_start, live_start_);
  uint64_t prev_rec_end = th.start_ts;
  uint64_t prev_live_done = live_start_;
  if (options_.pace != PaceMode::kOriginal && th.start_ts > trace_start) {
    // Threads that start later begin from their creation point (waited on below).
    prev_live_done = 0;
  }
  bool first = true;
  const bool paced = options_.pace != PaceMode::kFast;

  auto stats_for = [&](const Op& op) -> OpStats& {
    if (op.kind == OpKind::kSyscall) {
      OpStats*& s = w->fast[op.sc.op <= IOT_OP_MAX ? op.sc.op : 0];
      if (!s) s = &w->stats.Op(OpLabel(op));
      return *s;
    }
    if (op.kind == OpKind::kPageFault) {
      OpStats*& s = w->fast[IOT_OP_MAX + 1 + ((op.pf.flags & IOT_PFF_WRITE) ? 1 : 0)];
      if (!s) s = &w->stats.Op(OpLabel(op));
      return *s;
    }
    uint32_t key = (static_cast<uint32_t>(op.aio.engine) << 8) | op.aio.opcode;
    OpStats*& s = w->async_stats[key];
    if (!s) s = &w->stats.Op(OpLabel(op));
    return *s;
  };

  auto record_mismatch = [&](const Op& op, uint32_t index, int64_t recorded, int64_t live,
                             Mismatch kind) {
    MismatchExample ex;
    ex.op = OpLabel(op);
    ex.tid = th.tid;
    ex.index = index;
    ex.path = op.path != model::kNone ? model_.path(op.path) : "";
    ex.recorded = recorded;
    ex.live = live;
    w->stats.AddMismatch(kind, ex.op, ex, options_.max_examples);
    mismatch_count_.fetch_add(1, std::memory_order_relaxed);
    if (options_.strict) {
      Abort(fmt::format("--strict: {} of thread {} (op {}, {}) returned {} in the replay, {} in "
                        "the trace", ex.op, th.tid, index, ex.path, live, recorded));
    }
  };

  // Completions of async requests: result check and latency.
  AsyncCompletion comps[64];
  auto handle_completions = [&](AsyncEngine* e, int n) {
    uint64_t now = NowNs();
    for (int i = 0; i < n; i++) {
      uint32_t index = static_cast<uint32_t>(comps[i].token);
      auto it = std::find_if(w->outstanding.begin(), w->outstanding.end(),
                             [&](const Outstanding& o) { return o.index == index && o.engine == e; });
      if (it == w->outstanding.end()) continue;
      const Op& op = th.ops[index];
      OpStats& s = stats_for(op);
      s.count++;
      s.latency.Add(now - it->submitted);
      if (comps[i].res < 0) s.errors++;
      else if (AsyncMovesData(op.aio)) s.bytes += static_cast<uint64_t>(comps[i].res);
      if (!op.interrupted) {
        Mismatch mk;
        if (CompareResult(op.result, comps[i].res, true, &mk)) {
          record_mismatch(op, index, op.result, comps[i].res, mk);
        }
      }
      w->outstanding.erase(it);
      w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  };
  auto reap_available = [&] {
    for (auto& e : w->engines) {
      if (!e) continue;
      int n;
      while ((n = e->Reap(comps, 64, 0)) > 0) handle_completions(e.get(), n);
    }
  };
  // Waits for the requests the original had completed by `rec_time` (its waiting call returned),
  // all of an engine's at once: the original's io_getevents(ctx, n, n) or
  // io_uring_enter(fd, n, n, GETEVENTS) is one call, so waiting for them one by one would add
  // system calls the original did not make. Requests still queued are submitted by the same call.
  auto wait_completions_until = [&](uint64_t rec_time, int max_events) {
    while (!abort_.load(std::memory_order_relaxed)) {
      AsyncEngine* e = nullptr;
      int due = 0;
      for (const auto& o : w->outstanding) {
        if (o.rec_end > rec_time) continue;
        if (!e) e = o.engine;
        if (o.engine == e) due++;
      }
      if (!e) break;
      int n = e->SubmitAndReap(comps, max_events, std::min(due, max_events));
      if (n <= 0) break;
      handle_completions(e, n);
    }
  };
  auto flush_all = [&]() -> int {
    int total = 0;
    for (auto& e : w->engines) {
      if (e && e->queued()) {
        int r = e->Flush();
        if (r < 0) return r;
        total += r;
      }
    }
    return total;
  };

  // A context's engine is set up at its recorded io_setup / io_uring_setup when the model linked
  // the call to it, else at its first request.
  auto ensure_engine = [&](uint32_t ci) {
    if (w->engines[ci] || w->engine_failed[ci]) return;
    const auto& ctx = model_.async_contexts()[ci];
    // The recorded setup size (io_setup nr_events, io_uring_setup entries), so the replayed
    // setup call is the recorded one; never less than the requests seen in flight.
    auto e = backend_->NewAsyncEngine(ctx.engine, std::max({ctx.max_inflight, ctx.setup_size, 1u}),
                                      options_.async);
    if (e.ok()) w->engines[ci] = std::move(e).value();
    else w->engine_failed[ci] = true;
  };

  // The end of a call the async engines carry out (setup, submit, wait, a ring's close):
  // counted, timed from `t0`, and the thread's pacing moved past it.
  auto finish_engine_call = [&](const Op& op, uint32_t i, uint64_t t0) {
    OpStats& s = stats_for(op);
    s.count++;
    s.latency.Add(NowNs() - t0);
    w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    prev_rec_end = op.end == UINT64_MAX ? op.ts : op.end;
    prev_live_done = NowNs();
    MarkDone(w->thread, i + 1);
  };

  LiveArgs a;
  for (uint32_t i = 0; i < th.ops.size(); i++) {
    if (abort_.load(std::memory_order_relaxed)) break;
    const Op& op = th.ops[i];
    const bool replayable_kind = op.kind == OpKind::kSyscall || op.kind == OpKind::kPageFault ||
                                 op.kind == OpKind::kAsyncSubmit;
    // Dependencies first, even for an op that is skipped: the model reduces waits, so later ops
    // of this thread rely on the ones made here.
    for (uint32_t k = 0; k < op.dep_count; k++) {
      const model::Dep& d = model_.DepsBegin(op)[k];
      WaitFor(d.thread, d.count);
    }
    if (replayable_kind && op.skip != model::Skip::kReplayable) {
      w->stats.AddSkip(std::string(model::SkipName(op.skip)), OpLabel(op));
      w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      MarkDone(w->thread, i + 1);
      continue;
    }
    uint64_t issued = 0;
    int64_t late = 0;
    if (paced) {
      uint64_t now = NowNs();
      if (first) {
        if (prev_live_done == 0) prev_live_done = now;
        first = false;
      }
      uint64_t due = pacer.Due(op.ts, prev_rec_end, prev_live_done, now);
      if (!w->outstanding.empty()) reap_available();
      WaitUntil(due, options_.spin_ns);
      issued = NowNs();
      pacer.Issued(due, issued);
      late = static_cast<int64_t>(issued > due ? issued - due : 0);
      w->lateness.store(late, std::memory_order_relaxed);
    } else if (!w->outstanding.empty()) {
      reap_available();
    }

    // Markers: the kernel's implicit work, done by the bookkeeper.
    if (!replayable_kind) {
      switch (op.kind) {
        case OpKind::kFork: {
          uint32_t child = op.child;
          Bookkeep([&] {
            for (const auto& [fd, live] : tables_[proc]->Entries()) {
              SetLiveFd(child, fd, backend_->CloneFd(live));
            }
            for (uint32_t mid : model_.processes()[child].inherited_mappings) {
              const model::Mapping& mp = model_.mappings()[mid];
              if (mp.path == model::kNone || plan_.targets[mp.path].empty()) continue;
              if (maps_[mp.inherited_from].load() == 0) continue;
              uint8_t* base = backend_->MapFile(plan_.sandbox.get(), plan_.targets[mp.path],
                                                mp.length, mp.prot, mp.flags, mp.file_offset);
              if (base) maps_[mid].store(reinterpret_cast<uint64_t>(base));
            }
          });
          break;
        }
        case OpKind::kExec:
          Bookkeep([&] {
            for (uint32_t k = 0; k < op.extra_count; k++) {
              int recorded = static_cast<int>(model_.ExtraBegin(op)[k]);
              if (recorded < 0) continue;
              int live = tables_[proc]->Exchange(recorded, -1);
              if (live >= 0) backend_->CloseFd(live);
            }
            UnmapProcess(proc);
          });
          break;
        case OpKind::kExit:
          if (op.process_exit) {
            Bookkeep([&] {
              CloseProcess(proc);
              UnmapProcess(proc);
            });
          }
          break;
        default:
          break;
      }
      MarkDone(w->thread, i + 1);
      continue;
    }

    if (paced) w->stats.AddSchedule(static_cast<uint64_t>(late));

    // ---- async submissions ----
    if (op.kind == OpKind::kAsyncSubmit) {
      uint32_t ci = op.async_ctx;
      auto skip_live = [&](LiveSkip why) {
        const char* names[] = {"live_fd_missing", "mapping_missing", "async_engine"};
        w->stats.AddSkip(names[static_cast<int>(why)], OpLabel(op));
        w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        MarkDone(w->thread, i + 1);
      };
      ensure_engine(ci);
      AsyncEngine* e = w->engines[ci].get();
      if (!e) {
        skip_live(LiveSkip::kAsyncEngine);
        continue;
      }
      AsyncRequest req;
      req.token = i;
      req.engine = op.aio.engine;
      req.opcode = op.aio.opcode;
      req.fd = LiveFd(proc, op.aio.fd);
      req.offset = op.aio.offset;
      req.len = std::min<uint64_t>(op.aio.length,
                                   AsyncIsWriteOp(op.aio) ? w->wbuf.size() : w->rbuf.size());
      req.rw_flags = op.aio.rw_flags;
      req.recorded = op.result;
      req.buf = AsyncIsWriteOp(op.aio) ? w->wbuf.data() : w->rbuf.data();
      if (req.fd < 0 && options_.backend != BackendKind::kNull) {
        skip_live(LiveSkip::kLiveFdMissing);
        continue;
      }
      while (!e->Queue(req)) {
        e->Flush();
        int n = e->Reap(comps, 64, 1);
        if (n <= 0) break;
        handle_completions(e, n);
      }
      w->outstanding.push_back(Outstanding{i, op.end, NowNs(), e});
      // Flush at the end of the recorded batch, unless the next op is the submitting call.
      bool more = false;
      if (i + 1 < th.ops.size()) {
        const Op& next = th.ops[i + 1];
        // Requests queued before a submitting call are all carried by it, whatever their
        // recorded instants (the model's batches follow submission timestamps).
        more = (next.kind == OpKind::kAsyncSubmit && next.async_ctx == op.async_ctx) ||
               (next.kind == OpKind::kSyscall &&
                (next.sc.op == IOT_OP_IO_URING_ENTER || next.sc.op == IOT_OP_IO_SUBMIT));
      }
      if (!more) e->Flush();
      prev_rec_end = std::max(prev_rec_end, op.ts);
      prev_live_done = NowNs();
      MarkDone(w->thread, i + 1);
      continue;
    }

    // ---- syscalls and page touches ----
    a = LiveArgs{};
    a.op = &op;
    a.sandbox = plan_.sandbox.get();
    a.in_root = w->in_root;
    const std::vector<std::string>& names = w->in_root ? plan_.confined : plan_.targets;
    a.recorded = op.result;
    bool live_ok = true;
    LiveSkip why = LiveSkip::kLiveFdMissing;
    bool outside_mapping = false;  // a length or offset past the replay's own mapping
    bool bad_name = false;         // a recorded name no system call can carry (a NUL inside)
    const bool null_backend = options_.backend == BackendKind::kNull;
    int64_t result = 0;
    bool checked = !op.interrupted;

    if (op.kind == OpKind::kPageFault) {
      uint64_t base = maps_[op.mapping].load(std::memory_order_acquire);
      if (base == 0) {
        live_ok = false;
        why = LiveSkip::kMappingMissing;
      } else if (!WithinMapping(model_.mappings()[op.mapping], op.map_offset, 1)) {
        live_ok = false;
        outside_mapping = true;
      }
      a.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
    } else if (IsAsyncSyscall(op.sc.op)) {
      // Setup/teardown: engines are created at the first request of a context. Submitting and
      // waiting calls flush and reap as the original did.
      uint64_t t0 = NowNs();
      uint16_t code = op.sc.op;
      if ((code == IOT_OP_IO_SETUP || code == IOT_OP_IO_URING_SETUP) && op.async_ctx != model::kNone &&
          op.async_ctx < w->engines.size()) {
        ensure_engine(op.async_ctx);
      }
      bool waits = code == IOT_OP_IO_GETEVENTS || code == IOT_OP_IO_PGETEVENTS ||
                   (code == IOT_OP_IO_URING_ENTER && (op.sc.flags & 1 /*GETEVENTS*/));
      // io_uring_enter submits and waits in one call: the wait submits what it waits for, and
      // what is left queued (nothing due) is submitted after.
      // io_getevents(ctx, min_nr, nr): the recorded nr (length) bounds one call, as it did.
      int max_events = 64;
      if (code == IOT_OP_IO_GETEVENTS || code == IOT_OP_IO_PGETEVENTS) {
        max_events = static_cast<int>(std::clamp<uint64_t>(op.sc.length, 1, 64));
      }
      if (waits) wait_completions_until(op.end, max_events);
      if (code == IOT_OP_IO_URING_ENTER || code == IOT_OP_IO_SUBMIT) flush_all();
      finish_engine_call(op, i, t0);
      continue;
    } else if (op.sc.op == IOT_OP_CLOSE && op.async_ctx != model::kNone &&
               op.async_ctx < w->engines.size() && w->engines[op.async_ctx]) {
      // The close of an io_uring instance: this worker's engine for it is torn down here, so
      // the ring is closed and unmapped where the original closed it (the live table never
      // held the ring's descriptor: the engine owns it). Its requests complete first.
      uint64_t t0 = NowNs();
      AsyncEngine* e = w->engines[op.async_ctx].get();
      // A failed submission leaves nothing to wait for: its requests are dropped below.
      const bool submitted = !e->queued() || e->Flush() >= 0;
      auto mine = [&] {
        return std::any_of(w->outstanding.begin(), w->outstanding.end(),
                           [&](const Outstanding& o) { return o.engine == e; });
      };
      while (submitted && mine() && !abort_.load(std::memory_order_relaxed)) {
        int n = e->Reap(comps, 64, 1);
        if (n <= 0) break;
        handle_completions(e, n);
      }
      // Requests that never completed are dropped with the engine, never left pointing at it.
      w->outstanding.erase(std::remove_if(w->outstanding.begin(), w->outstanding.end(),
                                          [&](const Outstanding& o) { return o.engine == e; }),
                           w->outstanding.end());
      w->engines[op.async_ctx].reset();  // a later request of the context sets up a new one
      finish_engine_call(op, i, t0);
      continue;
    } else {
      const iot_syscall& sc = op.sc;
      const uint16_t code = sc.op;
      // Descriptors.
      if (op.fd_state == FdState::kKnown && model::OpHasDataFd(sc)) {
        a.fd = LiveFd(proc, model::DataFd(sc));
        if (a.fd < 0) live_ok = false;
      }
      if (op.empty_path) {
        a.dirfd = LiveFd(proc, model::PathDirFd(sc));
        if (a.dirfd < 0) live_ok = false;
        a.path = "";
      }
      // Paths.
      if (model::OpTakesPath(code) && !op.empty_path) {
        const std::string& t = names[op.path];
        if (t.empty()) {
          live_ok = false;
          bad_name |= model_.path(op.path).find('\0') != std::string::npos;
        }
        a.path = t.c_str();
        int dfd = model::PathDirFd(sc);
        if (dfd != model::kAtFdcwd) {
          int live = LiveFd(proc, dfd);
          a.dirfd = live >= 0 ? live : AT_FDCWD;
        }
      }
      if (model::OpTakesPath2(code)) {
        const std::string& t = names[op.path2];
        if (t.empty()) {
          live_ok = false;
          bad_name |= model_.path(op.path2).find('\0') != std::string::npos;
        }
        a.path2 = t.c_str();
        int dfd = model::Path2DirFd(sc);
        if (dfd != model::kAtFdcwd) {
          int live = LiveFd(proc, dfd);
          a.dirfd2 = live >= 0 ? live : AT_FDCWD;
        }
      }
      if (code == IOT_OP_SYMLINK || code == IOT_OP_SYMLINKAT) {
        // The link's text, re-rooted; a NUL in it would cut the name the kernel sees.
        const std::string& text = model_.path(op.path);
        if (text.find('\0') != std::string::npos) {
          live_ok = false;
          bad_name = true;
        }
        if (w->in_root) {
          // Relative from the link's directory, so that it also resolves inside the sandbox for
          // anyone walking it from outside.
          const std::string link = model::NormalizePath(model_.path(op.path2));
          std::string_view dir = model::ParentPath(link);
          w->scratch = model::RelativePath(dir, model::ResolvePath(dir, text));
        } else {
          w->scratch = plan_.mapper.MapSymlinkTarget(model_.path(op.path2), text);
        }
        a.path = w->scratch.c_str();
      }
      // Second descriptor.
      if (code == IOT_OP_COPY_FILE_RANGE) {
        a.fd2 = LiveFd(proc, sc.fd2);
        if (a.fd2 < 0) live_ok = false;
      } else if (code == IOT_OP_SENDFILE) {
        a.fd2 = op.fd2_state == FdState::kKnown ? LiveFd(proc, sc.fd2) : sink_fd_;
        if (a.fd2 < 0) a.fd2 = sink_fd_;
      } else if (code == IOT_OP_DUP2 || code == IOT_OP_DUP3) {
        a.fd2 = LiveFd(proc, sc.fd2);
        if (a.fd2 < 0) a.fd2 = null_backend ? sc.fd2 : reserved_next_.fetch_add(1);
      }
      // Buffers.
      if (OpIsRead(code) || OpIsWrite(code) || code == IOT_OP_GETDENTS64) {
        const AlignedBuffer& buf = OpIsWrite(code) ? w->wbuf : w->rbuf;
        uint8_t* base = buf.data();
        a.buf = base;
        // Never past the buffer: the kernel would cut the call to kMaxIoBytes anyway.
        a.len = std::min<uint64_t>(sc.length, buf.size());
        if (op.extra_count) {
          if (w->iov.size() < op.extra_count) w->iov.resize(op.extra_count);
          uint64_t off = 0;
          for (uint32_t k = 0; k < op.extra_count; k++) {
            uint64_t l = std::min<uint64_t>(model_.ExtraBegin(op)[k], buf.size() - off);
            w->iov[k] = iovec{base + off, l};
            off += l;
          }
          a.iov = w->iov.data();
          a.iovcnt = static_cast<int>(op.extra_count);
        }
      }
      // Memory ops.
      if (code == IOT_OP_MUNMAP || code == IOT_OP_MSYNC || code == IOT_OP_MADVISE ||
          code == IOT_OP_MREMAP) {
        uint64_t base = maps_[op.mapping].load(std::memory_order_acquire);
        if (base == 0) {
          live_ok = false;
          why = LiveSkip::kMappingMissing;
        }
        a.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
        a.mem_len = model::MemLength(sc);
        if (base != 0 && !WithinMapping(model_.mappings()[op.mapping], op.map_offset, a.mem_len)) {
          live_ok = false;
          outside_mapping = true;
        }
      }
      if (code == IOT_OP_MMAP && op.fixed_in != model::kNone) {
        // MAP_FIXED inside a mapping this replay made: the same place of its live twin.
        // Only wholly inside it: MAP_FIXED replaces whatever else lies in its range.
        uint64_t base = maps_[op.fixed_in].load(std::memory_order_acquire);
        if (base != 0 && WithinMapping(model_.mappings()[op.fixed_in], op.map_offset, sc.length)) {
          a.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
        }
      }
      if (code == IOT_OP_CLOSE_RANGE) {
        w->fds.clear();
        for (uint32_t k = 0; k < op.extra_count; k++) {
          int live = LiveFd(proc, static_cast<int>(model_.ExtraBegin(op)[k]));
          if (live >= 0) w->fds.push_back(live);
        }
        a.fds = w->fds.data();
        a.nfds = static_cast<int>(w->fds.size());
        if (w->fds.empty() && op.extra_count) live_ok = false;
      }
    }

    if (!live_ok) {
      const char* names[] = {"live_fd_missing", "mapping_missing", "async_engine"};
      w->stats.AddSkip(bad_name          ? "unrepresentable_path"
                       : outside_mapping ? "outside_mapping"
                                         : names[static_cast<int>(why)],
                       OpLabel(op));
      w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      MarkDone(w->thread, i + 1);
      continue;
    }

    // Issued just now when paced (the clock read is reused); otherwise read it here.
    uint64_t t0 = paced ? issued : NowNs();
    result = backend_->Execute(a);
    uint64_t t1 = NowNs();

    // Effects on the live tables.
    if (op.kind == OpKind::kSyscall) {
      const iot_syscall& sc = op.sc;
      const uint16_t code = sc.op;
      if (model::OpReturnsFd(sc)) {
        if (op.result >= 0 && result >= 0) {
          int recorded_fd = static_cast<int>(op.result);
          int old = LiveFd(proc, recorded_fd);
          bool replaced_by_kernel = (code == IOT_OP_DUP2 || code == IOT_OP_DUP3) && old == a.fd2;
          // A stale live descriptor (its close failed or was skipped) is released by the
          // bookkeeper: the worker issues only recorded calls.
          if (old >= 0 && old != result && !replaced_by_kernel) {
            Bookkeep([&] { backend_->CloseFd(old); });
          }
          SetLiveFd(proc, recorded_fd, static_cast<int>(result));
        } else if (result >= 0 && !null_backend) {
          int leaked = static_cast<int>(result);  // failed in the trace: do not leak it
          Bookkeep([&] { backend_->CloseFd(leaked); });
        }
      } else if (code == IOT_OP_CLOSE) {
        SetLiveFd(proc, sc.fd, -1);
      } else if (code == IOT_OP_CLOSE_RANGE && !(sc.flags & CLOSE_RANGE_CLOEXEC)) {
        for (uint32_t k = 0; k < op.extra_count; k++) {
          SetLiveFd(proc, static_cast<int>(model_.ExtraBegin(op)[k]), -1);
        }
      } else if (code == IOT_OP_MMAP) {
        if (result >= 0 && op.mapping != model::kNone) {
          maps_[op.mapping].store(static_cast<uint64_t>(result), std::memory_order_release);
        } else if (result >= 0 && !null_backend) {
          uint8_t* extra = reinterpret_cast<uint8_t*>(result);
          uint64_t len = sc.length;
          Bookkeep([&] { backend_->Unmap(extra, len); });
        }
      } else if (code == IOT_OP_MUNMAP && result == 0) {
        const model::Mapping& mp = model_.mappings()[op.mapping];
        if (op.map_offset == 0 && a.mem_len >= mp.length) maps_[op.mapping].store(0);
      } else if (code == IOT_OP_MREMAP && result >= 0 && op.extra_count) {
        uint32_t nm = static_cast<uint32_t>(model_.ExtraBegin(op)[0]);
        maps_[nm].store(static_cast<uint64_t>(result));
        maps_[op.mapping].store(0);
      }
    }

    OpStats& s = stats_for(op);
    s.count++;
    s.latency.Add(t1 - t0);
    if (result < 0) s.errors++;
    else if (op.kind == OpKind::kSyscall && IsDataTransfer(op.sc.op)) {
      s.bytes += static_cast<uint64_t>(result);
    }
    if (checked) {
      Mismatch mk;
      bool count = op.kind == OpKind::kSyscall && model::OpResultIsCount(op.sc.op);
      int64_t recorded = op.kind == OpKind::kPageFault ? 0 : op.result;
      if (result == -EFAULT && op.kind == OpKind::kPageFault) {
        record_mismatch(op, i, recorded, result, Mismatch::kFault);
      } else if (CompareResult(recorded, result, count, &mk)) {
        record_mismatch(op, i, recorded, result, mk);
      }
    }
    w->done_ops.store(w->done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    prev_rec_end = op.end == UINT64_MAX ? op.ts : op.end;
    prev_live_done = t1;
    MarkDone(w->thread, i + 1);
  }
  // Requests still in flight complete before the thread ends.
  flush_all();
  while (!w->outstanding.empty() && !abort_.load()) {
    AsyncEngine* e = w->outstanding.front().engine;
    int n = e->Reap(comps, 64, 1);
    if (n <= 0) break;
    handle_completions(e, n);
  }
  // Anything left unfinished counts as done for threads waiting on it (abort path).
  progress_[w->thread].done.store(static_cast<uint32_t>(th.ops.size()), std::memory_order_seq_cst);
  Futex(&progress_[w->thread].done, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  w->engines.clear();
  w->finish_ns = NowNs();
  finished_.fetch_add(1, std::memory_order_seq_cst);
  Futex(&finished_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  // Stay alive until released: a thread's exit makes calls of its own (glibc returns the stack
  // with madvise) that a recording of the replay must not see.
  while (exit_gate_.load(std::memory_order_acquire) == 0) {
    Futex(&exit_gate_, FUTEX_WAIT_PRIVATE, 0, nullptr);
  }
}

}  // namespace iotwin::replay
