#include "mixed.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "rng.h"

namespace iotwin::workload {

namespace {

// The journal writer: sequential pwrite64s of write_size, fsync every fsync_every writes.
Status WriteJournal(const MixedOptions& o, const std::string& path, uint64_t seed, ThreadIo& io,
                    AlignedBuffer& buf) {
  FillPattern(Mix64(seed ^ 0x6a6f75726e616cULL), 0, buf.data(), o.write_size);
  const long fd = io.OpenAt(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(fd, "create", path);
  Status st;
  for (uint64_t i = 0; st.ok() && i < o.writes; i++) {
    const long r = io.Pwrite(static_cast<int>(fd), buf.data(), o.write_size, i * o.write_size);
    if (r < 0) {
      st = SyscallError(r, "pwrite64", path);
    } else if (static_cast<uint64_t>(r) != o.write_size) {
      st = Status::Io("{}: short write", path);
    } else if (o.fsync_every > 0 && (i + 1) % o.fsync_every == 0) {
      const long s = io.Fsync(static_cast<int>(fd));
      if (s < 0) st = SyscallError(s, "fsync", path);
    }
  }
  const long c = io.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", path);
  return st;
}

}  // namespace

Result<ScenarioResult> RunMixed(const MixedOptions& o, RunContext& ctx) {
  KvOptions kv = o.kv;
  kv.io = "buffered";
  kv.direct = false;
  IOTWIN_RETURN_IF_ERROR(ValidateKv(kv));
  ModelOptions model = o.model;
  model.mode = "pread";
  model.prepare = true;
  IOTWIN_RETURN_IF_ERROR(ValidateModel(model));
  if (o.write_size == 0 || o.write_size > 64 * kMiB)
    return BadOption("--write-size must be in 1..64 MiB");

  const CommonOptions& c = ctx.common();
  ThreadIo& main = ctx.main();
  IOTWIN_ASSIGN_OR_RETURN(std::vector<ShardPlan> plan,
                          PlanModel(model.shards, model.shard_mb * kMiB, model.hidden));
  const KvStore store(kv, c.dir, c.seed);
  const ModelFiles files(model, c.dir, c.seed, plan);
  const std::vector<uint64_t> gets = store.GetSequence(c.seed);
  const std::string journal = c.dir + "/mixed/journal";

  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir));
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(store.kv_dir()));
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(files.model_dir()));
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir + "/mixed"));

  main.Begin("mixed.setup");
  IOTWIN_RETURN_IF_ERROR(ctx.Parallel(1, 4096, [&](int, ThreadIo& io) -> Status {
    AlignedBuffer buf(ModelFiles::kPrepareWriteSize);
    IOTWIN_ASSIGN_OR_RETURN(auto worker, KvStore::Worker::Create(store, io));
    for (uint64_t i = 0; i < store.chunks(); i++) IOTWIN_RETURN_IF_ERROR(worker->Put(i));
    for (int s = 0; s < files.shards(); s++) IOTWIN_RETURN_IF_ERROR(files.Prepare(io, s, buf));
    return Status::Ok();
  }));
  main.End("mixed.setup");

  std::vector<uint64_t> sizes;
  for (int s = 0; s < files.shards(); s++) {
    struct stat st;
    const long r = main.Stat(files.path(s), &st);
    if (r < 0) return SyscallError(r, "stat", files.path(s));
    sizes.push_back(static_cast<uint64_t>(st.st_size));
  }
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  const size_t reserve = std::max({gets.size() * store.LogEntriesPerChunk(),
                                   files.LogEntriesPerShard(largest) * sizes.size(),
                                   static_cast<size_t>(2 * o.writes)}) +
                         64;

  main.Begin("mixed.run");
  IOTWIN_RETURN_IF_ERROR(ctx.Parallel(3, reserve, [&](int role, ThreadIo& io) -> Status {
    if (role == 0) {
      IOTWIN_ASSIGN_OR_RETURN(auto worker, KvStore::Worker::Create(store, io));
      io.Begin("kv.get");
      for (uint64_t chunk : gets) IOTWIN_RETURN_IF_ERROR(worker->Get(chunk));
      io.End("kv.get");
    } else if (role == 1) {
      IOTWIN_ASSIGN_OR_RETURN(auto loader, ModelFiles::Loader::Create(files, io, largest));
      io.Begin("model.load");
      for (int s = 0; s < files.shards(); s++) {
        io.Begin("model.shard");
        const Status st = loader->Load(s, sizes[static_cast<size_t>(s)]);
        io.End("model.shard");
        IOTWIN_RETURN_IF_ERROR(st);
      }
      io.End("model.load");
    } else {
      AlignedBuffer buf(static_cast<size_t>(o.write_size));
      io.Begin("mixed.write");
      IOTWIN_RETURN_IF_ERROR(WriteJournal(o, journal, c.seed, io, buf));
      io.End("mixed.write");
    }
    return Status::Ok();
  }));
  main.End("mixed.run");

  ScenarioResult result;
  result.files = store.chunks() + static_cast<uint64_t>(files.shards()) + 1;
  result.extra["gets"] = gets.size();
  result.extra["chunk_bytes"] = kv.ChunkBytes();
  result.extra["shards"] = files.shards();
  result.extra["writes"] = o.writes;
  return result;
}

}  // namespace iotwin::workload
