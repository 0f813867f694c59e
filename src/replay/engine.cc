#include "replay/engine.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>
#include <unordered_map>

#include "base/checked_math.h"
#include "format/records.h"
#include "replay/fill.h"
#include "replay/pacer.h"
#include "replay/sandbox.h"
#include "replay/worker.h"

namespace iotwin::replay {

using model::FdState;
using model::Op;
using model::OpKind;

namespace {

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, timeout, nullptr, 0);
}

}  // namespace

// A thread's published progress. `wake_at`: the smallest count a sleeping waiter needs
// (UINT32_MAX: none), so that the thread wakes its waiters once, when one can go on, instead of
// at every op (a waiter for a thread's end would otherwise cost it a futex wake per op).
struct alignas(64) ReplayEngine::Progress {
  std::atomic<uint32_t> done{0};
  std::atomic<uint32_t> wake_at{UINT32_MAX};
};

// Recorded descriptor number -> live descriptor, per process. Dense for the numbers programs
// use; a locked map for the rare large ones, so that memory follows the numbers a trace uses,
// not the largest number it names (dup2(fd, 2147483000) is one entry).
struct ReplayEngine::LiveTable {
  static constexpr size_t kDense = 4096;
  explicit LiveTable(size_t n) : size(std::min(n, kDense)), slots(new std::atomic<int>[size]) {
    for (size_t i = 0; i < size; i++) slots[i].store(-1, std::memory_order_relaxed);
  }
  int Get(int fd) const EXCLUDES(mu) {
    if (static_cast<size_t>(fd) < size) return slots[fd].load(std::memory_order_acquire);
    MutexLock l(&mu);
    auto it = high.find(fd);
    return it == high.end() ? -1 : it->second;
  }
  // Stores `live` (-1: none) and returns what was there.
  int Exchange(int fd, int live) EXCLUDES(mu) {
    if (static_cast<size_t>(fd) < size) return slots[fd].exchange(live, std::memory_order_acq_rel);
    MutexLock l(&mu);
    auto it = high.find(fd);
    int old = it == high.end() ? -1 : it->second;
    if (live >= 0) high[fd] = live;
    else if (it != high.end()) high.erase(it);
    return old;
  }
  // (recorded, live) of every live entry, at the moment of the call.
  std::vector<std::pair<int, int>> Entries() const EXCLUDES(mu) {
    std::vector<std::pair<int, int>> out;
    for (size_t i = 0; i < size; i++) {
      int live = slots[i].load(std::memory_order_acquire);
      if (live >= 0) out.emplace_back(static_cast<int>(i), live);
    }
    MutexLock l(&mu);
    for (const auto& [fd, live] : high) out.emplace_back(fd, live);
    return out;
  }

  const size_t size;
  const std::unique_ptr<std::atomic<int>[]> slots;  // each slot atomic: no lock
  mutable Mutex mu;
  std::unordered_map<int, int> high GUARDED_BY(mu);
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
    MutexLock l(&bk_mu_);
    bk_stop_ = true;
  }
  bk_cv_.SignalAll();
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
    try {
      fn();
    } catch (const std::exception& e) {
      // The replay's own error (memory refused): the replay stops with it, the worker goes on
      // to its end instead of waiting for ever.
      Abort(fmt::format("failed: internal error in the bookkeeping thread: {}", e.what()));
    }
    done.store(1, std::memory_order_release);
    Futex(&done, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  };
  {
    MutexLock l(&bk_mu_);
    bk_queue_.push_back(&job);
  }
  bk_cv_.Signal();
  while (done.load(std::memory_order_acquire) == 0) Futex(&done, FUTEX_WAIT_PRIVATE, 0, nullptr);
}

void ReplayEngine::BookkeeperLoop() {
  while (true) {
    std::function<void()>* job = nullptr;
    {
      MutexLock l(&bk_mu_);
      while (!bk_stop_ && bk_queue_.empty()) bk_cv_.Wait(&bk_mu_);
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
  // Registered before `done` is read again (both seq_cst): either this waiter sees the new
  // count, or MarkDone sees the registration and wakes it. A woken waiter registers again.
  timespec timeout{0, 100'000'000};
  while (true) {
    uint32_t want = p.wake_at.load(std::memory_order_seq_cst);
    while (count < want &&
           !p.wake_at.compare_exchange_weak(want, count, std::memory_order_seq_cst)) {
    }
    uint32_t v = p.done.load(std::memory_order_seq_cst);
    if (v >= count || abort_.load(std::memory_order_relaxed)) break;
    Futex(&p.done, FUTEX_WAIT_PRIVATE, v, &timeout);
  }
}

void ReplayEngine::MarkDone(uint32_t thread, uint32_t count) {
  if (!awaited_[thread]) return;
  Progress& p = progress_[thread];
  p.done.store(count, std::memory_order_seq_cst);
  if (count >= p.wake_at.load(std::memory_order_seq_cst)) {
    p.wake_at.store(UINT32_MAX, std::memory_order_seq_cst);
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

// Each live range once: a MAP_FIXED piece placed inside another mapping of the process (ld.so's
// segments inside its reservation) goes with it, and unmapping it again after would destroy
// whatever another worker has mapped at the freed address since.
void ReplayEngine::UnmapProcess(uint32_t process) {
  const auto& maps = model_.mappings();
  std::vector<std::pair<uint64_t, uint64_t>> live;  // (base, length), longest first per base
  for (size_t i = 0; i < maps.size(); i++) {
    if (maps[i].process != process) continue;
    uint64_t base = maps_[i].exchange(0);
    if (base) live.emplace_back(base, maps[i].length);
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  uint64_t unmapped_to = 0;  // end of the ranges unmapped so far
  for (const auto& [base, length] : live) {
    const uint64_t end = SaturatingAdd(base, length);
    if (end <= unmapped_to) continue;  // inside a range already unmapped
    backend_->Unmap(reinterpret_cast<uint8_t*>(base), length);
    unmapped_to = std::max(unmapped_to, end);
  }
}

Status ReplayEngine::Setup() {
  InstallWaitWakeup();  // before Abort may signal a worker
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

  IOTWIN_RETURN_IF_ERROR(StartThread(&bookkeeper_, [this] { BookkeeperLoop(); },
                                      "the bookkeeping thread"));
  // Workers wait for the bookkeeper (fork, exec, exit): it must not queue behind them.
  if (Status st = MakeRealtime(bookkeeper_, "the bookkeeping thread"); !st.ok()) return st;

  if (options_.backend != BackendKind::kNull && !payload_.read) {
    IOTWIN_ASSIGN_OR_RETURN(payload_, PayloadPools::Create(options_.fill));
  }
  const auto& threads = model_.threads();
  for (uint32_t t = 0; t < threads.size(); t++) {
    auto w = std::make_unique<Worker>(*this, t);
    if (Status st = w->Allocate(payload_, &ops_total_); !st.ok()) return st;
    workers_.push_back(std::move(w));
  }
  for (auto& w : workers_) {
    Worker* wp = w.get();
    IOTWIN_RETURN_IF_ERROR(StartThread(
        &wp->th, [wp] { wp->Run(); },
        fmt::format("replay thread {} of {} (traced tid {})", wp->thread + 1, workers_.size(),
                    threads[wp->thread].tid)));
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

Status ReplayEngine::StartThread(std::thread* th, std::function<void()> fn,
                                 const std::string& what) {
  try {
    *th = std::thread(std::move(fn));
  } catch (const std::system_error& e) {
    return Status::Io("cannot start {}: {} (the system's limit on threads: RLIMIT_NPROC, "
                      "/proc/sys/kernel/threads-max, memory; see --max-threads)",
                      what, e.code().message());
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

std::vector<ReplayEngine::WorkerWindow> ReplayEngine::WorkerWindows() const {
  std::vector<WorkerWindow> out;
  for (const auto& w : workers_) {
    const bool active = w->first_issue_ns != 0 && w->finish_ns >= w->first_issue_ns;
    out.push_back({w->done_ops.load(), active ? w->finish_ns - w->first_issue_ns : 0});
  }
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
  for (auto& w : workers_) {
    live_end_ = std::max(live_end_, w->finish_ns);
    if (w->first_issue_ns == 0) continue;
    first_issue_ = first_issue_ == 0 ? w->first_issue_ns : std::min(first_issue_, w->first_issue_ns);
    last_issue_ = std::max(last_issue_, w->last_issue_ns);
  }
  // Rings and contexts without a recorded teardown go when the replay ends (async_contexts.h).
  async_contexts_.CloseAll();
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
    MutexLock l(&abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = why;
  }
  abort_.store(true);
  // Workers waiting in the kernel on a ring (up to max(1 s, 2 x the recorded wait) at a time)
  // see the stop now. workers_ no longer changes once the gate is open.
  if (started_.load()) {
    for (const auto& w : workers_) WakeWaiter(w->tid.load(std::memory_order_acquire));
  }
}

void ReplayEngine::Fail(WorkerFailure failure) {
  const std::string why = "failed: " + failure.ToString();
  {
    MutexLock l(&abort_mu_);
    if (!failure_) failure_ = std::move(failure);
  }
  Abort(why);
}

// Without the lock: after Wait, every worker has reported finished_ (which orders its Fail
// before this read) and nothing calls Fail any more, so failure_ no longer changes and the
// pointer stays valid for the engine's life.
const WorkerFailure* ReplayEngine::failure() const NO_THREAD_SAFETY_ANALYSIS {
  return failure_ ? &*failure_ : nullptr;
}

std::string WorkerFailure::ToString() const {
  return fmt::format("{} ({}{}{}) of thread {} (worker {}, op {}, {:.6f} s into the trace): {}",
                     op, args, path.empty() ? "" : ", ", path, tid, worker, index,
                     static_cast<double>(ts_ns) / 1e9, error);
}

std::string ReplayEngine::abort_reason() const {
  MutexLock l(&abort_mu_);
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

void ReplayEngine::WaitForStart() {
  while (gate_.load(std::memory_order_acquire) == 0) Futex(&gate_, FUTEX_WAIT_PRIVATE, 0, nullptr);
}

void ReplayEngine::ReportFinished() {
  finished_.fetch_add(1, std::memory_order_seq_cst);
  Futex(&finished_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

void ReplayEngine::WaitForRelease() {
  while (exit_gate_.load(std::memory_order_acquire) == 0) {
    Futex(&exit_gate_, FUTEX_WAIT_PRIVATE, 0, nullptr);
  }
}

void ReplayEngine::PublishAllDone(uint32_t thread, uint32_t count) {
  progress_[thread].done.store(count, std::memory_order_seq_cst);
  Futex(&progress_[thread].done, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

void ReplayEngine::ApplyProcessMarker(uint32_t process, const Op& op) {
  switch (op.kind) {
    case OpKind::kFork: {
      uint32_t child = op.child;
      Bookkeep([&] {
        for (const auto& [fd, live] : tables_[process]->Entries()) {
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
          int live = tables_[process]->Exchange(recorded, -1);
          if (live >= 0) backend_->CloseFd(live);
        }
        UnmapProcess(process);
      });
      break;
    case OpKind::kExit:
      if (op.process_exit) {
        Bookkeep([&] {
          CloseProcess(process);
          UnmapProcess(process);
        });
      }
      break;
    default:
      break;
  }
}

}  // namespace iotwin::replay
