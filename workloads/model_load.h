// model-load: create safetensors weight shards, then load them the way real loaders do
// (safetensors mmap, plain preads, DeepSpeed-style O_DIRECT libaio blocks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "safetensors.h"

namespace iotwin::workload {

struct ModelOptions {
  bool prepare = false;       // create the shards, then load
  bool prepare_only = false;  // create the shards only
  int shards = 2;
  uint64_t shard_mb = 8;
  uint64_t hidden = 256;
  std::string mode = "mmap";  // mmap | pread | direct-async
  uint64_t io_size = 128 * kKiB;
  uint64_t block_mb = 16;
  unsigned qd = 8;
  bool drop_cache = false;
  bool verify = false;
};

Status ValidateModel(const ModelOptions& o);

// The shard files of a model directory and how to write and read them.
class ModelFiles {
 public:
  // `plan` is needed only to Prepare(); loading reads everything from the files' headers.
  ModelFiles(const ModelOptions& o, const std::string& dir, uint64_t seed,
             std::vector<ShardPlan> plan);
  int shards() const { return o_.shards; }
  const std::string& model_dir() const { return model_dir_; }
  std::string path(int s) const { return model_dir_ + "/" + ShardFileName(s + 1, shards()); }
  // Content key of shard s: byte k of the file's data region is pattern byte k of this key.
  uint64_t key(int s) const;
  const ModelOptions& options() const { return o_; }
  size_t LogEntriesPerShard(uint64_t file_size) const;

  // Writes shard s. `buf` (at least kPrepareWriteSize bytes) is the caller's, allocated before
  // its first operation so no allocator call lands among the logged ones.
  Status Prepare(ThreadIo& io, int s, AlignedBuffer& buf) const;
  static constexpr uint64_t kPrepareWriteSize = 1 * kMiB;

  // One loader thread: buffers, and the libaio context for direct-async.
  class Loader {
   public:
    static Result<std::unique_ptr<Loader>> Create(const ModelFiles& files, ThreadIo& io,
                                                  uint64_t largest_file);
    // Loads shard s (its size from the pre-flight stat) with the configured mode.
    Status Load(int s, uint64_t file_size);
    uint64_t pages_touched() const { return pages_touched_; }

   private:
    Loader(const ModelFiles& files, ThreadIo& io) : files_(files), io_(io) {}
    Result<ParsedHeader> ReadHeader(int fd, const std::string& path, uint64_t file_size);
    Status LoadPread(int fd, int s, const std::string& path, uint64_t file_size);
    Status LoadMmap(int fd, int s, const std::string& path, uint64_t file_size);
    Status LoadDirect(int fd, int s, const std::string& path, uint64_t file_size);
    Status VerifyData(int s, const std::string& path, uint64_t file_off, const uint8_t* p, size_t n,
                      uint64_t data_start) const;

    const ModelFiles& files_;
    ThreadIo& io_;
    AlignedBuffer buf_;
    std::unique_ptr<AsyncQueue> aio_;
    std::vector<AsyncRequest> reqs_;
    uint64_t pages_touched_ = 0;
  };

 private:
  ModelOptions o_;
  std::string model_dir_;
  uint64_t seed_;
  std::vector<ShardPlan> plan_;
};

Result<ScenarioResult> RunModelLoad(const ModelOptions& o, RunContext& ctx);

}  // namespace iotwin::workload
