#include "replay/interrupt.h"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace iotwin::replay {
namespace {

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGHUP);
  return s;
}

const char* StopSignalName(int sig) {
  switch (sig) {
    case SIGINT: return "interrupted by SIGINT";
    case SIGTERM: return "interrupted by SIGTERM";
    default: return "interrupted by SIGHUP";
  }
}

}  // namespace

InterruptWatcher::InterruptWatcher(std::function<void(const char*)> stop)
    : stop_(std::move(stop)), signals_(StopSignals()) {
  pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
  thread_ = std::thread([this] { Run(); });
}

InterruptWatcher::~InterruptWatcher() {
  done_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  // A signal that came after the watcher's last look would kill the process when unblocked.
  const timespec zero{0, 0};
  for (int sig; (sig = sigtimedwait(&signals_, nullptr, &zero)) > 0;) Take(sig);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void InterruptWatcher::UnblockInChild() {
  const sigset_t s = StopSignals();
  // The caller is a child of a multi-threaded process before exec: sigprocmask is
  // async-signal-safe.
  sigprocmask(SIG_UNBLOCK, &s, nullptr);
}

void InterruptWatcher::Run() {
  // Looks every 100 ms whether the replay is over: sigtimedwait is the one wait that takes a
  // blocked signal without a handler.
  const timespec slice{0, 100'000'000};
  while (!done_.load(std::memory_order_acquire)) {
    const int sig = sigtimedwait(&signals_, nullptr, &slice);
    if (sig > 0) Take(sig);
  }
}

void InterruptWatcher::Take(int sig) {
  int none = 0;
  if (signal_.compare_exchange_strong(none, sig, std::memory_order_acq_rel)) {
    stop_(StopSignalName(sig));
    return;
  }
  // A second signal ends the process at once, as the user asked twice.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
}

}  // namespace iotwin::replay
