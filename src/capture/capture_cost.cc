#include "capture/capture_cost.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/fd.h"

namespace iotwin::capture {
namespace {

// Short turns, many of them (300 calls of about 1-3 us: under a millisecond each), so that on a
// busy machine some turn of each kind runs undisturbed and the fastest stands for the call's
// cost; children of both kinds take turns after the attach, so that a change in the machine's
// load between the halves does not count as the capture's. A traced child's records (some
// 300 KiB) are consumed before the next child runs, so that the smallest ring (1 MiB) holds them.
// Some 40 ms of a recording's start.
constexpr uint64_t kCalls = 300;
constexpr uint64_t kTurns = 10;
constexpr int kTracedChildren = 3;  // untraced ones between them, after the attach
constexpr size_t kPage = 4096;

uint64_t MonoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The child: waits for the go, then times its turns of one-page preads and reports each (ns).
[[noreturn]] void RunTurns(int memfd, int go_fd, int result_fd) {
  char go = 0;
  if (!ReadAll(go_fd, &go, 1)) _exit(1);
  alignas(64) static char buf[kPage];
  for (uint64_t t = 0; t < kTurns; t++) {
    const uint64_t start = MonoNs();
    for (uint64_t i = 0; i < kCalls; i++) {
      if (pread(memfd, buf, kPage, 0) != static_cast<ssize_t>(kPage)) _exit(1);
    }
    const uint64_t ns = MonoNs() - start;
    if (!WriteAll(result_fd, &ns, sizeof ns)) _exit(1);
  }
  _exit(0);
}

int NoRecord(void*, void*, size_t) { return 0; }

}  // namespace

nlohmann::json CaptureCost::ToJson() const {
  return {{"per_call_ns", per_call_ns},
          {"untraced_call_ns", untraced_call_ns},
          {"traced_call_ns", traced_call_ns},
          {"calls", calls},
          {"turns", turns},
          {"method",
           "fastest turn of one-page preads of a cached memfd, traced minus untraced"}};
}

CaptureCostProbe::CaptureCostProbe() {
  memfd_ = memfd_create("iotwin-capture-cost", MFD_CLOEXEC);
  if (memfd_ >= 0) {
    char page[kPage];
    memset(page, 'c', sizeof page);
    if (pwrite(memfd_, page, sizeof page, 0) != static_cast<ssize_t>(sizeof page)) {
      close(memfd_);
      memfd_ = -1;
    }
  }
}

CaptureCostProbe::~CaptureCostProbe() {
  if (memfd_ >= 0) close(memfd_);
}

Result<uint64_t> CaptureCostProbe::FastestTurn(const std::function<Status(pid_t)>& trace) {
  if (memfd_ < 0) return Status::Io("memfd for the capture-cost calibration: unavailable");
  int go[2], result[2];
  if (pipe2(go, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (pipe2(result, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd result_r(result[0]), result_w(result[1]);
  pid_t child = fork();
  if (child < 0) return Status::FromErrno(errno, "fork");
  if (child == 0) RunTurns(memfd_, go_r.get(), result_w.get());
  result_w = UniqueFd();
  Status traced = trace ? trace(child) : Status::Ok();
  const char one = 1;
  uint64_t fastest = UINT64_MAX;
  if (traced.ok() && WriteAll(go_w.get(), &one, 1)) {
    for (uint64_t t = 0; t < kTurns; t++) {
      uint64_t ns = 0;
      if (!ReadAll(result_r.get(), &ns, sizeof ns)) break;
      fastest = std::min(fastest, ns / kCalls);
    }
  }
  go_w = UniqueFd();  // a child still waiting for the go sees end of file and exits
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!traced.ok()) return traced;
  if (fastest == UINT64_MAX || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Io("the capture-cost calibration's child failed");
  }
  return fastest;
}

Status CaptureCostProbe::Untraced() {
  IOTWIN_ASSIGN_OR_RETURN(untraced_ns_, FastestTurn(nullptr));
  return Status::Ok();
}

Result<CaptureCost> CaptureCostProbe::Traced(const std::function<Status(pid_t)>& trace,
                                             int ring_fd) {
  if (untraced_ns_ == 0) return Status::Internal("capture cost: no untraced turn measured");
  // The calibration's records are no part of the trace: consumed and dropped after each traced
  // child, whether it succeeded or not.
  ring_buffer* ring = ring_buffer__new(ring_fd, NoRecord, nullptr, nullptr);
  if (!ring) return Status::FromErrno(errno, "capture cost: opening the ring buffer");
  Status st = Status::Ok();
  uint64_t traced_ns = UINT64_MAX;
  for (int i = 0; i < kTracedChildren && st.ok(); i++) {
    if (i > 0) {
      // Programs attached, the process outside the traced set: their early exit costs tens of ns.
      Result<uint64_t> untraced = FastestTurn(nullptr);
      if (!untraced.ok()) st = untraced.status();
      else untraced_ns_ = std::min(untraced_ns_, *untraced);
    }
    if (!st.ok()) break;
    Result<uint64_t> traced = FastestTurn(trace);
    ring_buffer__consume(ring);
    if (!traced.ok()) st = traced.status();
    else traced_ns = std::min(traced_ns, *traced);
  }
  ring_buffer__free(ring);
  if (!st.ok()) return st;
  CaptureCost c;
  c.untraced_call_ns = untraced_ns_;
  c.traced_call_ns = traced_ns;
  c.per_call_ns = traced_ns > untraced_ns_ ? traced_ns - untraced_ns_ : 0;
  c.calls = kCalls;
  c.turns = kTracedChildren * kTurns;  // traced ones
  return c;
}

}  // namespace iotwin::capture
