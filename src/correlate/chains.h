// Dependent read chains (docs/block-layer.md, "Dependent read chains"): per thread, a sequence of
// read batches where each batch was issued only after every read of the batch before it had
// completed, as a graph-index search reads hop after hop.
//
// A batch is one read call (pread and friends), the async reads submitted by one io_uring_enter
// or io_submit call, or the reads inside one `hop` marker. Where the thread marked its queries
// (`query` begin/end markers), a chain is the reads of one query. Elsewhere a chain is cut where
// the next batch was issued before the previous one completed, where the thread spent longer
// than the gap threshold between them (think time), or where the next batch reads again a block
// the chain already read (one query's hops read each node once; the next query starts again at
// the entry node). A chain cut by a gap keeps the entry blocks of the one before it, so that a
// query split by preemption still ends where the next query reads the entry node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "correlate/correlate.h"

namespace iotwin::correlate {

struct ChainOptions {
  uint64_t gap_ns = 1'000'000;  // longest user time between dependent batches without markers
  size_t min_reads = 3;       // shorter chains are not reported
  std::string query_marker = "query";  // empty: ignore markers
  std::string hop_marker = "hop";
};

// One read of a chain: a read call or an async read request.
struct ChainRead {
  uint64_t issue_ts = 0;     // call entry or async submission
  uint64_t complete_ts = 0;  // call exit or async completion
  uint64_t offset = 0, length = 0;
  size_t syscall = kNone;  // index into Correlation::syscalls
  size_t async = kNone;    // index into Correlation::asyncs
};

// One batch (hop) of a chain: reads [first, first + reads) of the chain.
struct ChainHop {
  size_t first = 0, reads = 0;
  uint64_t start_ts = 0, end_ts = 0;  // first issue, last completion
  uint64_t device_ns = 0;  // union of the device time of its requests inside [start, end)
};

// Why a chain ended where it did.
enum class ChainCut : uint8_t {
  kEnd,           // the thread read nothing more
  kQueryMarker,   // the next batch belongs to another query marker
  kNotDependent,  // the next batch was issued before this one completed
  kGap,           // more than gap_ns between this batch's completion and the next issue
  kReRead,        // the next batch reads a block this chain already read
};
const char* ChainCutName(ChainCut c);

struct Chain {
  uint32_t tid = 0;
  bool by_marker = false;  // the reads of one query marker
  std::vector<ChainRead> reads;
  std::vector<ChainHop> hops;
  ChainCut cut = ChainCut::kEnd;
  uint64_t span_ns() const { return hops.back().end_ts - hops.front().start_ts; }
};

struct ChainDetection {
  std::vector<Chain> chains;  // of at least min_reads reads, by thread then time
  bool device_time = false;   // the block layer was recorded: hops have device time
  uint64_t short_runs = 0;    // runs of batches too short to report
};

ChainDetection DetectChains(const Correlation& c, const ChainOptions& o);

// The layers report's "dependent_chains" section (keys in docs/block-layer.md): counts, how
// chains were told apart, per-chain hops, reads per hop, time per hop split into software and
// device, the estimate of in-kernel resubmission, and every chain's members as [issue_ts, offset]
// (with the chain's tid: the ts of a read call or of an async submission in the trace). "top"
// holds the first `top` chains without members.
nlohmann::json DependentChainsJson(const Correlation& c, const ChainOptions& o, size_t top);

}  // namespace iotwin::correlate
