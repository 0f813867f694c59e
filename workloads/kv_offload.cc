#include "kv_offload.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <time.h>

#include <algorithm>
#include <set>

#include "rng.h"

namespace iotwin::workload {
namespace {

// The model's compute between transfers: no I/O, no system call other than the sleep.
void Compute(uint64_t us) {
  if (us == 0) return;
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
  }
}

}  // namespace

Status ValidateKv(const KvOptions& o) {
  if (o.layers == 0 || o.kv_heads == 0 || o.head_dim == 0 || o.dtype_bytes == 0 ||
      o.chunk_tokens == 0) {
    return BadOption(
        "--layers, --kv-heads, --head-dim, --dtype-bytes and --chunk-tokens must be > 0");
  }
  // Bound each factor so the product cannot overflow, then the chunk size itself.
  for (uint64_t v : {o.layers, o.kv_heads, o.head_dim, o.dtype_bytes, o.chunk_tokens}) {
    if (v > (1u << 20)) return BadOption("model shape value {} is too large", v);
  }
  if (o.ChunkBytes() > 4 * 1024 * kMiB) {
    return BadOption("chunk of {} bytes is over the 4 GiB limit", o.ChunkBytes());
  }
  if (o.chunks == 0 || o.chunks > (1u << 24)) return BadOption("--chunks must be in 1..16777216");
  if (o.gets > (1u << 26)) return BadOption("--gets must be at most 67108864");
  if (o.compute_us > 10'000'000) return BadOption("--compute-us must be at most 10000000");
  if (o.io_size == 0) return BadOption("--io-size must be > 0");
  if (o.qd == 0 || o.qd > 4096) return BadOption("--qd must be in 1..4096");
  if (o.dist == "zipf" && !(o.zipf_theta >= 0 && o.zipf_theta <= 10)) {
    return BadOption("--zipf-theta must be in [0, 10]");
  }
  if (o.direct && o.io == "buffered") {
    return BadOption("--direct needs --io direct or --io uring (buffered means the page cache)");
  }
  if (o.UseDirect()) {
    if (o.io_size % kDirectAlign != 0) {
      return BadOption("O_DIRECT needs --io-size to be a multiple of {} (got {})", kDirectAlign,
                       o.io_size);
    }
    if (o.ChunkBytes() % kDirectAlign != 0) {
      return BadOption("O_DIRECT needs the chunk size ({} bytes) to be a multiple of {}",
                       o.ChunkBytes(), kDirectAlign);
    }
  }
  return Status::Ok();
}

KvStore::KvStore(const KvOptions& o, const std::string& dir, uint64_t seed)
    : o_(o), kv_dir_(dir + "/kv") {
  // Chained like LMCache's prefix hash: chunk i's key depends on every chunk before it.
  uint64_t h = Mix64(seed ^ 0x4c4d436163686500ULL);
  for (uint64_t i = 0; i < o.chunks; i++) {
    h = Mix64(h ^ Mix64(i + 1));
    hashes_.push_back(h);
    paths_.push_back(fmt::format("{}/{:016x}.kvchunk", kv_dir_, h));
  }
}

std::vector<uint64_t> KvStore::GetSequence(uint64_t seed) const {
  std::vector<uint64_t> seq;
  seq.reserve(o_.gets);
  Rng rng(seed, 0x6b76676574ULL);
  if (o_.dist == "uniform") {
    for (uint64_t i = 0; i < o_.gets; i++) seq.push_back(rng.Below(chunks()));
  } else {
    ZipfChooser zipf(chunks(), o_.zipf_theta, seed);
    for (uint64_t i = 0; i < o_.gets; i++) seq.push_back(zipf.Sample(rng));
  }
  return seq;
}

size_t KvStore::LogEntriesPerChunk() const {
  const uint64_t pieces = CeilDiv(o_.ChunkBytes(), o_.io_size);
  // open + close + fsync + per piece (request, and per batch an enter) + markers.
  return static_cast<size_t>(2 * pieces + 8);
}

Result<std::unique_ptr<KvStore::Worker>> KvStore::Worker::Create(const KvStore& store,
                                                                 ThreadIo& io) {
  std::unique_ptr<Worker> w(new Worker(store, io));
  w->buf_ = AlignedBuffer(store.o_.ChunkBytes());
  if (store.o_.io == "uring") {
    IOTWIN_ASSIGN_OR_RETURN(w->queue_, CreateUringQueue(io, store.o_.qd));
    w->reqs_.resize(store.o_.qd);
  }
  return w;
}

Status KvStore::Worker::Move(int fd, bool write, const std::string& path) {
  const KvOptions& o = store_.o_;
  const uint64_t total = o.ChunkBytes();
  if (!queue_) {
    for (uint64_t off = 0; off < total; off += o.io_size) {
      const size_t len = static_cast<size_t>(std::min(o.io_size, total - off));
      const long r = write ? io_.Pwrite(fd, buf_.data() + off, len, off)
                           : io_.Pread(fd, buf_.data() + off, len, off);
      if (r < 0) return SyscallError(r, write ? "pwrite64" : "pread64", path);
      if (static_cast<size_t>(r) != len) {
        return Status::Io("{}: short {} at offset {}: {} of {} bytes", path,
                          write ? "write" : "read", off, r, len);
      }
    }
    return Status::Ok();
  }
  // io_uring: batches of up to qd requests of io_size each.
  for (uint64_t off = 0; off < total;) {
    size_t n = 0;
    for (; n < reqs_.size() && off < total; n++) {
      AsyncRequest& q = reqs_[n];
      q.write = write;
      q.fd = fd;
      q.offset = off;
      q.len = static_cast<size_t>(std::min(o.io_size, total - off));
      q.buf = buf_.data() + off;
      q.res = 0;
      off += q.len;
    }
    IOTWIN_RETURN_IF_ERROR(queue_->Run(std::span(reqs_.data(), n)));
    for (size_t i = 0; i < n; i++) {
      if (reqs_[i].res < 0) {
        return SyscallError(static_cast<long>(reqs_[i].res),
                            write ? "io_uring write" : "io_uring read", path);
      }
      if (static_cast<size_t>(reqs_[i].res) != reqs_[i].len) {
        return Status::Io("{}: short io_uring {} at offset {}: {} of {} bytes", path,
                          write ? "write" : "read", reqs_[i].offset, reqs_[i].res, reqs_[i].len);
      }
    }
  }
  return Status::Ok();
}

Status KvStore::Worker::Put(uint64_t chunk) {
  const KvOptions& o = store_.o_;
  const std::string& path = store_.path(chunk);
  FillPattern(store_.hash(chunk), 0, buf_.data(), o.ChunkBytes());
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (o.UseDirect() ? O_DIRECT : 0);
  const long fd = io_.OpenAt(path, flags, 0644);
  if (fd < 0) return o.UseDirect() ? DirectOpenError(fd, path) : SyscallError(fd, "open", path);
  Status st = Move(static_cast<int>(fd), true, path);
  if (st.ok() && o.fsync) {
    const long r = io_.Fsync(static_cast<int>(fd));
    if (r < 0) st = SyscallError(r, "fsync", path);
  }
  const long c = io_.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", path);
  return st;
}

Status KvStore::Worker::Get(uint64_t chunk) {
  const KvOptions& o = store_.o_;
  const std::string& path = store_.path(chunk);
  const long fd = io_.OpenAt(path, O_RDONLY | O_CLOEXEC | (o.UseDirect() ? O_DIRECT : 0));
  if (fd == -ENOENT) {
    return Status::NotFound(
        "{}: no such KV chunk (run the put phase first with the same --seed "
        "and model shape)",
        path);
  }
  if (fd < 0) return o.UseDirect() ? DirectOpenError(fd, path) : SyscallError(fd, "open", path);
  Status st = Move(static_cast<int>(fd), false, path);
  const long c = io_.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", path);
  if (st.ok() && o.verify) {
    const long long bad = CheckPattern(store_.hash(chunk), 0, buf_.data(), o.ChunkBytes());
    if (bad >= 0)
      return Status::Corrupt("{}: content differs from what put wrote at byte {}", path, bad);
  }
  return st;
}

Result<ScenarioResult> RunKvOffload(const KvOptions& o, RunContext& ctx) {
  IOTWIN_RETURN_IF_ERROR(ValidateKv(o));
  const CommonOptions& c = ctx.common();
  const KvStore store(o, c.dir, c.seed);
  const int threads = c.threads;
  const bool do_put = o.phase != "get";
  const bool do_get = o.phase != "put";
  const std::vector<uint64_t> gets = do_get ? store.GetSequence(c.seed) : std::vector<uint64_t>{};
  ThreadIo& main = ctx.main();

  ScenarioResult result;
  std::set<uint64_t> distinct(gets.begin(), gets.end());
  if (do_put) {
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir));
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(store.kv_dir()));
    const size_t reserve = (CeilDiv(o.chunks, threads) + 1) * store.LogEntriesPerChunk();
    main.Begin("kv.put");
    IOTWIN_RETURN_IF_ERROR(ctx.Parallel(threads, reserve, [&](int t, ThreadIo& io) -> Status {
      IOTWIN_ASSIGN_OR_RETURN(auto worker, KvStore::Worker::Create(store, io));
      for (uint64_t i = static_cast<uint64_t>(t); i < store.chunks(); i += threads) {
        Compute(o.compute_us);
        IOTWIN_RETURN_IF_ERROR(worker->Put(i));
      }
      return Status::Ok();
    }));
    main.End("kv.put");
  } else {
    // Get only: refuse to start unless every chunk to be read is there with the right size.
    for (uint64_t i : distinct) {
      struct stat st;
      const long r = main.Stat(store.path(i), &st);
      if (r == -ENOENT) {
        return Status::NotFound(
            "{}: KV chunk missing; run `kv-offload --phase put` first with the "
            "same --dir, --seed and model shape",
            store.path(i));
      }
      if (r < 0) return SyscallError(r, "stat", store.path(i));
      if (static_cast<uint64_t>(st.st_size) != o.ChunkBytes()) {
        return Status::Invalid(
            "{}: {} bytes, expected a {}-byte chunk (different model shape "
            "or --chunk-tokens than the put run?)",
            store.path(i), st.st_size, o.ChunkBytes());
      }
    }
  }
  if (do_get) {
    const size_t reserve = (CeilDiv(gets.size(), threads) + 1) * store.LogEntriesPerChunk();
    main.Begin("kv.get");
    IOTWIN_RETURN_IF_ERROR(ctx.Parallel(threads, reserve, [&](int t, ThreadIo& io) -> Status {
      IOTWIN_ASSIGN_OR_RETURN(auto worker, KvStore::Worker::Create(store, io));
      for (size_t j = static_cast<size_t>(t); j < gets.size(); j += threads) {
        IOTWIN_RETURN_IF_ERROR(worker->Get(gets[j]));
        Compute(o.compute_us);
      }
      return Status::Ok();
    }));
    main.End("kv.get");
  }

  result.files = do_put ? store.chunks() : distinct.size();
  result.extra["bytes_per_token"] = o.BytesPerToken();
  result.extra["chunk_bytes"] = o.ChunkBytes();
  result.extra["chunks_put"] = do_put ? store.chunks() : 0;
  result.extra["gets"] = gets.size();
  result.extra["distinct_gets"] = distinct.size();
  result.extra["io"] = o.io;
  result.extra["direct"] = o.UseDirect();
  return result;
}

}  // namespace iotwin::workload
