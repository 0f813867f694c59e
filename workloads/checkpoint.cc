#include "checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "rng.h"

namespace iotwin::workload {

namespace {

constexpr int kMaxRanks = 4096;
constexpr uint64_t kPollNs = 1'000'000;  // between two looks at the other ranks' markers

// The first of the environment variables `names` that holds an integer.
std::optional<int> EnvInt(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    int n = 0;
    const char* end = v + std::char_traits<char>::length(v);
    auto [ptr, ec] = std::from_chars(v, end, n);
    if (ec == std::errc() && ptr == end) return n;
  }
  return std::nullopt;
}

// A job's name as a file-name component: bytes other than [A-Za-z0-9._-] become '_'.
std::string JobFromEnvironment() {
  std::string job;
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"}) {
    if (const char* v = std::getenv(name); v && *v) {
      job = v;
      break;
    }
  }
  return job.empty() ? "local" : job;
}

std::string SafeName(std::string s) {
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return s.substr(0, 64);
}

uint64_t ShardKey(uint64_t seed, int shard) {
  return Mix64(seed ^ 0x636b7074ULL ^ Mix64(static_cast<uint64_t>(shard)));
}

struct Layout {
  std::string dir;
  RankInfo who;
  uint64_t shard_bytes = 0;
  std::string Shard(int r) const {
    return fmt::format("{}/shard-{:05}-of-{:05}.bin", dir, r, who.ranks);
  }
  std::string Saved(int r) const { return fmt::format("{}/.saved-{}-{}", dir, who.job, r); }
  std::string Committed() const { return fmt::format("{}/.committed-{}", dir, who.job); }
  std::string Metadata() const { return dir + "/metadata.json"; }
};

Status CheckWrite(long r, size_t want, const std::string& path, uint64_t off) {
  if (r < 0) return Status::FromErrno(static_cast<int>(-r), fmt::format("write {} at {}", path, off));
  if (static_cast<size_t>(r) != want) {
    return Status::Internal("short write of {} at {}: {} of {} bytes", path, off, r, want);
  }
  return Status::Ok();
}

// Writes `bytes` of the shard's pattern in `write_size` pieces, then fsyncs it.
Status SaveShard(ThreadIo& io, const Layout& l, uint64_t key, uint64_t write_size,
                 AlignedBuffer& buf) {
  const std::string path = l.Shard(l.who.rank);
  const long fd = io.OpenAt(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(static_cast<int>(-fd), "open " + path);
  Status st = Status::Ok();
  for (uint64_t off = 0; off < l.shard_bytes && st.ok(); off += write_size) {
    const size_t n = static_cast<size_t>(std::min(write_size, l.shard_bytes - off));
    FillPattern(key, off, buf.data(), n);
    st = CheckWrite(io.Pwrite(static_cast<int>(fd), buf.data(), n, off), n, path, off);
  }
  if (st.ok() && io.Fsync(static_cast<int>(fd)) != 0) st = Status::Internal("fsync {}", path);
  io.Close(static_cast<int>(fd));
  return st;
}

// An empty file that tells the other ranks a step is done (created after the step's fsync).
Status Mark(ThreadIo& io, const std::string& path) {
  const long fd = io.OpenAt(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(static_cast<int>(-fd), "create " + path);
  io.Close(static_cast<int>(fd));
  return Status::Ok();
}

// Waits until every path exists, looking every millisecond, at most `wait_s`.
Status WaitFor(ThreadIo& io, const std::vector<std::string>& paths, double wait_s) {
  const uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(wait_s * 1e9);
  size_t next = 0;
  struct stat st;
  while (next < paths.size()) {
    if (io.Stat(paths[next], &st) == 0) {
      next++;
      continue;
    }
    if (MonotonicNs() > deadline) {
      return Status::Internal("waited {} s for {} (the other ranks of the job did not get there)",
                              wait_s, paths[next]);
    }
    const timespec pause{0, static_cast<long>(kPollNs)};
    nanosleep(&pause, nullptr);
  }
  return Status::Ok();
}

Status WriteMetadata(ThreadIo& io, const Layout& l, uint64_t seed) {
  nlohmann::ordered_json j;
  j["job"] = l.who.job;
  j["ranks"] = l.who.ranks;
  j["shard_bytes"] = l.shard_bytes;
  j["seed"] = seed;
  j["shards"] = nlohmann::json::array();
  for (int r = 0; r < l.who.ranks; r++) j["shards"].push_back(l.Shard(r));
  const std::string text = j.dump(1) + "\n";
  const std::string path = l.Metadata();
  const long fd = io.OpenAt(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(static_cast<int>(-fd), "open " + path);
  Status st = CheckWrite(io.Pwrite(static_cast<int>(fd), text.data(), text.size(), 0),
                         text.size(), path, 0);
  if (st.ok() && io.Fsync(static_cast<int>(fd)) != 0) st = Status::Internal("fsync {}", path);
  io.Close(static_cast<int>(fd));
  return st;
}

// Reads this rank's reshard: one shard's worth of bytes starting half a shard into its own, so
// it straddles its shard and the next rank's (its own whole shard when it runs alone).
Status LoadReshard(ThreadIo& io, const Layout& l, uint64_t seed, uint64_t read_size, bool verify,
                   AlignedBuffer& buf) {
  const uint64_t S = l.shard_bytes, total = S * static_cast<uint64_t>(l.who.ranks);
  const uint64_t first = l.who.ranks > 1 ? static_cast<uint64_t>(l.who.rank) * S + S / 2 : 0;
  std::map<int, int> fds;
  Status st = Status::Ok();
  for (uint64_t done = 0; done < S && st.ok();) {
    const uint64_t pos = (first + done) % total;
    const int shard = static_cast<int>(pos / S);
    const uint64_t off = pos % S;
    const size_t n = static_cast<size_t>(std::min({read_size, S - off, S - done}));
    auto it = fds.find(shard);
    if (it == fds.end()) {
      const long fd = io.OpenAt(l.Shard(shard), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        st = Status::FromErrno(static_cast<int>(-fd), "open " + l.Shard(shard));
        break;
      }
      it = fds.emplace(shard, static_cast<int>(fd)).first;
    }
    const long got = io.Pread(it->second, buf.data(), n, off);
    if (got != static_cast<long>(n)) {
      st = Status::Internal("read {} at {}: {} of {} bytes", l.Shard(shard), off, got, n);
    } else if (verify) {
      const long long bad = CheckPattern(ShardKey(seed, shard), off, buf.data(), n);
      if (bad >= 0) st = Status::Internal("{}: wrong byte at {}", l.Shard(shard), off + bad);
    }
    done += n;
  }
  for (const auto& [shard, fd] : fds) io.Close(fd);
  return st;
}

}  // namespace

Result<RankInfo> ResolveRank(const CheckpointOptions& o) {
  RankInfo who;
  who.rank = o.rank >= 0 ? o.rank : EnvInt({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
                                        .value_or(0);
  who.ranks = o.ranks > 0 ? o.ranks : EnvInt({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}).value_or(1);
  if (who.ranks < 1 || who.ranks > kMaxRanks) {
    return BadOption("--ranks {}: expected 1..{}", who.ranks, kMaxRanks);
  }
  if (who.rank < 0 || who.rank >= who.ranks) {
    return BadOption("--rank {}: expected 0..{} (the job has {} ranks)", who.rank, who.ranks - 1,
                     who.ranks);
  }
  who.job = SafeName(o.job.empty() ? JobFromEnvironment() : o.job);
  return who;
}

Result<ScenarioResult> RunCheckpoint(const CheckpointOptions& o, RunContext& ctx) {
  if (o.shard_mb == 0 || o.shard_mb > 1024 * 1024) return BadOption("--shard-mb: 1..1048576");
  if (o.write_size == 0 || o.write_size > 1024 * kMiB || o.read_size == 0 ||
      o.read_size > 1024 * kMiB) {
    return BadOption("--write-size and --read-size must be in 1..1 GiB");
  }
  if (!(o.wait_s > 0) || o.wait_s > 86400) return BadOption("--wait must be in (0, 86400] s");
  IOTWIN_ASSIGN_OR_RETURN(const RankInfo who, ResolveRank(o));
  ThreadIo& io = ctx.main();
  Layout l{ctx.common().dir + "/checkpoint", who, o.shard_mb * kMiB};
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(ctx.common().dir));
  IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(l.dir));
  const uint64_t seed = ctx.common().seed;
  AlignedBuffer& buf = ctx.MainBuffer(static_cast<size_t>(std::max(o.write_size, o.read_size)));

  const uint64_t t0 = MonotonicNs();
  io.Begin("checkpoint.save");
  Status st = SaveShard(io, l, ShardKey(seed, who.rank), o.write_size, buf);
  if (st.ok()) st = Mark(io, l.Saved(who.rank));
  if (st.ok() && who.rank == 0) {
    std::vector<std::string> saved;
    for (int r = 0; r < who.ranks; r++) saved.push_back(l.Saved(r));
    st = WaitFor(io, saved, o.wait_s);
    if (st.ok()) st = WriteMetadata(io, l, seed);
    if (st.ok()) st = Mark(io, l.Committed());
  }
  io.End("checkpoint.save");
  const uint64_t t1 = MonotonicNs();
  if (st.ok()) st = WaitFor(io, {l.Committed()}, o.wait_s);
  const uint64_t t2 = MonotonicNs();
  if (st.ok()) {
    io.Begin("checkpoint.load");
    st = LoadReshard(io, l, seed, o.read_size, o.verify, buf);
    io.End("checkpoint.load");
  }
  IOTWIN_RETURN_IF_ERROR(st);
  ScenarioResult res;
  res.files = 1 + (who.rank == 0 ? 1 : 0);
  res.extra["rank"] = who.rank;
  res.extra["ranks"] = who.ranks;
  res.extra["job"] = who.job;
  res.extra["shard_bytes"] = l.shard_bytes;
  res.extra["save_s"] = static_cast<double>(t1 - t0) / 1e9;
  res.extra["wait_s"] = static_cast<double>(t2 - t1) / 1e9;
  res.extra["load_s"] = static_cast<double>(MonotonicNs() - t2) / 1e9;
  return res;
}

}  // namespace iotwin::workload
