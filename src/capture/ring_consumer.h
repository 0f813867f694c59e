// RingConsumer: moves records from the BPF ring buffer into the trace writer.
//
// Finished records (SYSCALL, PROC, ASYNC_IO) are appended byte for byte; short syscall records
// (syscall_wire.h) become the full SYSCALL record with the defaults they leave out; wire
// records with strings (paths, exec filenames, marker lines) are interned first, and vectored
// calls and async requests become a SYSCALL or ASYNC_IO record followed by its IOVEC record. Nothing is formatted: the consumer competes with
// the traced workload for CPU, so it only copies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "base/status.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

struct ring_buffer;

namespace iotwin::capture {

struct ConsumerCounts {
  std::array<uint64_t, IOT_REC_MAX + 1> records{};  // appended, by IOT_REC_* type
  uint64_t ring_records = 0;                        // records taken from the ring
  uint64_t ring_bytes = 0;
  uint64_t malformed = 0;    // ring records that failed validation (never expected)
  uint64_t bad_markers = 0;  // marker writes that do not follow the protocol
};

class RingConsumer {
 public:
  // `writer` must outlive the consumer.
  static Result<std::unique_ptr<RingConsumer>> Create(int ring_fd, TraceWriter* writer);
  // A consumer without a ring: only Handle() works (unit tests feed it records).
  explicit RingConsumer(TraceWriter* writer) : writer_(writer) {}
  ~RingConsumer();
  RingConsumer(const RingConsumer&) = delete;
  RingConsumer& operator=(const RingConsumer&) = delete;

  // Waits up to `timeout_ms` for a wake-up, then consumes everything queued (records that
  // arrived without a wake-up included).
  Status Poll(int timeout_ms);
  // Consumes until the ring is empty.
  Status Drain();

  const ConsumerCounts& counts() const { return counts_; }

  // Hooks for other layers (the memory layer, memory_tracker.h): see every SYSCALL record after
  // it is appended; take ring records of wire types this consumer does not know.
  using SyscallObserver = std::function<void(const iot_syscall&)>;
  using WireHandler = std::function<Status(const uint8_t* data, size_t size)>;
  void SetSyscallObserver(SyscallObserver f) { syscall_observer_ = std::move(f); }
  void SetWireHandler(uint16_t type, WireHandler f) { wire_handlers_[type] = std::move(f); }

  // Converts one ring record (exposed for unit tests).
  Status Handle(const uint8_t* data, size_t size);

 private:
  static int OnRecord(void* ctx, void* data, size_t size);
  Status Append(const iot_rec_hdr* rec);
  Status HandleSyscallShort(const uint8_t* data, size_t size);
  Status HandleSyscallExt(const uint8_t* data, size_t size);
  Status HandleAsyncExt(const uint8_t* data, size_t size);
  Status AppendIovec(uint32_t tid, uint64_t ts, uint16_t count, const uint8_t* lens,
                     size_t captured);
  Status HandleExec(const uint8_t* data, size_t size);
  Status HandleIntent(const uint8_t* data, size_t size);

  TraceWriter* writer_;
  ring_buffer* ring_ = nullptr;
  ConsumerCounts counts_;
  Status error_;  // first error inside the libbpf callback
  SyscallObserver syscall_observer_;
  std::map<uint16_t, WireHandler> wire_handlers_;
};

}  // namespace iotwin::capture
