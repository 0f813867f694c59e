// iotwin::Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with the
// capability attributes clang's thread-safety analysis needs (base/thread_annotations.h), so
// that GUARDED_BY / REQUIRES on the data and functions they protect are checked under clang
// (-Wthread-safety). libstdc++'s std::mutex and std::lock_guard carry none.
#pragma once

#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.h"

namespace iotwin {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // True when the lock was free and is now held.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Tag for MutexLock: the lock is already held (a TryLock that succeeded); the scope releases it.
struct AdoptLock {};
inline constexpr AdoptLock kAdoptLock{};

// Holds `mu` for a scope. Unlock() / Lock() let a scope drop the lock around a wait and take it
// again; the destructor releases it only when held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(Mutex* mu, AdoptLock) REQUIRES(mu) : mu_(mu) {}
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable waited on with a Mutex held (std::condition_variable underneath, on the
// Mutex's std::mutex). Wait has no predicate form: the caller loops on its condition, which
// reads guarded data the analysis then sees read under the lock (a lambda would not be).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu` while it waits, holds it again when it returns (possibly spuriously).
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's scope releases it
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace iotwin
