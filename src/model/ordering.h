// Resource-oriented ordering between threads (ARTC: Weiss et al., "ROOT: Replaying
// Multithreaded Traces with Resource-Oriented Ordering", SOSP'13).
//
// Ops are presented in global recorded order (start time, then file order). Each declares the
// resources it touches; an op depends on the earlier ops of *other* threads it conflicts with:
//   - a shared use (Read) depends on the last exclusive use (Write) of the resource;
//   - an exclusive use depends on the last exclusive use and every shared use since;
//   - byte ranges of a file: a write depends on earlier overlapping writes, a read on earlier
//     overlapping writes (read-after-write: the data and the file size it sees).
// A conflict produces a dependency only when the earlier op had completed before the later one
// started in the trace: ops that overlapped in time were concurrent in the original, so their
// order was not fixed and replay leaves them free. Program order within a thread is implicit.
//
// Descriptor numbers are the exception (kFd resources): a recorded fd number is a resource whose
// lifetime is open..close, and the kernel fixes the order of the ops on it whatever their
// timing: a number is taken and freed at the start of the call (an open gets N as soon as a
// close in another thread has released it, while that close may still be returning), and a use
// holds the file it looked up. So every op that uses, creates or retires an instance of a number
// is ordered after the op that created that instance and before the op that retires it, across
// threads, even when they overlapped in time: ops are presented in start order, which is the
// order in which the kernel looked the numbers up, so these edges point backwards too.
//
// Names and file sizes are ordered the same way (kPath, kSize): the kernel serialises the calls
// on a name under its directory's lock and the calls that read or move a file's end under the
// inode's, so their outcome (mkdir's 0 or EEXIST, unlink's 0 or ENOENT, an O_EXCL open, the
// offset of an append, what lseek(SEEK_END) returns) is fixed by the order they took it in,
// however they overlapped in time. The model presents such racing calls in that order (the
// trace's results tell it when the recorded start order is not it: ReorderNameRaces), and a
// conflict on these resources is an edge whatever the timing.
// Every dependency points backwards in the global order, so the graph is acyclic and replay
// cannot deadlock on it.
//
// Dependencies are reduced as they are emitted: per (waiting thread, awaited thread) only a wait
// on a later op than any earlier wait of the same thread is kept.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "model/dependency.h"

namespace iotwin::model {

// Resource identities: a tag in the top byte, an id below.
// kPosition: the file position of an open file description, shared by dup'ed descriptors and
// across fork: every op that reads or moves it (read, write, lseek, ...) uses it exclusively.
// kLock: the locks of a file (fcntl record locks, OFD locks, leases, flock): every lock op uses
// it through UseInOrder, so lock, unlock and refused lock ops of different threads and processes
// replay in their recorded order.
// kSize: the end of a file. What a call sees of it (lseek SEEK_END/SEEK_DATA/SEEK_HOLE, an
// O_APPEND write, which also moves it) is an exclusive use; a write that extends the file is a
// shared use, so that extending writes of several threads stay free of one another while a
// reader of the size follows those that started before it and precedes those after it.
enum class ResourceTag : uint8_t {
  kPath = 1, kFd = 2, kMapping = 3, kAsyncCtx = 4, kFile = 5, kPosition = 6, kLock = 7,
  kSize = 8
};
inline uint64_t ResourceKey(ResourceTag tag, uint64_t id) {
  return (static_cast<uint64_t>(tag) << 56) | (id & ((1ull << 56) - 1));
}
// Distinct for every descriptor number of the first 2^24 processes.
inline uint64_t FdResource(uint32_t process, int32_t fd) {
  return ResourceKey(ResourceTag::kFd,
                     (static_cast<uint64_t>(process) << 32) | static_cast<uint32_t>(fd));
}

class DependencyTracker {
 public:
  // Starts the declarations of one op: thread index, its index in the thread's stream, and its
  // recorded start and completion (UINT64_MAX when it never completed).
  void Begin(uint32_t thread, uint32_t index, uint64_t start, uint64_t end);
  void Read(uint64_t resource);
  void Write(uint64_t resource);
  void ReadRange(uint64_t file, uint64_t begin, uint64_t end);
  void WriteRange(uint64_t file, uint64_t begin, uint64_t end);
  // A use ordered after the latest use by each other thread that had completed before this op
  // started, not only after the last use: for resources whose users wait in the kernel for one
  // another (locks), the last user is often a waiter that overlapped this op, while the use
  // before it in its thread (a refused attempt, an earlier lock) still fixes the order.
  void UseInOrder(uint64_t resource);
  // An explicit happens-before (thread creation: the new thread's first op follows the creating
  // op whatever the timing).
  void After(uint32_t thread, uint32_t index);
  // Ends the op: appends its reduced dependencies to `out`, returns how many.
  uint32_t End(std::vector<Dep>* out);

 private:
  struct Access {
    uint32_t thread = kNone;
    uint32_t index = 0;
    uint64_t end = 0;
  };
  struct ResourceState {
    Access last_write;
    std::vector<Access> readers;  // one per thread: the latest shared use since last_write
  };
  struct Segment {
    uint64_t end;
    Access writer;
  };
  // `timed`: keep the edge only if `a` completed before the current op started (see above);
  // descriptor, name and size resources pass false.
  void Need(const Access& a, bool timed);
  void Need(uint32_t thread, uint32_t index);

  Access cur_;
  uint64_t cur_start_ = 0;
  std::vector<Dep> pending_;
  std::unordered_map<uint64_t, ResourceState> resources_;
  std::unordered_map<uint64_t, std::map<uint64_t, Segment>> ranges_;
  // UseInOrder: per resource, each thread's latest use and the one before it.
  struct ThreadUses {
    Access latest, previous;
  };
  std::unordered_map<uint64_t, std::vector<ThreadUses>> in_order_;
  // waited_[thread][other] = highest `count` already awaited by an earlier op of `thread`.
  std::unordered_map<uint32_t, std::unordered_map<uint32_t, uint32_t>> waited_;
};

}  // namespace iotwin::model
