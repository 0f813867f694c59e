// Async engines: io_uring (liburing), libaio, a synchronous fallback and a null engine.
// Requests keep their recorded opcode, offset, length and RWF flags; a batch queued between two
// Flush() calls is submitted with one io_uring_enter / io_submit, as recorded.
#include <libaio.h>
#include <liburing.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <deque>
#include <mutex>
#include <vector>

#include "format/op_info.h"
#include "replay/backend.h"

namespace iotwin::replay {

namespace {

// Ends a wait in the kernel at its timeout without changing the call's arguments (a recording
// of the replay must show the recorded io_uring_enter, not one with IORING_ENTER_EXT_ARG and a
// timeout): a timer of the waiting thread sends it a signal whose handler does nothing,
// installed without SA_RESTART, and the kernel's wait returns EINTR.
int WaitAlarmSignal() { return SIGRTMAX - 3; }

void IgnoreWaitAlarm(int) {}

void InstallWaitAlarmHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = IgnoreWaitAlarm;
    sigemptyset(&sa.sa_mask);
    sigaction(WaitAlarmSignal(), &sa, nullptr);
  });
}

class WaitAlarm {
 public:
  // Armed for `timeout_ns` from now (false: no timer, the wait is not bounded).
  static bool Arm(uint64_t timeout_ns) {
    Timer& t = timer();
    if (!t.made) {
      InstallWaitAlarmHandler();
      sigevent sev{};
      sev.sigev_notify = SIGEV_THREAD_ID;
      sev.sigev_signo = WaitAlarmSignal();
      sev._sigev_un._tid = gettid();
      t.made = timer_create(CLOCK_MONOTONIC, &sev, &t.id) == 0;
      if (!t.made) return false;
    }
    itimerspec its{};
    its.it_value.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000ull);
    its.it_value.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000ull);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
    return timer_settime(t.id, 0, &its, nullptr) == 0;
  }
  static void Disarm() {
    Timer& t = timer();
    if (!t.made) return;
    itimerspec none{};
    timer_settime(t.id, 0, &none, nullptr);
  }

 private:
  struct Timer {
    bool made = false;
    timer_t id{};
    ~Timer() {
      if (made) timer_delete(id);  // a worker thread's timer ends with it
    }
  };
  static Timer& timer() {
    thread_local Timer t;
    return t;
  }
};

// What the engines issue for a recorded request (format/op_info.h classifies the opcode;
// replay::AsyncKind is the engine kind, iotwin::AsyncKind the request kind).
enum class Issue { kRead, kWrite, kReadv, kWritev, kFsync, kFdsync, kNop, kOther };

Issue Classify(const AsyncRequest& r) {
  // An engine code other than libaio's is replayed on io_uring (SyncBackend::NewAsyncEngine).
  const uint8_t engine =
      r.engine == IOT_AIO_ENGINE_LIBAIO ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING;
  const AsyncOpInfo op = AsyncOp(engine, r.opcode);
  switch (op.kind) {
    case iotwin::AsyncKind::kRead: return op.vectored ? Issue::kReadv : Issue::kRead;
    case iotwin::AsyncKind::kWrite: return op.vectored ? Issue::kWritev : Issue::kWrite;
    case iotwin::AsyncKind::kFsync: return op.datasync ? Issue::kFdsync : Issue::kFsync;
    case iotwin::AsyncKind::kOther: break;
  }
  return op.nop ? Issue::kNop : Issue::kOther;
}

// The iovecs of a vectored request: the recorded lengths laid end to end over `req.buf`, cut at
// req.len; one iovec over the buffer where the trace has no shape. The buffer is page-aligned,
// so pieces of whole logical blocks start on block boundaries as O_DIRECT requires (and a piece
// that is not a whole number of blocks fails as the original's must have).
void BuildIovecs(const AsyncRequest& req, std::vector<iovec>* out) {
  out->clear();
  if (req.iov_count == 0 || req.iov_lens == nullptr) {
    out->push_back(iovec{req.buf, req.len});
    return;
  }
  uint64_t off = 0;
  for (uint32_t k = 0; k < req.iov_count; k++) {
    const uint64_t l = std::min<uint64_t>(req.iov_lens[k], req.len - off);
    out->push_back(iovec{req.buf + off, l});
    off += l;
  }
}

// Requests queued or in flight need stable iovecs: the kernel reads them when it takes the
// request (io_uring_enter / io_submit), not before.
struct Slot {
  std::vector<iovec> iovs;
  iocb cb;
  bool used = false;
};

class UringEngine final : public AsyncEngine {
 public:
  ~UringEngine() override {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  Status Init(unsigned depth) {
    // The kernel's most entries (IORING_MAX_ENTRIES): a recorded ring had no more (a program
    // asking for more gets them clamped, IORING_SETUP_CLAMP), however many requests it had in
    // flight (they may exceed its entries).
    constexpr unsigned kMaxEntries = 32768;
    unsigned entries = 1;
    while (entries < std::min(depth, kMaxEntries)) entries <<= 1;
    int r = io_uring_queue_init(entries, &ring_, 0);
    if (r < 0) return Status::FromErrno(-r, "io_uring_queue_init");
    ready_ = true;
    return Status::Ok();
  }
  const char* name() const override { return "io_uring"; }
  bool Queue(const AsyncRequest& req) override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) return false;
    // An SQE's slot is handed out again only after the kernel took the entry (and its iovecs).
    const size_t slot = static_cast<size_t>(sqe - ring_.sq.sqes);
    if (slot >= sqe_iovs_.size()) sqe_iovs_.resize(slot + 1);
    std::vector<iovec>& iov = sqe_iovs_[slot];
    BuildIovecs(req, &iov);
    const auto iovcnt = static_cast<unsigned>(iov.size());
    switch (Classify(req)) {
      case Issue::kRead: io_uring_prep_read(sqe, req.fd, req.buf, req.len, req.offset); break;
      case Issue::kWrite: io_uring_prep_write(sqe, req.fd, req.buf, req.len, req.offset); break;
      case Issue::kReadv: io_uring_prep_readv(sqe, req.fd, iov.data(), iovcnt, req.offset); break;
      case Issue::kWritev: io_uring_prep_writev(sqe, req.fd, iov.data(), iovcnt, req.offset); break;
      case Issue::kFsync: io_uring_prep_fsync(sqe, req.fd, 0); break;
      case Issue::kFdsync: io_uring_prep_fsync(sqe, req.fd, IORING_FSYNC_DATASYNC); break;
      default: io_uring_prep_nop(sqe); break;
    }
    sqe->rw_flags = static_cast<__kernel_rwf_t>(req.rw_flags);
    io_uring_sqe_set_flags(sqe, req.sqe_flags);
    io_uring_sqe_set_data64(sqe, req.token);
    queued_++;
    return true;
  }
  int Flush() override {
    if (queued_ == 0) return 0;
    published_ += queued_;
    int r = io_uring_submit(&ring_);
    queued_ = 0;
    if (r > 0) submitted_ += static_cast<unsigned>(r);
    return r;
  }
  int Reap(AsyncCompletion* out, int max, int min_wait) override {
    return Collect(out, max, min_wait);
  }
  unsigned queued() const override { return queued_; }
  bool replays_ring_calls() const override { return true; }
  // A wait (backend.h): the entries queued are published under the lock, and the call that
  // submits them and waits is made without it. It may wait for no more completions than the
  // kernel can still post: every entry published and not collected (an entry published is
  // submitted by this call or by another thread's, whichever enters first).
  void ArmWait(AsyncWait* w, unsigned min_complete, bool submit) override {
    // The entries this call carries: those another thread published are submitted by its own
    // call (or taken by this one, which the kernel counts the same).
    const unsigned carried = queued_;
    if (submit) PublishQueued();
    // A call the kernel took none of (EINTR before submitting) is made again with the same.
    w->to_submit = submit ? (carried > 0 ? carried : w->to_submit) : 0;
    const unsigned can = published_ - collected_;
    w->want = (w->flags & IORING_ENTER_GETEVENTS) ? std::min(min_complete, can) : 0;
  }
  // Only the ring's descriptor is used: the kernel serializes submissions, and the completion
  // queue's head, which the locked steps move, is only read by the kernel.
  int BlockWait(AsyncWait* w, uint64_t timeout_ns) override {
    const bool call = w->call;
    w->call = false;  // a later round of the same wait is not the recorded call
    if (!call && w->to_submit == 0 && w->want == 0) return w->result = 0;
    const unsigned flags = w->flags & IORING_ENTER_GETEVENTS;
    // The recorded arguments; the timeout is a timer's signal (WaitAlarm).
    // A wait the ring already holds enough completions for returns at once: no timer (two
    // system calls a wait otherwise).
    const bool timed = w->want > 0 && (flags & IORING_ENTER_GETEVENTS) &&
                       io_uring_cq_ready(&ring_) < w->want && WaitAlarm::Arm(timeout_ns);
    const long r = syscall(__NR_io_uring_enter, ring_.ring_fd, w->to_submit, w->want, flags,
                           nullptr, 0);
    const int err = errno;
    if (timed) WaitAlarm::Disarm();
    return w->result = r < 0 ? -err : static_cast<int>(r);
  }
  int FinishWait(AsyncWait* w, AsyncCompletion* out, int max) override {
    if (w->to_submit > 0 && w->result > 0) submitted_ += static_cast<unsigned>(w->result);
    if (w->result >= 0) w->to_submit = 0;  // else kept for a call made again (ArmWait)
    return Drain(out, max);
  }
  int Register(unsigned opcode, unsigned nr_args) override {
    if (opcode != IORING_REGISTER_PROBE) return -EOPNOTSUPP;
    // The probe fills one entry per opcode the kernel knows, up to nr_args (at most 256).
    const unsigned n = std::min(nr_args, 256u);
    std::vector<uint8_t> probe(sizeof(io_uring_probe) + n * sizeof(io_uring_probe_op), 0);
    return io_uring_register(static_cast<unsigned>(ring_.ring_fd), IORING_REGISTER_PROBE,
                             probe.data(), n);
  }

 private:
  // At most one io_uring_enter, waiting for `min_wait` completions at once (min_complete), never
  // one wait per completion; then the completions are taken from the ring without system calls.
  int Collect(AsyncCompletion* out, int max, int min_wait) {
    unsigned want = static_cast<unsigned>(std::max(0, std::min(min_wait, max)));
    // Never more than the kernel can still post: a wait for a completion of a request that was
    // never submitted would never return.
    want = std::min(want, submitted_ > collected_ ? submitted_ - collected_ : 0u);
    int r = 0;
    if (want > 0 && io_uring_cq_ready(&ring_) < want) {
      io_uring_cqe* cqe = nullptr;
      do {
        r = io_uring_wait_cqe_nr(&ring_, &cqe, want);
      } while (r == -EINTR);
    }
    if (r < 0) return r;
    return Drain(out, max);
  }
  // The completions the ring holds, read from its memory: never a system call (liburing's
  // io_uring_peek_cqe enters the kernel with GETEVENTS when it finds none and the ring flags ask
  // for a flush, a call the original did not make; the next recorded waiting call flushes).
  int Drain(AsyncCompletion* out, int max) {
    int got = 0;
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      if (got >= max) break;
      out[got].token = io_uring_cqe_get_data64(cqe);
      out[got].res = cqe->res;
      got++;
    }
    io_uring_cq_advance(&ring_, static_cast<unsigned>(got));
    collected_ += static_cast<unsigned>(got);
    return got;
  }
  // Makes the queued entries visible to the kernel without entering it (what liburing's submit
  // does before its io_uring_enter); returns how many the kernel has not taken yet.
  unsigned PublishQueued() {
    io_uring_sq* sq = &ring_.sq;
    const unsigned tail = sq->sqe_tail;
    published_ += queued_;
    queued_ = 0;
    if (sq->sqe_head != tail) {
      sq->sqe_head = tail;
      io_uring_smp_store_release(sq->ktail, tail);
    }
    return io_uring_sq_ready(&ring_);
  }

  io_uring ring_{};
  bool ready_ = false;
  unsigned queued_ = 0;
  // Requests the kernel took and completions collected: their difference bounds a wait made
  // with liburing (Collect). Entries made visible to the kernel: less collected_, they bound a
  // wait made without the lock (ArmWait), as the kernel may be taking them meanwhile.
  unsigned submitted_ = 0, collected_ = 0, published_ = 0;
  std::vector<std::vector<iovec>> sqe_iovs_;  // by SQE slot: the iovecs of its request
};

class LibaioEngine final : public AsyncEngine {
 public:
  ~LibaioEngine() override {
    if (ctx_) io_destroy(ctx_);
  }
  Status Init(unsigned depth) {
    depth_ = depth < 1 ? 1 : depth;
    int r = io_setup(static_cast<int>(depth_), &ctx_);
    if (r < 0) return Status::FromErrno(-r, "io_setup");
    slots_.resize(depth_ * 2);
    // Sized once: a wait without the lock reads the token of a slot in flight.
    tokens_.resize(slots_.size());
    for (size_t i = 0; i < slots_.size(); i++) free_.push_back(i);
    return Status::Ok();
  }
  const char* name() const override { return "libaio"; }
  bool Queue(const AsyncRequest& req) override {
    if (free_.empty() || inflight_ + pending_.size() >= depth_) return false;
    size_t i = free_.back();
    free_.pop_back();
    Slot& s = slots_[i];
    s.used = true;
    BuildIovecs(req, &s.iovs);
    const auto iovcnt = static_cast<int>(s.iovs.size());
    iocb* cb = &s.cb;
    switch (Classify(req)) {
      case Issue::kRead: io_prep_pread(cb, req.fd, req.buf, req.len, static_cast<long long>(req.offset)); break;
      case Issue::kWrite: io_prep_pwrite(cb, req.fd, req.buf, req.len, static_cast<long long>(req.offset)); break;
      case Issue::kReadv: io_prep_preadv(cb, req.fd, s.iovs.data(), iovcnt, static_cast<long long>(req.offset)); break;
      case Issue::kWritev: io_prep_pwritev(cb, req.fd, s.iovs.data(), iovcnt, static_cast<long long>(req.offset)); break;
      case Issue::kFsync: io_prep_fsync(cb, req.fd); break;
      case Issue::kFdsync: io_prep_fdsync(cb, req.fd); break;
      default: io_prep_fsync(cb, req.fd); break;
    }
    cb->aio_rw_flags = req.rw_flags;
    cb->data = reinterpret_cast<void*>(i);
    tokens_[i] = req.token;
    pending_.push_back(cb);
    return true;
  }
  int Flush() override {
    if (pending_.empty()) return 0;
    int r = io_submit(ctx_, static_cast<long>(pending_.size()), pending_.data());
    if (r > 0) {
      inflight_ += static_cast<unsigned>(r);
      pending_.erase(pending_.begin(), pending_.begin() + r);
    }
    if (r < 0) {
      for (iocb* cb : pending_) Release(reinterpret_cast<size_t>(cb->data));
      pending_.clear();
    }
    return r;
  }
  int Reap(AsyncCompletion* out, int max, int min_wait) override {
    return Collect(out, max, min_wait);
  }
  unsigned queued() const override { return static_cast<unsigned>(pending_.size()); }

  // A recorded io_getevents(ctx, min_nr, nr) (backend.h): always one system call, waiting for
  // no more than the requests in flight, made without the lock (the kernel's completion ring
  // is taken under the kernel's own lock; meanwhile nothing reaps it from user space).
  void ArmWait(AsyncWait* w, unsigned min_complete, bool submit) override {
    if (submit) Flush();
    w->to_submit = 0;
    w->want = std::min(min_complete, inflight_);
    waiting_++;
  }
  int BlockWait(AsyncWait* w, uint64_t timeout_ns) override {
    const bool call = w->call;
    w->call = false;
    w->taken = 0;
    if (!call && w->want == 0) return w->result = 0;
    io_event ev[AsyncWait::kMaxTaken];
    timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000ull),
                static_cast<long>(timeout_ns % 1'000'000'000ull)};
    const long max = std::clamp(w->max, 1, AsyncWait::kMaxTaken);
    const long r = syscall(SYS_io_getevents, ctx_, static_cast<long>(w->want), max, ev,
                           w->want > 0 ? &ts : nullptr);
    if (r < 0) return w->result = -errno;
    for (long i = 0; i < r; i++) {
      const size_t slot = reinterpret_cast<size_t>(ev[i].data);
      const uint64_t token = slot < tokens_.size() ? tokens_[slot] : UINT64_MAX;
      w->completions[i] = AsyncCompletion{token, static_cast<long>(ev[i].res),
                                          static_cast<uint32_t>(slot)};
    }
    w->taken = static_cast<int>(r);
    // The call ended at its timeout with fewer than it waited for.
    return w->result = r < static_cast<long>(w->want) ? -ETIME : static_cast<int>(r);
  }
  int FinishWait(AsyncWait* w, AsyncCompletion* out, int max) override {
    waiting_--;
    const int n = std::min(w->taken, max);
    for (int i = 0; i < n; i++) {
      out[i] = w->completions[i];
      if (out[i].slot < slots_.size()) {
        Release(out[i].slot);
        inflight_--;
      }
    }
    w->taken = 0;
    return n;
  }

 private:
  int Collect(AsyncCompletion* out, int max, int min_wait) {
    if (max <= 0) return 0;
    // Never more than the requests in flight: a wait for more would never return.
    min_wait = std::min(min_wait, static_cast<int>(std::min<unsigned>(inflight_, INT32_MAX)));
    std::vector<io_event> ev(static_cast<size_t>(max));
    int r;
    if (min_wait <= 0) {
      // A poll for what has completed: taken from the completion ring the kernel maps into user
      // space, as fio's userspace_reap does, never with io_getevents: the original made no such
      // call, so a recording of the replay must not show one. Not while another thread waits in
      // io_getevents: the kernel moves the ring's head under a lock user space does not take.
      r = waiting_ > 0 ? 0 : UserReap(ev.data(), max);
    } else {
      do {
        r = io_getevents(ctx_, std::max(min_wait, 0), max, ev.data(), nullptr);
      } while (r == -EINTR);
    }
    if (r < 0) return r;
    for (int i = 0; i < r; i++) {
      size_t slot = reinterpret_cast<size_t>(ev[i].data);
      out[i].token = tokens_[slot];
      out[i].res = static_cast<long>(ev[i].res);
      Release(slot);
      inflight_--;
    }
    return r;
  }
  // The kernel's AIO completion ring (fs/aio.c struct aio_ring), mapped at the context address.
  struct AioRing {
    unsigned id, nr, head, tail, magic, compat_features, incompat_features, header_length;
    io_event events[];
  };
  static constexpr unsigned kAioRingMagic = 0xa10a10a1;
  int UserReap(io_event* ev, int max) {
    auto* ring = reinterpret_cast<AioRing*>(ctx_);
    if (ring == nullptr || ring->magic != kAioRingMagic || ring->nr == 0) return 0;
    int got = 0;
    while (got < max) {
      unsigned head = __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE);
      unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
      if (head == tail) break;
      ev[got++] = ring->events[head % ring->nr];
      __atomic_store_n(&ring->head, (head + 1) % ring->nr, __ATOMIC_RELEASE);
    }
    return got;
  }
  void Release(size_t i) {
    slots_[i].used = false;
    free_.push_back(i);
  }
  io_context_t ctx_ = nullptr;
  unsigned depth_ = 1, inflight_ = 0;
  unsigned waiting_ = 0;  // waits between ArmWait and FinishWait (io_getevents without the lock)
  std::vector<Slot> slots_;
  std::vector<size_t> free_;
  std::vector<uint64_t> tokens_;
  std::vector<iocb*> pending_;
};

// Executes requests synchronously at Flush (for --async sync: the recorded batching is kept,
// the concurrency is not).
class SyncAsyncEngine final : public AsyncEngine {
 public:
  const char* name() const override { return "sync"; }
  bool Queue(const AsyncRequest& req) override {
    pending_.push_back(req);
    return true;
  }
  int Flush() override {
    int n = 0;
    for (const auto& r : pending_) {
      long res;
      switch (Classify(r)) {
        case Issue::kRead:
          res = pread(r.fd, r.buf, r.len, static_cast<off_t>(r.offset));
          break;
        case Issue::kWrite:
          res = pwrite(r.fd, r.buf, r.len, static_cast<off_t>(r.offset));
          break;
        case Issue::kReadv:
          BuildIovecs(r, &iovs_);
          res = preadv(r.fd, iovs_.data(), static_cast<int>(iovs_.size()),
                       static_cast<off_t>(r.offset));
          break;
        case Issue::kWritev:
          BuildIovecs(r, &iovs_);
          res = pwritev(r.fd, iovs_.data(), static_cast<int>(iovs_.size()),
                        static_cast<off_t>(r.offset));
          break;
        case Issue::kFsync: res = fsync(r.fd); break;
        case Issue::kFdsync: res = fdatasync(r.fd); break;
        default: res = 0; break;
      }
      done_.push_back(AsyncCompletion{r.token, res < 0 ? -static_cast<int64_t>(errno) : res});
      n++;
    }
    pending_.clear();
    return n;
  }
  int Reap(AsyncCompletion* out, int max, int) override {
    int got = 0;
    while (got < max && !done_.empty()) {
      out[got++] = done_.front();
      done_.pop_front();
    }
    return got;
  }
  unsigned queued() const override { return static_cast<unsigned>(pending_.size()); }

 private:
  std::vector<AsyncRequest> pending_;
  std::deque<AsyncCompletion> done_;
  std::vector<iovec> iovs_;
};

class NullAsyncEngine final : public AsyncEngine {
 public:
  const char* name() const override { return "null"; }
  bool Queue(const AsyncRequest& req) override {
    pending_.push_back(req);
    return true;
  }
  int Flush() override {
    int n = static_cast<int>(pending_.size());
    for (const auto& r : pending_) done_.push_back(AsyncCompletion{r.token, r.recorded});
    pending_.clear();
    return n;
  }
  int Reap(AsyncCompletion* out, int max, int) override {
    int got = 0;
    while (got < max && !done_.empty()) {
      out[got++] = done_.front();
      done_.pop_front();
    }
    return got;
  }
  unsigned queued() const override { return static_cast<unsigned>(pending_.size()); }

 private:
  std::vector<AsyncRequest> pending_;
  std::deque<AsyncCompletion> done_;
};

}  // namespace

void InstallWaitWakeup() { InstallWaitAlarmHandler(); }

void WakeWaiter(pid_t tid) {
  if (tid > 0) syscall(SYS_tgkill, getpid(), tid, WaitAlarmSignal());
}

Result<std::unique_ptr<AsyncEngine>> MakeUringEngine(unsigned depth) {
  auto e = std::make_unique<UringEngine>();
  IOTWIN_RETURN_IF_ERROR(e->Init(depth));
  return std::unique_ptr<AsyncEngine>(std::move(e));
}
Result<std::unique_ptr<AsyncEngine>> MakeLibaioEngine(unsigned depth) {
  auto e = std::make_unique<LibaioEngine>();
  IOTWIN_RETURN_IF_ERROR(e->Init(depth));
  return std::unique_ptr<AsyncEngine>(std::move(e));
}
std::unique_ptr<AsyncEngine> MakeSyncAsyncEngine() { return std::make_unique<SyncAsyncEngine>(); }
std::unique_ptr<AsyncEngine> MakeNullAsyncEngine() { return std::make_unique<NullAsyncEngine>(); }

}  // namespace iotwin::replay
