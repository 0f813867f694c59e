// InterruptWatcher: SIGINT, SIGTERM and SIGHUP stop a replay the way --strict does, so that an
// interrupted replay still writes its summary, --json and --record outputs for what ran, and
// leaves none of its temporary files behind.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace iotwin::replay {

class InterruptWatcher {
 public:
  // Blocks the three signals in the calling thread, so that every thread it creates afterwards
  // (the replay's workers) inherits the mask, and takes them on a thread of its own, which
  // calls `stop` with the signal's name. Construct before the workers exist.
  explicit InterruptWatcher(std::function<void(const char* why)> stop);
  // Takes any signal still pending, then restores the caller's mask.
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // The signal that stopped the replay, 0 if none.
  int signal() const { return signal_.load(std::memory_order_acquire); }
  // The mask a child process should exec with (the signals unblocked).
  static void UnblockInChild();

 private:
  void Run();
  void Take(int sig);

  std::function<void(const char*)> stop_;
  sigset_t signals_{};
  sigset_t old_mask_{};
  std::atomic<bool> done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace iotwin::replay
