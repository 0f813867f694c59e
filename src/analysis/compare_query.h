// compare's per-query measures: where the original marks its queries and their hops with intent
// markers (`query`, and `hop` or `rerank` inside it, as iotwin-workload vector-search does), the
// replay is judged query by query: were the queries' reads issued, was each hop issued only after
// the previous hop's reads completed (dependent hops per query), did each hop keep its reads in
// flight together (queue depth), and how long did each query's reads take (per-query latency).
//
// A replay carries no markers: its reads are matched to the original's by thread (compare's
// thread pairs), offset and length, in order, and take the query and hop of their match. Every
// time is the trace's own: a read's issue (call entry or async submission) and completion (call
// exit or async completion). docs/workloads.md (vector-search, "Comparing it") lists the
// measures and their thresholds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/compare_timing.h"
#include "analysis/sequence.h"
#include "base/status.h"
#include "format/trace_reader.h"

namespace iotwin::analysis {

struct QueryMeasure {
  const char* name;
  double value;
  nlohmann::json original, replay;
  nlohmann::json recorded_original = nullptr;  // the original's own figure, where `original` is paced
};

struct QueryComparison {
  bool present = false;  // the original marks queries: the measures below were computed
  std::vector<QueryMeasure> measures;
  nlohmann::json detail;  // compare's "queries": counts, hops, latency percentiles, differences
};

// `base` followed by the per-query measures (compare's Measures()).
std::vector<MeasureSpec> WithQueryMeasures(std::vector<MeasureSpec> base);

// The reads of one trace and, with `markers`, its query and hop phases: what the per-query
// measures need, gathered record by record in compare's one pass over the trace.
class QueryReads {
 public:
  explicit QueryReads(bool markers);
  ~QueryReads();
  QueryReads(QueryReads&&) noexcept;
  QueryReads& operator=(QueryReads&&) noexcept;

  // One record, in file order; `reader` (the one that returned it) names the markers' labels.
  void Add(const iot_rec_hdr* rec, const TraceReader& reader);
  // After the last record: async reads take their completions, everything sorts by time.
  void Finish();
  // After Finish: whether the trace marks a query (the per-query measures apply).
  bool HasQueries() const;

  struct Data;  // compare_query.cc
  const Data& data() const { return *data_; }

 private:
  std::unique_ptr<Data> data_;
};

// Whether the trace's summary says it holds no intent marker (then it has no query to judge).
bool SummarySaysNoMarkers(const TraceReader& reader);

// The per-query measures of `original` (gathered with markers) against `replay`; nothing where
// either is null or the original marks no query. Threads pair as compare paired them (`pairs` of
// `ta`, `tb`).
// `paced` (a replay paced original or gaps): per-query latency is judged against the original's
// queries on that timeline, each read issued where its call was paced and taking what its match
// took in the replay (a query's time is mostly its reads' device time, which pacing does not
// control); hops and depths are judged on the traces' own times.
QueryComparison CompareQueries(const QueryReads* original, const QueryReads* replay,
                               const std::vector<ThreadSeq>& ta, const std::vector<ThreadSeq>& tb,
                               const std::vector<ThreadPair>& pairs,
                               const PacedTimeline* paced = nullptr);

// compare's likely causes for the per-query measures in `failed` (names): what differed, with
// the first query that shows it.
nlohmann::json QueryCauses(const QueryComparison& q, const nlohmann::json& failed);

}  // namespace iotwin::analysis
