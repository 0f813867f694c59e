// Merging the traces of a job's hosts into one trace (`iotwin merge`, docs/multi-host.md).
//
// Each input is read once, record by record (one record per input held at a time), its
// timestamps moved onto the first input's clock from the anchors in the headers (and measured
// offsets where given), its process identities, kernel object identities and string ids folded
// so that two hosts' never collide, and the inputs interleaved by aligned time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "format/trace_writer.h"

namespace iotwin {

struct MergeInput {
  std::string path;
  std::string name;  // the host's name in the merged trace; empty: the header's hostname
};

// A host's realtime clock minus the reference's (the first input's), measured at launch.
struct MergeOffset {
  std::string host;
  int64_t offset_ns = 0;
  std::optional<uint64_t> error_ns;  // the measurement's error (half a ping-pong's round trip)
};

struct MergeOptions {
  std::vector<MergeInput> inputs;
  std::vector<MergeOffset> offsets;
  std::string output;
  TraceWriterOptions writer;
  // The merged header's `replay` object (`replay --mpi --record`: the whole job's replay facts
  // and thread map); null keeps the reference's.
  nlohmann::json replay;
};

struct MergeResult {
  uint64_t records = 0;                    // records written, STRING included
  std::vector<uint64_t> records_per_host;  // records read from each input, STRING excluded
  nlohmann::json meta;                     // the merged trace's header
};

// Parses `HOST=NS[:ERR]` (the command line's --offset).
Result<MergeOffset> ParseMergeOffset(const std::string& spec);

Result<MergeResult> MergeTraces(const MergeOptions& options);

}  // namespace iotwin
