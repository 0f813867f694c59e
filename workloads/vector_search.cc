#include "vector_search.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

namespace iotwin::workload {
namespace {

constexpr uint32_t kRecallK = 10;
constexpr uint64_t kWriteBlocks = 256;  // index writes of 1 MiB

std::string IndexDir(const std::string& dir) { return dir + "/vector"; }
std::string IndexPath(const std::string& dir) { return IndexDir(dir) + "/disk.index"; }

int OpenFlags(const VectorOptions& o, int base) {
  return base | O_CLOEXEC | (o.direct() ? O_DIRECT : 0);
}

Status OpenError(const VectorOptions& o, long fd, const std::string& path) {
  if (fd == -ENOENT) {
    return Status::NotFound(
        "{}: no vector index (run `vector-search --phase build` or `--phase both` first with the "
        "same --dir, --seed and data options)",
        path);
  }
  return o.direct() ? DirectOpenError(fd, path) : SyscallError(fd, "open", path);
}

IndexHeader HeaderFor(const VectorOptions& o, uint64_t seed, uint32_t medoid) {
  IndexHeader h;
  h.vectors = o.vectors;
  h.dim = o.dim;
  h.max_degree = o.degree;
  h.medoid = medoid;
  h.seed = seed;
  h.pq_bytes = o.pq_bytes;
  h.clusters = o.clusters;
  return h;
}

// Writes the header block and every node, 1 MiB at a time, then fsync: the build's output.
Status WriteIndex(const VectorOptions& o, RunContext& ctx, const Dataset& d, const Graph& g,
                  const IndexHeader& h) {
  ThreadIo& io = ctx.main();
  const std::string path = IndexPath(ctx.common().dir);
  AlignedBuffer& buf = ctx.MainBuffer(kWriteBlocks * kIndexBlock);
  const long fd = io.OpenAt(path, OpenFlags(o, O_WRONLY | O_CREAT | O_TRUNC), 0644);
  if (fd < 0) return OpenError(o, fd, path);
  Status st;
  const uint64_t blocks = o.vectors + 1;
  for (uint64_t first = 0; st.ok() && first < blocks; first += kWriteBlocks) {
    const uint64_t n = std::min(kWriteBlocks, blocks - first);
    for (uint64_t b = 0; b < n; b++) {
      std::span<uint8_t> block(buf.data() + b * kIndexBlock, kIndexBlock);
      const uint64_t node = first + b;
      if (node == 0) {
        EncodeIndexHeader(h, block);
      } else {
        EncodeNode(std::span(d.vec(node - 1), d.dim), g.neighbours[node - 1], block);
      }
    }
    const size_t len = static_cast<size_t>(n * kIndexBlock);
    const long r = io.Pwrite(static_cast<int>(fd), buf.data(), len, first * kIndexBlock);
    if (r < 0) {
      st = SyscallError(r, "pwrite64", path);
    } else if (static_cast<size_t>(r) != len) {
      st = Status::Io("{}: short write at {}: {} of {} bytes", path, first * kIndexBlock, r, len);
    }
  }
  if (st.ok()) {
    const long r = io.Fsync(static_cast<int>(fd));
    if (r < 0) st = SyscallError(r, "fsync", path);
  }
  const long c = io.Close(static_cast<int>(fd));
  if (st.ok() && c < 0) st = SyscallError(c, "close", path);
  return st;
}

// Search only: the index must exist, be complete and describe this data set.
Result<IndexHeader> ReadIndexHeader(const VectorOptions& o, RunContext& ctx) {
  ThreadIo& io = ctx.main();
  const std::string path = IndexPath(ctx.common().dir);
  AlignedBuffer& buf = ctx.MainBuffer(kIndexBlock);
  const long fd = io.OpenAt(path, OpenFlags(o, O_RDONLY));
  if (fd < 0) return OpenError(o, fd, path);
  const long r = io.Pread(static_cast<int>(fd), buf.data(), kIndexBlock, 0);
  struct stat st;
  const long s = io.Stat(path, &st);
  const long c = io.Close(static_cast<int>(fd));
  if (r < 0) return SyscallError(r, "pread64", path);
  if (c < 0) return SyscallError(c, "close", path);
  if (s < 0) return SyscallError(s, "stat", path);
  if (static_cast<size_t>(r) != kIndexBlock) {
    return Status::Invalid("{}: {} bytes, not a vector index", path, st.st_size);
  }
  auto h = DecodeIndexHeader(std::span<const uint8_t>(buf.data(), kIndexBlock));
  if (!h.ok()) return Status::Invalid("{}: {}", path, h.status().ToString());
  const IndexHeader want = HeaderFor(o, ctx.common().seed, 0);
  if (h->vectors != want.vectors || h->dim != want.dim || h->max_degree != want.max_degree ||
      h->seed != want.seed || h->clusters != want.clusters) {
    return Status::Invalid(
        "{}: built for {} vectors, dimension {}, degree {}, {} clusters, seed {}; this run "
        "asks for {}, {}, {}, {}, {} (use the build's options)",
        path, h->vectors, h->dim, h->max_degree, h->clusters, h->seed, want.vectors, want.dim,
        want.max_degree, want.clusters, want.seed);
  }
  if (static_cast<uint64_t>(st.st_size) != IndexFileBytes(h->vectors)) {
    return Status::Invalid("{}: {} bytes, expected {}", path, st.st_size,
                           IndexFileBytes(h->vectors));
  }
  return *h;
}

// One searcher thread: its own descriptor, queue, buffers and beam searcher.
class Searcher {
 public:
  Searcher(const VectorOptions& o, ThreadIo& io, const IndexHeader& h, const ProductQuantizer& pq,
           std::span<const uint8_t> codes)
      : o_(o),
        io_(io),
        h_(h),
        buf_(size_t{o.beam} * kIndexBlock),
        reqs_(o.beam),
        beam_(h, pq, codes, SearchParams{o.beam, o.search_list, kRecallK, o.rerank}) {}

  Status Open(const std::string& path) {
    path_ = path;
    const long fd = io_.OpenAt(path, OpenFlags(o_, O_RDONLY));
    if (fd < 0) return OpenError(o_, fd, path);
    fd_ = static_cast<int>(fd);
    if (o_.io == "uring") {
      IOTWIN_ASSIGN_OR_RETURN(queue_, CreateUringQueue(io_, o_.beam));
    } else if (o_.io == "libaio") {
      IOTWIN_ASSIGN_OR_RETURN(queue_, CreateAioQueue(io_, o_.beam));
    }
    return Status::Ok();
  }

  Status Close() {
    queue_.reset();
    if (fd_ < 0) return Status::Ok();
    const long c = io_.Close(fd_);
    fd_ = -1;
    return c < 0 ? SyscallError(c, "close", path_) : Status::Ok();
  }

  Status Query(const float* query, VectorReadLog::Query& out) {
    out.thread = io_.log().thread();
    out.tid = io_.log().tid();
    io_.Begin("query");
    auto result = beam_.Search(
        query, [&](std::span<const uint32_t> nodes, uint32_t, bool rerank,
                   std::span<NodeData> data) { return ReadBatch(nodes, rerank, data, out); });
    io_.End("query");
    if (!result.ok()) return result.status();
    out.result = std::move(*result);
    return Status::Ok();
  }

 private:
  Status ReadBatch(std::span<const uint32_t> nodes, bool rerank, std::span<NodeData> data,
                   VectorReadLog::Query& out) {
    const char* label = rerank ? "rerank" : "hop";
    io_.Begin(label);
    const uint64_t t0 = MonotonicNs();
    Status st = Issue(nodes);
    const uint64_t t1 = MonotonicNs();
    io_.End(label);
    IOTWIN_RETURN_IF_ERROR(st);
    for (size_t i = 0; i < nodes.size(); i++) {
      out.batch_ns.emplace_back(t0, t1);
      data[i].vec.resize(h_.dim);
      std::span<const uint8_t> block(buf_.data() + i * kIndexBlock, kIndexBlock);
      Status d = DecodeNode(block, h_, data[i].vec, data[i].neighbours);
      if (!d.ok()) return Status::Corrupt("{} node {}: {}", path_, nodes[i], d.ToString());
    }
    return Status::Ok();
  }

  // The batch's reads: one async batch (submit all, wait for all), or preads one after another.
  Status Issue(std::span<const uint32_t> nodes) {
    for (size_t i = 0; i < nodes.size(); i++) {
      reqs_[i] = AsyncRequest{
          false, fd_, buf_.data() + i * kIndexBlock, kIndexBlock, NodeOffset(nodes[i]), 0};
    }
    if (queue_) {
      IOTWIN_RETURN_IF_ERROR(queue_->Run(std::span(reqs_.data(), nodes.size())));
    } else {
      for (size_t i = 0; i < nodes.size(); i++) {
        reqs_[i].res = io_.Pread(fd_, reqs_[i].buf, reqs_[i].len, reqs_[i].offset);
      }
    }
    for (size_t i = 0; i < nodes.size(); i++) {
      const AsyncRequest& q = reqs_[i];
      if (q.res < 0) return SyscallError(static_cast<long>(q.res), "read", path_);
      if (static_cast<size_t>(q.res) != q.len) {
        return Status::Io("{}: short read at {}: {} of {} bytes", path_, q.offset, q.res, q.len);
      }
    }
    return Status::Ok();
  }

  const VectorOptions& o_;
  ThreadIo& io_;
  IndexHeader h_;
  AlignedBuffer buf_;
  std::vector<AsyncRequest> reqs_;
  BeamSearcher beam_;
  std::unique_ptr<AsyncQueue> queue_;
  std::string path_;
  int fd_ = -1;
};

Status SearchAll(const VectorOptions& o, RunContext& ctx, const Dataset& d, const IndexHeader& h,
                 const ProductQuantizer& pq, const std::vector<uint8_t>& codes,
                 VectorReadLog& log) {
  const int threads = ctx.common().threads;
  const std::string path = IndexPath(ctx.common().dir);
  log.queries().assign(o.queries, VectorReadLog::Query{});
  // Per hop: two markers, the W requests and their submit/wait calls.
  const size_t per_query = (2 * size_t{o.search_list} / o.beam + 4) * (o.beam + 4) + 8;
  const size_t reserve = static_cast<size_t>(CeilDiv(o.queries, threads)) * per_query + 16;
  return ctx.Parallel(threads, reserve, [&](int t, ThreadIo& io) -> Status {
    Searcher s(o, io, h, pq, codes);
    Status st = s.Open(path);
    for (uint64_t q = static_cast<uint64_t>(t); st.ok() && q < o.queries; q += threads) {
      log.queries()[q].result.reads.reserve(2 * size_t{o.search_list});
      st = s.Query(d.query(q), log.queries()[q]);
    }
    const Status c = s.Close();
    return st.ok() ? c : st;
  });
}

// Recall@10 of the searches of an evenly spaced sample of queries, against brute force.
double SampleRecall(const VectorOptions& o, const Dataset& d, VectorReadLog& log, uint64_t n) {
  if (n == 0) return 0;
  double sum = 0;
  for (uint64_t i = 0; i < n; i++) {
    const uint64_t q = i * o.queries / n;
    const std::vector<uint32_t> truth = BruteForceNearest(d, d.query(q), kRecallK);
    sum += RecallAt(log.queries()[q].result.nearest, truth);
  }
  return sum / static_cast<double>(n);
}

}  // namespace

void ApplyVectorSmallPreset(VectorOptions& o, const std::function<bool(std::string_view)>& given) {
  auto set = [&](std::string_view name, auto& field, auto value) {
    if (!given(name)) field = value;
  };
  set("vectors", o.vectors, uint64_t{2000});
  set("dim", o.dim, uint32_t{32});
  set("clusters", o.clusters, uint32_t{8});
  set("degree", o.degree, uint32_t{16});
  set("build-list", o.build_list, uint32_t{32});
  set("pq-bytes", o.pq_bytes, uint32_t{8});
  set("queries", o.queries, uint64_t{16});
  set("search-list", o.search_list, uint32_t{32});
  set("recall-sample", o.recall_sample, uint64_t{16});
}

Status ValidateVector(const VectorOptions& o) {
  if (o.vectors < 1 || o.vectors > (1u << 24)) return BadOption("--vectors must be in 1..16777216");
  if (o.dim < 1 || o.degree < 1 || NodeContentBytes(o.dim, o.degree) > kIndexBlock) {
    return BadOption(
        "a node of --dim {} floats and --degree {} ids takes {} bytes; it must fit "
        "a {}-byte block (4 D + 4 + 4 R)",
        o.dim, o.degree, NodeContentBytes(o.dim, o.degree), kIndexBlock);
  }
  if (o.vectors * o.dim > (uint64_t{1} << 28)) {
    return BadOption("--vectors x --dim = {} floats; keep it at most 268435456 (1 GiB)",
                     o.vectors * o.dim);
  }
  if (o.clusters < 1 || o.clusters > o.vectors) return BadOption("--clusters must be in 1..N");
  if (o.build_list < 1 || o.build_list > 4096) return BadOption("--build-list must be in 1..4096");
  if (!(o.alpha >= 1.0f && o.alpha <= 4.0f)) return BadOption("--alpha must be in [1, 4]");
  if (o.pq_bytes < 1 || o.pq_bytes > o.dim || o.dim % o.pq_bytes != 0) {
    return BadOption("--pq-bytes must divide --dim ({}) (got {})", o.dim, o.pq_bytes);
  }
  if (o.queries < 1 || o.queries > (1u << 24)) return BadOption("--queries must be in 1..16777216");
  if (o.beam < 1 || o.beam > 64) return BadOption("--beam must be in 1..64");
  if (o.search_list < std::max(kRecallK, o.beam) || o.search_list > 4096) {
    return BadOption("--search-list must be in max(10, --beam)..4096");
  }
  if (o.rerank != 0 && (o.rerank < kRecallK || o.rerank > o.search_list)) {
    return BadOption("--rerank must be 0 or in 10..--search-list");
  }
  return Status::Ok();
}

uint64_t VectorReadLog::reads() const {
  uint64_t n = 0;
  for (const Query& q : queries_) n += q.result.reads.size();
  return n;
}

Status VectorReadLog::Write(const std::string& path) const {
  uint64_t first = 0;  // id of the query's first read
  size_t q = 0;
  return WriteTextFile(path, "read log", [&](std::string& out) {
    if (q == queries_.size()) return false;
    const Query& query = queries_[q];
    const auto& reads = query.result.reads;
    for (size_t i = 0; i < reads.size(); i++) {
      const SearchRead& r = reads[i];
      const std::string dep =
          r.producer < 0 ? "" : fmt::format("{}", first + static_cast<uint64_t>(r.producer));
      fmt::format_to(std::back_inserter(out),
                     "{{\"read\":{},\"thread\":{},\"tid\":{},\"query\":{},\"hop\":{},"
                     "\"rerank\":{},\"node\":{},\"offset\":{},\"len\":{},\"depends_on\":[{}],"
                     "\"ts_ns\":{},\"done_ns\":{}}}\n",
                     first + i, query.thread, query.tid, q, r.hop, r.rerank, r.node,
                     NodeOffset(r.node), kIndexBlock, dep, query.batch_ns[i].first,
                     query.batch_ns[i].second);
    }
    first += reads.size();
    q++;
    return true;
  });
}

Result<ScenarioResult> RunVectorSearch(const VectorOptions& o, RunContext& ctx,
                                       VectorReadLog& log) {
  IOTWIN_RETURN_IF_ERROR(ValidateVector(o));
  const CommonOptions& c = ctx.common();
  ThreadIo& main = ctx.main();
  const bool build = o.phase != "search", search = o.phase != "build";
  const Dataset d = GenerateDataset(DataShape{o.vectors, o.dim, o.clusters, o.queries}, c.seed);
  IndexHeader h;
  ScenarioResult result;
  if (build) {
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(c.dir));
    IOTWIN_RETURN_IF_ERROR(ctx.EnsureDir(IndexDir(c.dir)));
    main.Begin("vector.build");
    const Graph g = BuildGraph(d, GraphParams{o.degree, o.build_list, o.alpha}, c.seed);
    main.End("vector.build");
    h = HeaderFor(o, c.seed, g.medoid);
    main.Begin("vector.write");
    IOTWIN_RETURN_IF_ERROR(WriteIndex(o, ctx, d, g, h));
    main.End("vector.write");
    uint64_t edges = 0;
    for (const auto& n : g.neighbours) edges += n.size();
    result.extra["mean_degree"] = static_cast<double>(edges) / static_cast<double>(o.vectors);
  } else {
    IOTWIN_ASSIGN_OR_RETURN(h, ReadIndexHeader(o, ctx));
  }
  result.files = 1;
  result.extra["vectors"] = o.vectors;
  result.extra["dim"] = o.dim;
  result.extra["degree"] = o.degree;
  result.extra["medoid"] = h.medoid;
  result.extra["index_bytes"] = IndexFileBytes(o.vectors);
  result.extra["io"] = o.io;
  result.extra["direct"] = o.direct();
  if (!search) return result;

  // The in-memory side of the index: PQ codes of every vector (DiskANN keeps them in RAM).
  const ProductQuantizer pq = ProductQuantizer::Train(d, o.pq_bytes, c.seed);
  const std::vector<uint8_t> codes = pq.EncodeAll(d);
  main.Begin("vector.search");
  IOTWIN_RETURN_IF_ERROR(SearchAll(o, ctx, d, h, pq, codes, log));
  main.End("vector.search");

  uint64_t max_hops = 0, hops = 0;
  for (const auto& q : log.queries()) {
    hops += q.result.hops;
    max_hops = std::max<uint64_t>(max_hops, q.result.hops);
  }
  const uint64_t sample = std::min(o.recall_sample, o.queries);
  result.extra["queries"] = o.queries;
  result.extra["beam"] = o.beam;
  result.extra["search_list"] = o.search_list;
  result.extra["pq_bytes"] = o.pq_bytes;
  result.extra["node_reads"] = log.reads();
  result.extra["mean_hops"] = static_cast<double>(hops) / static_cast<double>(o.queries);
  result.extra["max_hops"] = max_hops;
  result.extra["recall_at_10"] = SampleRecall(o, d, log, sample);
  result.extra["recall_sample"] = sample;
  if (!o.read_log.empty()) result.extra["read_log"] = o.read_log;
  return result;
}

}  // namespace iotwin::workload
