// iotwin-workload: deterministic, seedable AI-storage workloads (docs/workloads.md).
//
// Exit status: 0 done; 2 bad options or unusable input (missing files, O_DIRECT unsupported);
// 1 the workload failed while running (I/O error, corrupt data).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/unit_options.h"
#include "checkpoint.h"
#include "common.h"
#include "kv_offload.h"
#include "micro.h"
#include "mixed.h"
#include "model_load.h"
#include "vector_search.h"

namespace {

using namespace iotwin;
using namespace iotwin::workload;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

void AddCommon(CLI::App* cmd, CommonOptions& c, bool threads) {
  cmd->add_option("--dir", c.dir, "Directory for the workload's files (created if missing)")
      ->required();
  cmd->add_option("--seed", c.seed, "Seed: the same seed and options give the same operations")
      ->capture_default_str();
  if (threads) {
    cmd->add_option("--threads", c.threads, "Worker threads")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
  }
  cmd->add_option("--log", c.log_path,
                  "Write the operation log (JSON Lines) to this file after the run");
  cmd->add_flag("--quiet", c.quiet, "Do not print the JSON summary line");
}

int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound:
    case Status::Code::kUnsupported:
      return kExitUsage;
    default:
      return kExitFailed;
  }
}

int Run(const std::string& scenario, const CommonOptions& common,
        const std::function<Result<ScenarioResult>(RunContext&)>& body) {
  RunContext ctx(common, 4096);
  ThreadIo& main = ctx.main();
  Status st = InitMarkers(main.log());
  const uint64_t start_ns = MonotonicNs();
  const std::string label = "workload." + scenario;
  Result<ScenarioResult> result = Status::Internal("not run");
  if (st.ok()) {
    main.Begin(label);
    result = body(ctx);
    // The final marker: everything after it (the op log file, the summary on stdout) is the
    // generator's own bookkeeping, not workload I/O.
    main.End(label);
    st = result.status();
  }
  const double seconds = static_cast<double>(MonotonicNs() - start_ns) / 1e9;

  if (!common.log_path.empty()) {
    const Status ls = ctx.log().WriteJsonl(common.log_path);
    if (!ls.ok()) {
      std::fprintf(stderr, "iotwin-workload: %s\n", ls.ToString().c_str());
      if (st.ok()) st = ls;
    }
  }
  if (!st.ok()) {
    std::fprintf(stderr, "iotwin-workload %s: error: %s\n", scenario.c_str(),
                 st.ToString().c_str());
    return ExitCodeFor(st);
  }
  if (!common.quiet) {
    const IoCounters t = ctx.Totals();
    nlohmann::ordered_json j;
    j["scenario"] = scenario;
    j["seed"] = common.seed;
    j["threads"] = common.threads;
    j["ops"] = t.ops;
    j["bytes"] = t.read_bytes + t.write_bytes;
    j["read_bytes"] = t.read_bytes;
    j["write_bytes"] = t.write_bytes;
    j["seconds"] = seconds;
    j["files"] = result->files;
    for (auto it = result->extra.begin(); it != result->extra.end(); ++it) j[it.key()] = it.value();
    if (!common.log_path.empty()) {
      j["log"] = common.log_path;
      j["log_entries"] = ctx.log().size();
    }
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return kExitOk;
}

CLI::App* AddVectorSearchCommand(CLI::App& app, CommonOptions& common, VectorOptions& vs) {
  CLI::App* vs_cmd = app.add_subcommand(
      "vector-search",
      "DiskANN-style on-disk graph index: build it, then beam searches reading W 4 KiB nodes per "
      "hop");
  AddCommon(vs_cmd, common, true);
  vs_cmd->add_flag("--small", vs.small, "A small data set and few queries (tests; about a second)");
  vs_cmd->add_option("--phase", vs.phase, "build (write the index), search, or both")
      ->check(CLI::IsMember({"build", "search", "both"}))
      ->capture_default_str();
  vs_cmd->add_option("--vectors", vs.vectors, "N: vectors in the data set")->capture_default_str();
  vs_cmd->add_option("--dim", vs.dim, "D: float32 coordinates per vector")->capture_default_str();
  vs_cmd->add_option("--clusters", vs.clusters, "Clusters of the generated data set")
      ->capture_default_str();
  vs_cmd->add_option("--degree", vs.degree, "R: most neighbours per node")->capture_default_str();
  vs_cmd->add_option("--build-list", vs.build_list, "L of the graph construction")
      ->capture_default_str();
  vs_cmd->add_option("--alpha", vs.alpha, "Vamana's pruning factor")->capture_default_str();
  vs_cmd->add_option("--pq-bytes", vs.pq_bytes, "Bytes per in-memory PQ code (divides --dim)")
      ->capture_default_str();
  vs_cmd->add_option("--queries", vs.queries, "Q: queries searched")->capture_default_str();
  vs_cmd->add_option("--search-list", vs.search_list, "L: candidates kept during a search")
      ->capture_default_str();
  vs_cmd->add_option("--beam", vs.beam, "W: node reads per hop, issued as one batch")
      ->capture_default_str();
  vs_cmd
      ->add_option("--rerank", vs.rerank,
                   "Re-read the best N candidates after the search for exact distances (0: "
                   "rank by the vectors read on the way)")
      ->capture_default_str();
  vs_cmd
      ->add_option("--recall-sample", vs.recall_sample,
                   "Queries whose recall@10 is checked against brute force")
      ->capture_default_str();
  vs_cmd->add_option("--io", vs.io, "uring (io_uring), libaio, or pread (one read at a time)")
      ->check(CLI::IsMember({"uring", "libaio", "pread"}))
      ->capture_default_str();
  vs_cmd->add_flag("--buffered", vs.buffered,
                   "Read and write through the page cache, not O_DIRECT");
  vs_cmd->add_option("--read-log", vs.read_log,
                     "Write every node read of the search (JSON Lines: query, hop, offset, the "
                     "read it depended on) to this file after the run");
  return vs_cmd;
}

int RunVectorSearchCommand(CLI::App* vs_cmd, const CommonOptions& common, VectorOptions& vs) {
  if (vs.small) {
    ApplyVectorSmallPreset(
        vs, [&](std::string_view name) { return vs_cmd->count("--" + std::string(name)) > 0; });
  }
  VectorReadLog reads;
  const int rc = Run("vector-search", common,
                     [&](RunContext& ctx) { return RunVectorSearch(vs, ctx, reads); });
  if (rc != kExitOk || vs.read_log.empty()) return rc;
  // Like the op log, written after the run: the workload's bookkeeping, not its I/O.
  const Status st = reads.Write(vs.read_log);
  if (!st.ok()) {
    std::fprintf(stderr, "iotwin-workload: %s\n", st.ToString().c_str());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"iotwin-workload: deterministic AI-storage workloads (see docs/workloads.md)",
               "iotwin-workload"};
  app.require_subcommand(1);

  CommonOptions common;

  KvOptions kv;
  CLI::App* kv_cmd = app.add_subcommand(
      "kv-offload", "LMCache-style KV-cache offload: one file per 256-token chunk, put then get");
  AddCommon(kv_cmd, common, true);
  kv_cmd->add_option("--layers", kv.layers, "Model layers")->capture_default_str();
  kv_cmd->add_option("--kv-heads", kv.kv_heads, "KV heads")->capture_default_str();
  kv_cmd->add_option("--head-dim", kv.head_dim, "Head dimension")->capture_default_str();
  kv_cmd->add_option("--dtype-bytes", kv.dtype_bytes, "Bytes per element")->capture_default_str();
  kv_cmd->add_option("--chunk-tokens", kv.chunk_tokens, "Tokens per chunk (LMCache chunk_size)")
      ->capture_default_str();
  kv_cmd->add_option("--chunks", kv.chunks, "Chunks (files) to put")->capture_default_str();
  kv_cmd->add_option("--gets", kv.gets, "Chunk reads in the get phase (with reuse)")
      ->capture_default_str();
  kv_cmd->add_option("--dist", kv.dist, "Chunk choice for gets")
      ->check(CLI::IsMember({"zipf", "uniform"}))
      ->capture_default_str();
  kv_cmd->add_option("--zipf-theta", kv.zipf_theta, "Zipf skew for --dist zipf")
      ->capture_default_str();
  kv_cmd->add_option("--io", kv.io, "buffered (pread/pwrite), direct (O_DIRECT), uring (io_uring)")
      ->check(CLI::IsMember({"buffered", "direct", "uring"}))
      ->capture_default_str();
  kv_cmd->add_flag("--direct", kv.direct, "O_DIRECT with --io uring");
  kv_cmd->add_option("--qd", kv.qd, "io_uring queue depth")->capture_default_str();
  kv_cmd->add_option("--phase", kv.phase, "put, get, or both (put all, then get)")
      ->check(CLI::IsMember({"put", "get", "both"}))
      ->capture_default_str();
  kv_cmd->add_option("--io-size", kv.io_size, "Bytes per request moving a chunk")
      ->transform(iotwin::cli::SizeUnits())
      ->capture_default_str();
  kv_cmd->add_flag("--fsync", kv.fsync, "fsync each chunk after writing it");
  kv_cmd->add_flag("--verify", kv.verify, "Check the content of every chunk read");
  kv_cmd->add_option("--compute-us", kv.compute_us,
                     "Model compute per chunk in microseconds (sleeps before each put and after "
                     "each get): the think time between an engine's KV transfers")
      ->transform(iotwin::cli::DurationUnits(1e3, "us", true))
      ->capture_default_str();

  ModelOptions model;
  CLI::App* model_cmd = app.add_subcommand(
      "model-load", "safetensors weight shards: --prepare creates them, then load them");
  AddCommon(model_cmd, common, true);
  model_cmd->add_flag("--prepare", model.prepare, "Create the shards, then load them");
  model_cmd->add_flag("--prepare-only", model.prepare_only, "Create the shards and stop");
  model_cmd->add_option("--shards", model.shards, "Shard files")->capture_default_str();
  model_cmd->add_option("--shard-mb", model.shard_mb, "Approximate MiB per shard (--prepare)")
      ->transform(iotwin::cli::SizeUnits(1 << 20, "MiB"))
      ->capture_default_str();
  model_cmd->add_option("--hidden", model.hidden, "Hidden size of the synthetic model (--prepare)")
      ->capture_default_str();
  model_cmd
      ->add_option("--mode", model.mode,
                   "mmap (safetensors), pread (sequential preads per tensor), direct-async "
                   "(DeepSpeed: O_DIRECT libaio blocks)")
      ->check(CLI::IsMember({"mmap", "pread", "direct-async"}))
      ->capture_default_str();
  model_cmd->add_option("--io-size", model.io_size, "pread request size")
      ->transform(iotwin::cli::SizeUnits())->capture_default_str();
  model_cmd->add_option("--block-mb", model.block_mb, "direct-async block size in MiB")
      ->transform(iotwin::cli::SizeUnits(1 << 20, "MiB"))
      ->capture_default_str();
  model_cmd->add_option("--qd", model.qd, "direct-async queue depth")->capture_default_str();
  model_cmd->add_flag("--drop-cache", model.drop_cache,
                      "posix_fadvise(DONTNEED) each shard before loading it (cold cache)");
  model_cmd->add_flag("--verify", model.verify, "Check the content of everything loaded");

  MicroOptions micro;
  CLI::App* micro_cmd = app.add_subcommand("micro", "Simple read/write loops");
  AddCommon(micro_cmd, common, true);
  micro_cmd->add_option("--op", micro.op, "read, write, pread, pwrite, randread, randwrite")
      ->check(CLI::IsMember({"read", "write", "pread", "pwrite", "randread", "randwrite"}))
      ->capture_default_str();
  micro_cmd->add_option("--size", micro.size, "Bytes per operation")
      ->transform(iotwin::cli::SizeUnits())->capture_default_str();
  micro_cmd->add_option("--file-mb", micro.file_mb, "File size in MiB")
      ->transform(iotwin::cli::SizeUnits(1 << 20, "MiB"))->capture_default_str();
  micro_cmd->add_option("--ops", micro.ops,
                        "Operations per thread (default 1024 without --seconds)");
  micro_cmd->add_option("--seconds", micro.seconds, "Stop after this many seconds")
      ->transform(iotwin::cli::DurationUnits(1e9, "s"));
  micro_cmd->add_flag("--per-thread-files", micro.per_thread_files,
                      "Each thread its own file (default: one shared file, one fd per thread)");
  micro_cmd->add_option("--rate", micro.rate, "Total operations per second, 0 = unpaced")
      ->capture_default_str();
  micro_cmd->add_flag("--direct", micro.direct, "O_DIRECT");
  micro_cmd->add_option("--pattern", micro.pattern,
                        "seq, rand or stride:N (default: rand for randread/randwrite, else seq)");

  CheckpointOptions ckpt;
  CLI::App* ckpt_cmd = app.add_subcommand(
      "checkpoint", "A distributed checkpoint: each rank saves its shard (sequential writes, "
                    "fsync), rank 0 the metadata, then each rank loads a reshard; run alone or "
                    "under mpirun");
  AddCommon(ckpt_cmd, common, false);
  ckpt_cmd->add_option("--rank", ckpt.rank,
                       "This rank (default: OMPI_COMM_WORLD_RANK or PMI_RANK, else 0)");
  ckpt_cmd->add_option("--ranks", ckpt.ranks,
                       "Ranks in the job (default: OMPI_COMM_WORLD_SIZE or PMI_SIZE, else 1)");
  ckpt_cmd->add_option("--job", ckpt.job,
                       "The job's name in the marker files the ranks meet through (default: "
                       "PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid or SLURM_JOB_ID, else local)");
  ckpt_cmd->add_option("--shard-mb", ckpt.shard_mb, "Each rank's shard")
      ->transform(iotwin::cli::SizeUnits(1 << 20, "MiB"))->capture_default_str();
  ckpt_cmd->add_option("--write-size", ckpt.write_size, "Bytes per write of a shard")
      ->transform(iotwin::cli::SizeUnits())->capture_default_str();
  ckpt_cmd->add_option("--read-size", ckpt.read_size, "Bytes per read of the reshard")
      ->transform(iotwin::cli::SizeUnits())->capture_default_str();
  ckpt_cmd->add_option("--wait", ckpt.wait_s, "Seconds a rank waits for the others")
      ->transform(iotwin::cli::DurationUnits(1e9, "s"))->capture_default_str();
  ckpt_cmd->add_flag("--verify", ckpt.verify, "Check the content of every byte loaded");

  MixedOptions mixed;
  mixed.kv.gets = 64;
  mixed.model.shard_mb = 4;
  CLI::App* mixed_cmd = app.add_subcommand(
      "mixed", "Three threads at once: KV gets, model shard preads, a journal writer");
  AddCommon(mixed_cmd, common, false);
  mixed_cmd->add_option("--chunks", mixed.kv.chunks, "KV chunks")->capture_default_str();
  mixed_cmd->add_option("--gets", mixed.kv.gets, "KV chunk reads")->capture_default_str();
  mixed_cmd->add_option("--shards", mixed.model.shards, "Model shards")->capture_default_str();
  mixed_cmd->add_option("--shard-mb", mixed.model.shard_mb, "MiB per shard")
      ->transform(iotwin::cli::SizeUnits(1 << 20, "MiB"))->capture_default_str();
  mixed_cmd->add_option("--writes", mixed.writes, "Journal writes")->capture_default_str();
  mixed_cmd->add_option("--write-size", mixed.write_size, "Bytes per journal write")
      ->transform(iotwin::cli::SizeUnits())
      ->capture_default_str();
  mixed_cmd->add_option("--fsync-every", mixed.fsync_every, "fsync the journal every N writes")
      ->capture_default_str();

  VectorOptions vs;
  CLI::App* vs_cmd = AddVectorSearchCommand(app, common, vs);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "iotwin-workload: error: %s\nRun with --help for the options.\n",
                 e.what());
    return kExitUsage;
  }
  if (common.dir.empty()) {
    std::fprintf(stderr, "iotwin-workload: error: --dir must not be empty\n");
    return kExitUsage;
  }

  if (kv_cmd->parsed()) {
    return Run("kv-offload", common, [&](RunContext& ctx) { return RunKvOffload(kv, ctx); });
  }
  if (model_cmd->parsed()) {
    return Run("model-load", common, [&](RunContext& ctx) { return RunModelLoad(model, ctx); });
  }
  if (ckpt_cmd->parsed()) {
    return Run("checkpoint", common, [&](RunContext& ctx) { return RunCheckpoint(ckpt, ctx); });
  }
  if (micro_cmd->parsed()) {
    return Run("micro", common, [&](RunContext& ctx) { return RunMicro(micro, ctx); });
  }
  if (mixed_cmd->parsed()) {
    common.threads = 3;
    return Run("mixed", common, [&](RunContext& ctx) { return RunMixed(mixed, ctx); });
  }
  if (vs_cmd->parsed()) return RunVectorSearchCommand(vs_cmd, common, vs);
  return kExitUsage;
}
