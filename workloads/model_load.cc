#include "model_load.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "rng.h"

namespace iotwin::workload {

Status ValidateModel(const ModelOptions& o) {
  if (o.prepare && o.prepare_only)
    return BadOption("--prepare and --prepare-only exclude each other");
  if (o.shards < 1 || o.shards > 99999) return BadOption("--shards must be in 1..99999");
  if (o.shard_mb == 0 || o.shard_mb > 1024 * 1024)
    return BadOption("--shard-mb must be in 1..1048576");
  if (o.io_size == 0 || o.io_size > 1024 * kMiB) return BadOption("--io-size must be in 1..1 GiB");
  if (o.block_mb == 0 || o.block_mb > 1024) return BadOption("--block-mb must be in 1..1024");
  if (o.qd == 0 || o.qd > 1024) return BadOption("--qd must be in 1..1024");
  if (o.mode == "direct-async" && static_cast<uint64_t>(o.qd) * o.block_mb > 4096) {
    return BadOption("--qd x --block-mb = {} MiB of buffers; keep it at most 4096 MiB",
                     static_cast<uint64_t>(o.qd) * o.block_mb);
  }
  return Status::Ok();
}

ModelFiles::ModelFiles(const ModelOptions& o, const std::string& dir, uint64_t seed,
                       std::vector<ShardPlan> plan)
    : o_(o), model_dir_(dir + "/model"), seed_(seed), plan_(std::move(plan)) {}

uint64_t ModelFiles::key(int s) const {
  return Mix64(seed_ ^ 0x7361666574656e73ULL ^ Mix64(static_cast<uint64_t>(s)));
}

size_t ModelFiles::LogEntriesPerShard(uint64_t file_size) const {
  uint64_t n = 16;
  if (o_.mode == "mmap") {
    n += CeilDiv(file_size, kPageSize);
  } else if (o_.mode == "pread") {
    n += CeilDiv(file_size, o_.io_size) + 1024;  // + one partial request per tensor
  } else {
    n += 3 * CeilDiv(file_size, o_.block_mb * kMiB);
  }
  return static_cast<size_t>(n);
}

Status ModelFiles::Prepare(ThreadIo& io, int s, AlignedBuffer& buf) const {
  const ShardPlan& shard = plan_.at(static_cast<size_t>(s));
  const std::string p = path(s);
  const std::string header = EncodeHeader(shard);
  const long fd = io.OpenAt(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(fd, "create", p);
  auto write_all = [&](const void* data, size_t len, uint64_t off) -> Status {
    const long r = io.Pwrite(static_cast<int>(fd), data, len, off);
    if (r < 0) return SyscallError(r, "pwrite64", p);
    if (static_cast<size_t>(r) != len) return Status::Io("{}: short write at {}", p, off);
    return Status::Ok();
  };
  Status st = write_all(header.data(), header.size(), 0);
  const uint64_t end = header.size() + shard.data_bytes;
  for (uint64_t off = header.size(); st.ok() && off < end; off += kPrepareWriteSize) {
    const size_t len = static_cast<size_t>(std::min(kPrepareWriteSize, end - off));
    FillPattern(key(s), off, buf.data(), len);
    st = write_all(buf.data(), len, off);
  }
  // Durable and clean, so --drop-cache (fadvise DONTNEED) can evict every page afterwards.
  if (st.ok()) {
    const long r = io.Fsync(static_cast<int>(fd));
    if (r < 0) st = SyscallError(r, "fsync", p);
  }
  const long c = io.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", p);
  return st;
}

Result<std::unique_ptr<ModelFiles::Loader>> ModelFiles::Loader::Create(const ModelFiles& files,
                                                                       ThreadIo& io,
                                                                       uint64_t largest_file) {
  std::unique_ptr<Loader> l(new Loader(files, io));
  const ModelOptions& o = files.o_;
  if (o.mode == "pread") {
    l->buf_ = AlignedBuffer(static_cast<size_t>(o.io_size));
  } else if (o.mode == "direct-async") {
    const uint64_t block = o.block_mb * kMiB;
    const uint64_t blocks = std::max<uint64_t>(1, CeilDiv(largest_file, block));
    const uint64_t batch = std::min<uint64_t>(o.qd, blocks);
    l->buf_ = AlignedBuffer(static_cast<size_t>(batch * block));
    l->reqs_.resize(static_cast<size_t>(batch));
    IOTWIN_ASSIGN_OR_RETURN(l->aio_, CreateAioQueue(io, o.qd));
  }
  return l;
}

Status ModelFiles::Loader::VerifyData(int s, const std::string& path, uint64_t file_off,
                                      const uint8_t* p, size_t n, uint64_t data_start) const {
  if (!files_.o_.verify) return Status::Ok();
  const uint64_t end = file_off + n;
  if (end <= data_start) return Status::Ok();  // header bytes: checked by parsing them
  const uint64_t from = std::max(file_off, data_start);
  const long long bad = CheckPattern(files_.key(s), from, p + (from - file_off), end - from);
  if (bad >= 0) {
    return Status::Corrupt("{}: byte {} differs from what --prepare wrote (same --seed?)", path,
                           from + static_cast<uint64_t>(bad));
  }
  return Status::Ok();
}

Result<ParsedHeader> ModelFiles::Loader::ReadHeader(int fd, const std::string& path,
                                                    uint64_t file_size) {
  uint8_t prefix[8];
  long r = io_.Pread(fd, prefix, sizeof prefix, 0);
  if (r < 0) return SyscallError(r, "pread64", path);
  if (r != 8) return Status::Corrupt("{}: too short for a safetensors header", path);
  auto len = DecodeHeaderLength(prefix, file_size);
  if (!len.ok()) return len.status().WithContext(path);
  std::string json(static_cast<size_t>(*len), '\0');
  r = io_.Pread(fd, json.data(), json.size(), 8);
  if (r < 0) return SyscallError(r, "pread64", path);
  if (static_cast<size_t>(r) != json.size()) return Status::Corrupt("{}: truncated header", path);
  auto parsed = ParseHeader(json, file_size);
  if (!parsed.ok()) return parsed.status().WithContext(path);
  return parsed;
}

Status ModelFiles::Loader::LoadPread(int fd, int s, const std::string& path, uint64_t file_size) {
  IOTWIN_ASSIGN_OR_RETURN(ParsedHeader h, ReadHeader(fd, path, file_size));
  const uint64_t io_size = files_.o_.io_size;
  for (const auto& t : h.tensors) {
    for (uint64_t off = t.begin; off < t.end; off += io_size) {
      const size_t len = static_cast<size_t>(std::min(io_size, t.end - off));
      const long r = io_.Pread(fd, buf_.data(), len, off);
      if (r < 0) return SyscallError(r, "pread64", path);
      if (static_cast<size_t>(r) != len) return Status::Corrupt("{}: short read at {}", path, off);
      IOTWIN_RETURN_IF_ERROR(VerifyData(s, path, off, buf_.data(), len, h.data_start));
    }
  }
  return Status::Ok();
}

Status ModelFiles::Loader::LoadMmap(int fd, int s, const std::string& path, uint64_t file_size) {
  IOTWIN_ASSIGN_OR_RETURN(ParsedHeader h, ReadHeader(fd, path, file_size));
  const long m = io_.Mmap(static_cast<size_t>(file_size), PROT_READ, MAP_SHARED, fd, 0);
  if (m < 0 && m > -4096) return SyscallError(m, "mmap", path);
  const auto* base = reinterpret_cast<const volatile uint8_t*>(m);
  const int32_t file_str = io_.Intern(path);
  Status st;
  // In tensor order, one load per 4 KiB page; a page shared by two tensors is touched once.
  uint64_t next_page = 0;
  for (const auto& t : h.tensors) {
    if (t.end == t.begin) continue;
    for (uint64_t page = std::max(t.begin / kPageSize, next_page); page <= (t.end - 1) / kPageSize;
         page++) {
      const uint64_t off = std::max(page * kPageSize, t.begin);
      const uint64_t page_bytes = std::min(kPageSize, file_size - page * kPageSize);
      const uint8_t v = io_.Touch(base + off, file_str, off, page_bytes);
      pages_touched_++;
      if (st.ok() && files_.o_.verify) {
        st = VerifyData(s, path, off, &v, 1, h.data_start);
      }
      next_page = page + 1;
    }
  }
  const long u = io_.Munmap(reinterpret_cast<void*>(m), static_cast<size_t>(file_size));
  if (st.ok() && u < 0) st = SyscallError(u, "munmap", path);
  return st;
}

Status ModelFiles::Loader::LoadDirect(int fd, int s, const std::string& path, uint64_t file_size) {
  const uint64_t block = files_.o_.block_mb * kMiB;
  std::string header_json;
  ParsedHeader h;
  bool have_header = false;
  for (uint64_t off = 0; off < file_size;) {
    size_t n = 0;
    const uint64_t batch_start = off;
    for (; n < reqs_.size() && off < file_size; n++) {
      AsyncRequest& q = reqs_[n];
      q.write = false;
      q.fd = fd;
      q.offset = off;
      // O_DIRECT lengths must stay aligned: the last request asks for the rounded-up rest and
      // comes back short at end of file.
      q.len = static_cast<size_t>(std::min(block, RoundUp(file_size - off, kDirectAlign)));
      q.buf = buf_.data() + (off - batch_start);
      q.res = 0;
      off += q.len;
    }
    IOTWIN_RETURN_IF_ERROR(aio_->Run(std::span(reqs_.data(), n)));
    for (size_t i = 0; i < n; i++) {
      const AsyncRequest& q = reqs_[i];
      if (q.res < 0) return SyscallError(static_cast<long>(q.res), "aio read", path);
      const uint64_t want = std::min<uint64_t>(q.len, file_size - q.offset);
      if (static_cast<uint64_t>(q.res) != want) {
        return Status::Corrupt("{}: short O_DIRECT read at {}: {} of {} bytes", path, q.offset,
                               q.res, want);
      }
    }
    const uint64_t got = std::min(off, file_size) - batch_start;
    if (!have_header) {
      // DeepSpeed moves raw bytes; the header is parsed from the first block afterwards.
      if (got < 8) return Status::Corrupt("{}: too short for a safetensors header", path);
      IOTWIN_ASSIGN_OR_RETURN(uint64_t len, DecodeHeaderLength(buf_.data(), file_size));
      if (8 + len > got)
        return Status::Unsupported("{}: header larger than one --block-mb block", path);
      auto parsed = ParseHeader(std::string_view(reinterpret_cast<const char*>(buf_.data()) + 8,
                                                 static_cast<size_t>(len)),
                                file_size);
      if (!parsed.ok()) return parsed.status().WithContext(path);
      h = std::move(parsed).value();
      have_header = true;
    }
    IOTWIN_RETURN_IF_ERROR(
        VerifyData(s, path, batch_start, buf_.data(), static_cast<size_t>(got), h.data_start));
  }
  if (!have_header) return Status::Corrupt("{}: empty file, not a safetensors shard", path);
  return Status::Ok();
}

Status ModelFiles::Loader::Load(int s, uint64_t file_size) {
  const ModelOptions& o = files_.o_;
  const std::string p = files_.path(s);
  const bool direct = o.mode == "direct-async";
  const long fd = io_.OpenAt(p, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return direct ? DirectOpenError(fd, p) : SyscallError(fd, "open", p);
  Status st;
  if (o.drop_cache) {
    // Evicts this file's clean cached pages: a cold load without a system-wide drop_caches.
    const long r = io_.Fadvise(static_cast<int>(fd), 0, 0, POSIX_FADV_DONTNEED);
    if (r < 0) st = SyscallError(r, "fadvise64(DONTNEED)", p);
  }
  if (st.ok()) {
    if (o.mode == "mmap") {
      st = LoadMmap(static_cast<int>(fd), s, p, file_size);
    } else if (o.mode == "pread") {
      st = LoadPread(static_cast<int>(fd), s, p, file_size);
    } else {
      st = LoadDirect(static_cast<int>(fd), s, p, file_size);
    }
  }
  const long c = io_.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", p);
  return st;
}

Result<ScenarioResult> RunModelLoad(const ModelOptions& o, RunContext& ctx) {
  IOTWIN_RETURN_IF_ERROR(ValidateModel(o));
  const CommonOptions& c = ctx.common();
  ThreadIo& main = ctx.main();
  const int threads = std::min(c.threads, o.shards);
  std::vector<ShardPlan> plan;
  if (o.prepare || o.prepare_only) {
    IOTWIN_ASSIGN_OR_RETURN(plan, PlanModel(o.shards, o.shard_mb * kMiB, o.hidden));
  }
  const ModelFiles files(o, c.dir, c.seed, plan);
  ScenarioResult result;
  result.files = static_cast<uint64_t>(o.shards);

  if (!plan.empty()) {
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir));
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(files.model_dir()));
    main.Begin("model.prepare");
    IOTWIN_RETURN_IF_ERROR(ctx.Parallel(threads, 64 * static_cast<size_t>(o.shard_mb) + 64,
                                        [&](int t, ThreadIo& io) -> Status {
                                          AlignedBuffer buf(ModelFiles::kPrepareWriteSize);
                                          for (int s = t; s < o.shards; s += threads) {
                                            IOTWIN_RETURN_IF_ERROR(files.Prepare(io, s, buf));
                                          }
                                          return Status::Ok();
                                        }));
    main.End("model.prepare");
    uint64_t tensors = 0, bytes = 0;
    for (const auto& s : plan) {
      tensors += s.tensors.size();
      bytes += s.data_bytes;
    }
    result.extra["tensors"] = tensors;
    result.extra["tensor_bytes"] = bytes;
  }
  if (o.prepare_only) return result;

  // Pre-flight: every shard must exist; the load does not start otherwise.
  std::vector<uint64_t> sizes(static_cast<size_t>(o.shards));
  for (int s = 0; s < o.shards; s++) {
    struct stat st;
    const long r = main.Stat(files.path(s), &st);
    if (r == -ENOENT) {
      return Status::NotFound(
          "{}: model shard missing; create the model first with `iotwin-workload model-load "
          "--prepare-only --dir {}` (and the same --shards {})",
          files.path(s), c.dir, o.shards);
    }
    if (r < 0) return SyscallError(r, "stat", files.path(s));
    if (!S_ISREG(st.st_mode)) return Status::Invalid("{}: not a regular file", files.path(s));
    sizes[static_cast<size_t>(s)] = static_cast<uint64_t>(st.st_size);
  }
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  uint64_t total_bytes = 0;
  for (uint64_t v : sizes) total_bytes += v;

  std::vector<uint64_t> pages(static_cast<size_t>(threads));
  main.Begin("model.load");
  IOTWIN_RETURN_IF_ERROR(ctx.Parallel(
      threads, files.LogEntriesPerShard(largest) * static_cast<size_t>(CeilDiv(o.shards, threads)),
      [&](int t, ThreadIo& io) -> Status {
        IOTWIN_ASSIGN_OR_RETURN(auto loader, ModelFiles::Loader::Create(files, io, largest));
        for (int s = t; s < o.shards; s += threads) {
          io.Begin("model.shard");
          const Status st = loader->Load(s, sizes[static_cast<size_t>(s)]);
          io.End("model.shard");
          IOTWIN_RETURN_IF_ERROR(st);
        }
        pages[static_cast<size_t>(t)] = loader->pages_touched();
        return Status::Ok();
      }));
  main.End("model.load");

  uint64_t touched = 0;
  for (uint64_t p : pages) touched += p;
  result.extra["mode"] = o.mode;
  result.extra["shards"] = o.shards;
  result.extra["shard_bytes"] = total_bytes;
  if (o.mode == "mmap") result.extra["pages_touched"] = touched;
  return result;
}

}  // namespace iotwin::workload
