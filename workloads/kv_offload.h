// kv-offload: LMCache-style KV-cache offload to local disk, one file per chunk of tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace iotwin::workload {

struct KvOptions {
  // Model shape: bytes per token = 2 (K and V) * layers * kv_heads * head_dim * dtype_bytes.
  uint64_t layers = 4;
  uint64_t kv_heads = 2;
  uint64_t head_dim = 64;
  uint64_t dtype_bytes = 2;
  uint64_t chunk_tokens = 256;  // LMCache chunk_size
  uint64_t chunks = 16;
  uint64_t gets = 32;
  std::string dist = "zipf";  // zipf | uniform
  double zipf_theta = 0.99;
  std::string io = "buffered";  // buffered | direct | uring
  bool direct = false;          // O_DIRECT (implied by --io direct; optional with uring)
  unsigned qd = 8;              // io_uring queue depth
  std::string phase = "both";   // put | get | both
  uint64_t io_size = 128 * kKiB;
  bool fsync = false;
  bool verify = false;
  // Model compute per chunk (prefill producing it before a put, decode consuming it after a get),
  // spent sleeping: the think time between a real engine's KV transfers.
  uint64_t compute_us = 0;

  uint64_t BytesPerToken() const { return 2 * layers * kv_heads * head_dim * dtype_bytes; }
  uint64_t ChunkBytes() const { return chunk_tokens * BytesPerToken(); }
  bool UseDirect() const { return direct || io == "direct"; }
};

Status ValidateKv(const KvOptions& o);

// The chunk files of one run: names and content keys from the seed (a chained prefix hash, as
// LMCache hashes a token prefix chunk by chunk).
class KvStore {
 public:
  KvStore(const KvOptions& o, const std::string& dir, uint64_t seed);
  uint64_t chunks() const { return hashes_.size(); }
  uint64_t hash(uint64_t i) const { return hashes_[i]; }
  const std::string& path(uint64_t i) const { return paths_[i]; }
  const std::string& kv_dir() const { return kv_dir_; }
  // The chunk indices read by the get phase, in order (same for any thread count).
  std::vector<uint64_t> GetSequence(uint64_t seed) const;

  // One worker's I/O engine: buffers and (for uring) the ring, created in the worker's thread.
  class Worker {
   public:
    static Result<std::unique_ptr<Worker>> Create(const KvStore& store, ThreadIo& io);
    Status Put(uint64_t chunk);
    Status Get(uint64_t chunk);

   private:
    Worker(const KvStore& store, ThreadIo& io) : store_(store), io_(io) {}
    Status Move(int fd, bool write, const std::string& path);

    const KvStore& store_;
    ThreadIo& io_;
    AlignedBuffer buf_;
    std::unique_ptr<AsyncQueue> queue_;
    std::vector<AsyncRequest> reqs_;
  };

  const KvOptions& options() const { return o_; }
  // Log entries one chunk transfer needs (for reserving the op log).
  size_t LogEntriesPerChunk() const;

 private:
  KvOptions o_;
  std::string kv_dir_;
  std::vector<uint64_t> hashes_;
  std::vector<std::string> paths_;
};

Result<ScenarioResult> RunKvOffload(const KvOptions& o, RunContext& ctx);

}  // namespace iotwin::workload
